// Device settings, pitched allocations, 3-D copies and memsets on the client (issue 11 items 6
// and 7).  Settings of a GPU's context travel as DeviceConfig requests; 3-D copies and memsets
// are rows of the existing 2-D copies and 1-D memsets, so they take the same bulk path (payloads
// in chunks, pipelined) and need nothing new on the server.  Memsets of page-locked host memory
// are done here (fill_host).
#include <cstdio>
#include <cstring>
#include <vector>

#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {

uint64_t u64(const void* p) { return reinterpret_cast<uint64_t>(p); }

// CUDA's pitch alignment for cudaMallocPitch (cuMemAllocPitch): 512 bytes on every GPU CUDA 13
// supports, never less than the texture pitch alignment the device reports.
constexpr size_t kPitchAlignment = 512;

// Bytes from a box's first byte to just past its last: (depth-1) slices, (height-1) rows and one
// row's width; false when that overflows.
bool box_extent(size_t pitch, size_t slice_rows, size_t width, size_t height, size_t depth,
                size_t* out) {
  size_t slice = 0, slices = 0, rows = 0, total = 0;
  if (__builtin_mul_overflow(pitch, slice_rows, &slice) ||
      __builtin_mul_overflow(slice, depth - 1, &slices) ||
      __builtin_mul_overflow(pitch, height - 1, &rows) ||
      __builtin_add_overflow(slices, rows, &total) || __builtin_add_overflow(total, width, out))
    return false;
  return true;
}

// The rows of a box as runs of contiguous bytes: rows that follow each other merge (`merge`).
struct Run {
  uint64_t start;
  size_t bytes;
};
std::vector<Run> box_runs(uint64_t base, size_t pitch, size_t slice_rows, size_t width,
                          size_t height, size_t depth, bool merge = true) {
  std::vector<Run> runs;
  for (size_t z = 0; z < depth; ++z)
    for (size_t y = 0; y < height; ++y) {
      uint64_t p = base + z * pitch * slice_rows + y * pitch;
      if (merge && !runs.empty() && runs.back().start + runs.back().bytes == p)
        runs.back().bytes += width;
      else
        runs.push_back({p, width});
    }
  return runs;
}

}  // namespace

CudaError Client::device_config(int dev, uint32_t op, uint32_t key, uint64_t* value) {
  if (check_device(dev) != err::Success) return err::InvalidDevice;
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  DeviceConfigRep rep;
  e = l->call<DeviceConfigMsg>(DeviceConfigReq{devices_[dev].spec.gpu, op, key, value ? *value : 0},
                               &rep);
  if (e == err::Success && value) *value = rep.value;
  return e;
}

CudaError Client::p2p_attribute(int dev, int peer, uint32_t attr, int* value) {
  if (!value) return err::InvalidValue;
  if (check_device(dev) != err::Success || check_device(peer) != err::Success || dev == peer)
    return err::InvalidDevice;
  if (attr < 1 || attr > 5) return err::InvalidValue;
  if (devices_[dev].link != devices_[peer].link ||
      devices_[dev].spec.gpu == devices_[peer].spec.gpu) {
    *value = 0;  // no link between them
    return err::Success;
  }
  uint64_t v = devices_[peer].spec.gpu;
  CudaError e = device_config(dev, static_cast<uint32_t>(DeviceConfigOp::P2PAttribute), attr, &v);
  if (e == err::Success) *value = static_cast<int>(static_cast<int64_t>(v));
  return e;
}

CudaError Client::malloc_pitch(int dev, size_t width, size_t height, void** ptr, size_t* pitch) {
  if (!ptr || !pitch) return err::InvalidValue;
  const DeviceInfo* info = nullptr;
  if (CudaError e = device_info(dev, &info); e != err::Success) return e;
  size_t align = kPitchAlignment;
  if (int tex = info->attr(51); tex > 0 && static_cast<size_t>(tex) > align) align = tex;
  if (width == 0 || height == 0) {  // as CUDA: no allocation, a null pointer
    *ptr = nullptr;
    *pitch = 0;
    return err::Success;
  }
  size_t p = (width + align - 1) / align * align, bytes = 0;
  if (p < width || __builtin_mul_overflow(p, height, &bytes)) return err::MemoryAllocation;
  if (int max_pitch = info->attr(11); max_pitch > 0 && p > static_cast<size_t>(max_pitch))
    return err::InvalidValue;
  if (CudaError e = malloc(dev, bytes, ptr); e != err::Success) return e;
  *pitch = p;
  return err::Success;
}

CudaError Client::memcpy3d(const Copy3D& c, const Stream* s) {
  if (c.width == 0 || c.height == 0 || c.depth == 0) return err::Success;
  if (c.depth > 1 && (c.dslice_rows < c.height || c.sslice_rows < c.height))
    return err::InvalidValue;
  size_t ignored;
  if (!box_extent(c.dpitch, c.dslice_rows, c.width, c.height, c.depth, &ignored) ||
      !box_extent(c.spitch, c.sslice_rows, c.width, c.height, c.depth, &ignored))
    return err::InvalidValue;
  auto copy = [&](void* d, const void* src, size_t rows) {
    return s ? memcpy2d_async(d, c.dpitch, src, c.spitch, c.width, rows, c.kind, *s)
             : memcpy2d(d, c.dpitch, src, c.spitch, c.width, rows, c.kind);
  };
  // Slices that follow each other on both sides: one 2-D copy of height * depth rows.
  if (c.depth == 1 || (c.dslice_rows == c.height && c.sslice_rows == c.height))
    return copy(c.dst, c.src, c.height * c.depth);
  for (size_t z = 0; z < c.depth; ++z) {
    CudaError e = copy(static_cast<char*>(c.dst) + z * c.dpitch * c.dslice_rows,
                       static_cast<const char*>(c.src) + z * c.spitch * c.sslice_rows, c.height);
    if (e != err::Success) return e;
  }
  return err::Success;
}

CudaError Client::memcpy3d_peer(const Copy3D& c, int dst_dev, int src_dev, const Stream* s) {
  if (check_device(dst_dev) != err::Success || check_device(src_dev) != err::Success)
    return err::InvalidDevice;
  if (c.width == 0 || c.height == 0 || c.depth == 0) return err::Success;
  Copy3D d = c;
  d.kind = CopyKind::DeviceToDevice;
  if (dst_dev == src_dev) return memcpy3d(d, s);
  if ((c.height > 1 || c.depth > 1) && (c.width > c.dpitch || c.width > c.spitch))
    return err::InvalidPitchValue;
  if (c.depth > 1 && (c.dslice_rows < c.height || c.sslice_rows < c.height))
    return err::InvalidValue;
  size_t dbytes = 0, sbytes = 0;
  if (!box_extent(c.dpitch, c.dslice_rows, c.width, c.height, c.depth, &dbytes) ||
      !box_extent(c.spitch, c.sslice_rows, c.width, c.height, c.depth, &sbytes))
    return err::InvalidValue;
  int dd = -1, sd = -1;
  if (!map_.device_range_ok(u64(c.dst), dbytes, &dd) || dd != dst_dev ||
      !map_.device_range_ok(u64(c.src), sbytes, &sd) || sd != src_dev)
    return err::InvalidValue;
  // Row by row between the two GPUs (merged where rows are contiguous on both sides).
  std::vector<Run> dr = box_runs(u64(c.dst), c.dpitch, c.dslice_rows, c.width, c.height, c.depth);
  std::vector<Run> sr = box_runs(u64(c.src), c.spitch, c.sslice_rows, c.width, c.height, c.depth);
  bool same = dr.size() == sr.size();
  for (size_t i = 0; same && i < dr.size(); ++i) same = dr[i].bytes == sr[i].bytes;
  if (!same) {  // contiguous on one side only: plain rows
    dr = box_runs(u64(c.dst), c.dpitch, c.dslice_rows, c.width, c.height, c.depth, false);
    sr = box_runs(u64(c.src), c.spitch, c.sslice_rows, c.width, c.height, c.depth, false);
  }
  for (size_t i = 0; i < dr.size(); ++i) {
    CudaError e =
        memcpy_peer(reinterpret_cast<void*>(dr[i].start), dst_dev,
                    reinterpret_cast<const void*>(sr[i].start), src_dev, dr[i].bytes, s, false);
    if (e != err::Success) return e;
  }
  // Without a stream: as cudaMemcpyPeer (synchronous on one server, host-asynchronous between
  // two: memcpy_across).
  if (s || devices_[dst_dev].link != devices_[src_dev].link) return err::Success;
  return stream_synchronize(Stream{dst_dev, 0, 0, 0});
}

bool Client::page_locked_range(uint64_t p, uint64_t n) const {
  auto r = map_.find_host(p);
  return r && n <= r->size - (p - r->base);
}

CudaError Client::fill_host(uint64_t p, size_t pitch, size_t slice, const uint8_t* pattern,
                            unsigned elem, size_t width, size_t height, size_t depth,
                            const Stream* s) {
  if (width == 0 || height == 0 || depth == 0) return err::Success;
  uint8_t pat[8];
  std::memcpy(pat, pattern, elem);
  auto fill = [p, pitch, slice, pat, elem, width, height, depth] {
    for (size_t z = 0; z < depth; ++z)
      for (size_t y = 0; y < height; ++y) {
        auto* row = reinterpret_cast<uint8_t*>(p + z * slice + y * pitch);
        if (elem == 1) {
          std::memset(row, pat[0], width);
          continue;
        }
        for (size_t x = 0; x < width; ++x) std::memcpy(row + x * elem, pat, elem);
      }
  };
  // While `s` is captured, a host node that fills at each launch.  Otherwise done before the
  // call returns, after the earlier work of the stream (the current device's legacy stream when
  // none is named, as CUDA's synchronous memset): a copy from this memory issued later reads the
  // new bytes even where rgpu takes host bytes at the call (client over TCP), and the memory
  // may be freed as soon as the call returns.
  unsigned capture = 0;
  if (s && (gmem_capture(*s, &capture) || capture)) return host_func(*s, std::move(fill));
  if (CudaError e = stream_synchronize(s ? *s : Stream{current_device(), 0, 0, 0});
      e != err::Success)
    return e;
  fill();
  return err::Success;
}

CudaError Client::refuse_memset(uint64_t p, uint64_t n, int stream_device) {
  // Logged once per kind of refusal, with what rgpu knows of the address, since a program that
  // fails on it (XLA's autotuner, say) often reports only the error code.
  char what[200];
  const char* kind;
  if (auto r = map_.find_device(p)) {
    const bool other = stream_device >= 0 && r->device != stream_device;
    kind = other ? "stream of another device" : "beyond the allocation";
    const int n_ =
        snprintf(what, sizeof what, "it starts in an allocation [0x%llx, +%llu) of device %d",
                 static_cast<unsigned long long>(r->base), static_cast<unsigned long long>(r->size),
                 r->device);
    if (n_ > 0 && static_cast<size_t>(n_) < sizeof what) {
      if (other)
        snprintf(what + n_, sizeof what - n_, " but the stream is on device %d", stream_device);
      else
        snprintf(what + n_, sizeof what - n_, " and ends beyond it");
    }
  } else if (map_.find_host(p)) {
    kind = "beyond page-locked memory";
    snprintf(what, sizeof what, "it starts in page-locked host memory and ends beyond it");
  } else {
    kind = "unknown";
    snprintf(what, sizeof what, "no allocation rgpu knows of contains it");
  }
  if (first_time(std::string("memset refused: ") + kind))
    LOG_WARN("memset of %llu bytes at 0x%llx refused: %s (cudaErrorInvalidValue)",
             static_cast<unsigned long long>(n), static_cast<unsigned long long>(p), what);
  return err::InvalidValue;
}

CudaError Client::memset3d(void* ptr, size_t pitch, size_t slice_rows, int value, size_t width,
                           size_t height, size_t depth, const Stream* s) {
  if (width == 0 || height == 0 || depth == 0) return err::Success;
  if ((height > 1 || depth > 1) && width > pitch) return err::InvalidValue;
  if (depth > 1 && slice_rows < height) return err::InvalidValue;
  size_t bytes = 0;
  int dev = -1;
  if (!box_extent(pitch, slice_rows, width, height, depth, &bytes)) return err::InvalidValue;
  if (!map_.device_range_ok(u64(ptr), bytes, &dev)) {
    if (!page_locked_range(u64(ptr), bytes)) return refuse_memset(u64(ptr), bytes, -1);
    const uint8_t byte = static_cast<uint8_t>(value);
    return fill_host(u64(ptr), pitch, pitch * slice_rows, &byte, 1, width, height, depth, s);
  }
  if (s && dev != s->device) {
    return refuse_memset(u64(ptr), bytes, s->device);
  }
  for (const Run& r : box_runs(u64(ptr), pitch, slice_rows, width, height, depth)) {
    void* p = reinterpret_cast<void*>(r.start);
    CudaError e = s ? memset_async(p, value, r.bytes, *s) : memset(p, value, r.bytes);
    if (e != err::Success) return e;
  }
  return err::Success;
}

}  // namespace rgpu::client
