// CUDA arrays on the client (issue 11, item 2).  An array is a server object named by an id this
// process chooses, so creating one is an asynchronous request.  Copies between arrays and device
// memory are one ArrayCopy request; host memory is staged through a device buffer of the array's
// GPU in chunks of at most kStageBytes, its bytes carried by the ordinary (bulk, pipelined)
// 2-D copies: only the box's bytes travel, never the array's padding.
#include <algorithm>
#include <vector>

#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {

constexpr size_t kStageBytes = 32u << 20;

uint64_t u64(const void* p) { return reinterpret_cast<uint64_t>(p); }

// Dimensions of an array, at least 1 each.
void dims(const Client::ArrayDesc& d, uint64_t* w, uint64_t* h, uint64_t* z) {
  *w = std::max<uint64_t>(d.width, 1);
  *h = std::max<uint64_t>(d.height, 1);
  *z = std::max<uint64_t>(d.depth, 1);
}

}  // namespace

CudaError Client::array_create(int dev, const ArrayDesc& d, uint64_t* id) {
  if (!id) return err::InvalidValue;
  if (check_device(dev) != err::Success) return err::InvalidDevice;
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  uint64_t n = next_array_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(arrays_mu_);
    arrays_[n] = ArrayRecord{dev, d, 0, {}};
  }
  e = l->call<ArrayCreateMsg>(ArrayCreateReq{devices_[dev].spec.gpu, n, d.width, d.height, d.depth,
                                             d.format, d.channels, d.flags, d.levels});
  if (e != err::Success) {
    std::lock_guard<std::mutex> lock(arrays_mu_);
    arrays_.erase(n);
    return e;
  }
  *id = n;
  return err::Success;
}

CudaError Client::array_level(uint64_t mipmapped, uint32_t level, uint64_t* id) {
  if (!id) return err::InvalidValue;
  ArrayRecord r;
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(arrays_mu_);
    auto it = arrays_.find(mipmapped);
    if (it == arrays_.end() || it->second.desc.levels == 0) return errc::InvalidResourceHandle;
    if (level >= it->second.desc.levels) return err::InvalidValue;
    if (auto l = it->second.named.find(level); l != it->second.named.end()) {
      *id = l->second;
      return err::Success;
    }
    r = it->second;
    n = next_array_.fetch_add(1);
    ArrayDesc d = r.desc;
    d.levels = 0;
    bool layers = d.flags & 0x05;  // CUDA_ARRAY3D_LAYERED, _CUBEMAP: depth counts layers
    auto shrink = [&](uint64_t v) { return v ? std::max<uint64_t>(v >> level, 1) : 0; };
    d.width = shrink(d.width), d.height = shrink(d.height);
    if (!layers) d.depth = shrink(d.depth);
    arrays_[n] = ArrayRecord{r.device, d, mipmapped, {}};
    it->second.named[level] = n;
  }
  CudaError e;
  ServerLink* l = link(r.device, &e);
  if (l)
    e = l->call<ArrayLevelMsg>(ArrayLevelReq{devices_[r.device].spec.gpu, mipmapped, level, n});
  if (e != err::Success) return e;
  *id = n;
  return err::Success;
}

CudaError Client::array_destroy(uint64_t id, bool mipmapped) {
  int dev;
  {
    std::lock_guard<std::mutex> lock(arrays_mu_);
    auto it = arrays_.find(id);
    if (it == arrays_.end() || (it->second.desc.levels != 0) != mipmapped || it->second.owner)
      return errc::InvalidResourceHandle;
    dev = it->second.device;
    for (auto& [level, named] : it->second.named) arrays_.erase(named);
    arrays_.erase(id);
  }
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  return l->call<ArrayDestroyMsg>(ArrayDestroyReq{devices_[dev].spec.gpu, id});
}

bool Client::array_record(uint64_t id, bool mipmapped, ArrayRecord* out) {
  std::lock_guard<std::mutex> lock(arrays_mu_);
  auto it = arrays_.find(id);
  if (it == arrays_.end() || (it->second.desc.levels != 0) != mipmapped) return false;
  if (out) *out = it->second;
  return true;
}

CudaError Client::texture1d_linear_max_width(int dev, uint32_t format, uint32_t channels,
                                             size_t* width) {
  if (!width) return err::InvalidValue;
  if (check_device(dev) != err::Success) return err::InvalidDevice;
  ArrayQueryRep rep;
  CudaError e = forward<ArrayQueryMsg>(
      dev,
      ArrayQueryReq{0, format | uint64_t{channels} << 32, proto::kQueryTexture1DLinearMaxWidth},
      &rep);
  if (e != err::Success) return e;
  if (rep.values.empty()) return err::Unknown;
  *width = static_cast<size_t>(rep.values[0]);
  return err::Success;
}

CudaError Client::array_query(uint64_t id, bool mipmapped, int dev, uint32_t op,
                              std::vector<uint64_t>* values) {
  ArrayRecord r;
  if (!values) return err::InvalidValue;
  if (!array_record(id, mipmapped, &r)) return errc::InvalidResourceHandle;
  if (check_device(dev) != err::Success) return err::InvalidDevice;
  if (dev != r.device) {
    LOG_ERROR("array query: the array belongs to device %d, not device %d", r.device, dev);
    return err::InvalidDevice;
  }
  ArrayQueryRep rep;
  CudaError e = forward<ArrayQueryMsg>(dev, ArrayQueryReq{0, id, op}, &rep);
  if (e == err::Success) *values = rep.values;
  return e;
}

CudaError Client::array_copy(const ArraySide& dst, const ArraySide& src, size_t width,
                             size_t height, size_t depth, CopyKind kind, const Stream* s) {
  if (static_cast<int>(kind) < 0 || kind > CopyKind::Default) return err::InvalidMemcpyDirection;
  if (width == 0 || height == 0 || depth == 0) return err::Success;
  // Each side: an array (checked against its box), device memory (one allocation holds the
  // box) or host memory.
  struct Where {
    bool array = false, device = false;
    int dev = -1;
  } where[2];
  const ArraySide* sides[2] = {&src, &dst};
  for (int i = 0; i < 2; ++i) {
    const ArraySide& a = *sides[i];
    if (a.array) {
      ArrayRecord r;
      if (!array_record(a.array, false, &r)) return errc::InvalidResourceHandle;
      uint64_t w, h, d;
      dims(r.desc, &w, &h, &d);
      uint64_t row = w * r.desc.element;
      if (a.x % r.desc.element || width % r.desc.element || a.x > row || width > row - a.x ||
          a.y > h || height > h - a.y || a.z > d || depth > d - a.z)
        return err::InvalidValue;
      where[i] = {true, true, r.device};
      continue;
    }
    if (!a.ptr) return err::InvalidValue;
    if ((height > 1 || depth > 1) && width > a.pitch) return err::InvalidPitchValue;
    if (depth > 1 && a.slice_rows < height) return err::InvalidValue;
    uint64_t first = u64(a.ptr) + a.z * a.pitch * a.slice_rows + a.y * a.pitch + a.x;
    uint64_t extent = (depth - 1) * a.pitch * a.slice_rows + (height - 1) * a.pitch + width;
    int dev = -1;
    if (map_.device_range_ok(first, extent, &dev)) where[i] = {false, true, dev};
  }
  if (!where[0].array && !where[1].array) return err::InvalidValue;
  if (kind == CopyKind::HostToHost) return err::InvalidMemcpyDirection;
  int dev = where[0].array ? where[0].dev : where[1].dev;
  for (auto& w : where)
    if (w.device && w.dev != dev) {
      LOG_ERROR("array copy: operands on devices %d and %d; an array is used on its own device",
                where[0].dev, where[1].dev);
      return err::InvalidValue;
    }
  if (s && s->device != dev) {
    LOG_ERROR("array copy: the stream belongs to device %d, the array to device %d", s->device,
              dev);
    return err::InvalidValue;
  }
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  uint64_t stream = s ? s->id : 0;
  auto request = [&](const ArraySide& d, const ArraySide& sr, size_t w, size_t h, size_t z) {
    return l->call<ArrayCopyMsg>(ArrayCopyReq{
        devices_[dev].spec.gpu, stream, sr.array, u64(sr.ptr), sr.pitch, sr.slice_rows, sr.x, sr.y,
        sr.z, d.array, u64(d.ptr), d.pitch, d.slice_rows, d.x, d.y, d.z, w, h, z});
  };
  if (where[0].device && where[1].device) {
    e = request(dst, src, width, height, depth);
    return e == err::Success && !s ? stream_synchronize(Stream{dev, 0, 0, 0}) : e;
  }
  // Host memory on one side: chunks of whole slices, or of rows of one slice, through a packed
  // device buffer.
  const bool to_array = where[1].array;
  const ArraySide& host = to_array ? src : dst;
  const ArraySide& arr = to_array ? dst : src;
  size_t slice = width * height, chunk_rows = height, chunk_slices = 1;
  if (slice <= kStageBytes)
    chunk_slices = std::min(depth, std::max<size_t>(1, kStageBytes / slice));
  else
    chunk_rows = std::max<size_t>(1, kStageBytes / width);
  void* stage = nullptr;
  if ((e = malloc(dev, width * chunk_rows * chunk_slices, &stage)) != err::Success) return e;
  for (size_t z = 0; z < depth && e == err::Success; z += chunk_slices) {
    size_t nz = std::min(chunk_slices, depth - z);
    for (size_t y = 0; y < height && e == err::Success; y += chunk_rows) {
      size_t ny = std::min(chunk_rows, height - y);
      ArraySide a = arr;
      a.y += y, a.z += z;
      ArraySide st{0, stage, width, ny, 0, 0, 0};
      const char* h = static_cast<const char*>(host.ptr) + host.x +
                      (host.z + z) * host.pitch * host.slice_rows + (host.y + y) * host.pitch;
      // The host rows of nz slices of ny rows: one 2-D copy per slice unless they follow on.
      auto move = [&](bool in) {
        bool flat = nz == 1 || host.slice_rows == ny;
        for (size_t k = 0; k < (flat ? 1 : nz); ++k) {
          size_t rows = flat ? ny * nz : ny;
          char* sp = static_cast<char*>(stage) + k * width * ny;
          char* hp = const_cast<char*>(h) + k * host.pitch * host.slice_rows;
          CudaError r =
              in ? (s ? memcpy2d_async(sp, width, hp, host.pitch, width, rows,
                                       CopyKind::HostToDevice, *s)
                      : memcpy2d(sp, width, hp, host.pitch, width, rows, CopyKind::HostToDevice))
                 : (s ? memcpy2d_async(hp, host.pitch, sp, width, width, rows,
                                       CopyKind::DeviceToHost, *s)
                      : memcpy2d(hp, host.pitch, sp, width, width, rows, CopyKind::DeviceToHost));
          if (r != err::Success) return r;
        }
        return err::Success;
      };
      if (to_array) {
        if ((e = move(true)) == err::Success) e = request(a, st, width, ny, nz);
      } else {
        if ((e = request(st, a, width, ny, nz)) == err::Success) e = move(false);
      }
    }
  }
  // Freed once the GPU is past the copies (the server defers a free until then).
  CudaError f = free(stage);
  return e != err::Success ? e : f;
}

CudaError Client::texture_create(int dev, TexCreateReq req, uint64_t* object) {
  if (!object) return err::InvalidValue;
  if (check_device(dev) != err::Success) return err::InvalidDevice;
  if (req.res_type <= 1) {
    ArrayRecord r;
    if (!array_record(req.array, req.res_type == 1, &r)) return errc::InvalidResourceHandle;
    if (r.device != dev) {
      LOG_ERROR("%s object: the array belongs to device %d, not the current device %d",
                req.surface ? "surface" : "texture", r.device, dev);
      return err::InvalidValue;
    }
  } else {
    int d = -1;
    uint64_t extent = req.res_type == 2 ? req.width : req.pitch * req.height;
    if (!map_.device_range_ok(req.ptr, extent, &d) || d != dev) return err::InvalidValue;
  }
  TexCreateRep rep;
  CudaError e = forward<TexCreateMsg>(dev, req, &rep);
  if (e == err::Success) *object = rep.object;
  return e;
}

CudaError Client::texture_destroy(int dev, bool surface, uint64_t object) {
  if (check_device(dev) != err::Success) return err::InvalidDevice;
  return forward<TexDestroyMsg>(dev, TexDestroyReq{0, surface ? 1u : 0u, object});
}

}  // namespace rgpu::client
