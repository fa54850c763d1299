// Requests of the arrays group (issue 11, item 2): CUDA arrays named by client ids, copies with
// array operands (the client stages host memory through device memory: the bytes themselves
// travel through the ordinary bulk copies), texture and surface objects whose values are the
// backend's own (kernels receive them by value).  Arrays count against --client-mem-limit.
#include <algorithm>
#include <bit>
#include <string>

#include "server/session.h"

namespace rgpu::server {

using namespace proto;
using backend::Status;

namespace {

constexpr CudaError kInvalidResourceHandle = 400;

Status invalid(const std::string& m) { return Status::fail(err::InvalidValue, m); }

// Device memory an array takes, for --client-mem-limit: every level's elements (a format this
// table does not know counts 16 bytes an element, the most any has), saturating.
uint64_t array_bytes(const backend::Executor::ArraySpec& a) {
  uint64_t elem = 0;
  switch (a.format) {
    case 0x01:
    case 0x08:
      elem = 1;  // (UN)SIGNED_INT8
      break;
    case 0x02:
    case 0x09:
    case 0x10:
      elem = 2;  // (UN)SIGNED_INT16, HALF
      break;
    case 0x03:
    case 0x0a:
    case 0x20:
      elem = 4;  // (UN)SIGNED_INT32, FLOAT
      break;
  }
  elem = elem && a.channels >= 1 && a.channels <= 4 ? elem * a.channels : 16;
  uint64_t w = std::max<uint64_t>(a.width, 1), h = std::max<uint64_t>(a.height, 1);
  const uint64_t d = std::max<uint64_t>(a.depth, 1);  // layers or slices: kept (an upper bound)
  uint64_t total = 0;
  for (uint32_t l = 0; l < std::clamp<uint32_t>(a.levels, 1, 64); ++l) {
    uint64_t n = 0;
    if (__builtin_mul_overflow(w, h, &n) || __builtin_mul_overflow(n, d, &n) ||
        __builtin_mul_overflow(n, elem, &n) || __builtin_add_overflow(total, n, &total))
      return UINT64_MAX;
    w = std::max<uint64_t>(w / 2, 1), h = std::max<uint64_t>(h / 2, 1);
  }
  return total;
}

}  // namespace

Status Session::array_of(uint32_t dev, uint64_t id, bool mipmapped, uint64_t& handle) const {
  auto it = arrays_.find(id);
  if (it == arrays_.end() || it->second.mipmapped != mipmapped)
    return Status::fail(kInvalidResourceHandle,
                        std::string("no such ") + (mipmapped ? "mipmapped array" : "array"));
  if (it->second.device != dev)
    return Status::fail(kInvalidResourceHandle, "the array belongs to GPU " +
                                                    std::to_string(it->second.device) +
                                                    ", not GPU " + std::to_string(dev));
  handle = it->second.handle;
  return Status::success();
}

Status Session::copy_side(uint32_t dev, uint64_t array, uint64_t ptr, uint64_t pitch, uint64_t rows,
                          uint64_t x, uint64_t y, uint64_t z, uint64_t width, uint64_t height,
                          uint64_t depth, backend::Executor::CopySide& out) const {
  out = {};
  out.x = x, out.y = y, out.z = z;
  if (array) return array_of(dev, array, false, out.array);  // the backend checks the box
  // Linear memory: the box from its first to its last byte inside one allocation.
  if (depth > 1 && rows < height) return invalid("slice height below the copy's height");
  uint64_t first = 0, last = 0, slice = 0;
  if (__builtin_mul_overflow(pitch, rows, &slice) || __builtin_mul_overflow(slice, z, &first) ||
      __builtin_add_overflow(first, y * pitch + x, &first) ||
      __builtin_add_overflow(ptr, first, &first) || __builtin_mul_overflow(slice, depth - 1, &last))
    return invalid("copy box overflows");
  if (Status s = check_range(dev, first + last, pitch, width, height); !s.ok()) return s;
  if (Status s = check_range(dev, first, pitch, width, height); !s.ok()) return s;
  if (depth > 1 && !allocs_[dev].contains(first, last + 1))
    return invalid("address range is not inside one device allocation");
  out.ptr = ptr, out.pitch = pitch, out.slice_rows = rows;
  return Status::success();
}

Status Session::on(ArrayCreateMsg, const ArrayCreateReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (q.id == 0 || arrays_.count(q.id)) return invalid("array id in use");
  backend::Executor::ArraySpec spec;
  spec.width = q.width, spec.height = q.height, spec.depth = q.depth;
  spec.format = q.format, spec.channels = q.channels, spec.flags = q.flags, spec.levels = q.levels;
  const uint64_t bytes = array_bytes(spec);
  if (Status s = charge_memory(Hold::Array, q.device, bytes,
                               "a CUDA array of " + std::to_string(bytes) + " bytes");
      !s.ok())
    return s;
  uint64_t handle = 0;
  Status s = exec_.array_create(static_cast<int>(q.device), spec, handle);
  if (s.ok())
    arrays_[q.id] = {q.device, handle, q.levels != 0, 0, bytes};
  else
    quota_.release(Hold::Array, q.device, bytes);
  return s;
}

Status Session::on(ArrayLevelMsg, const ArrayLevelReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (q.level_id == 0 || arrays_.count(q.level_id)) return invalid("array id in use");
  uint64_t mip = 0, handle = 0;
  if (Status s = array_of(q.device, q.id, true, mip); !s.ok()) return s;
  Status s = exec_.array_level(static_cast<int>(q.device), mip, q.level, handle);
  if (s.ok()) arrays_[q.level_id] = {q.device, handle, false, q.id};
  return s;
}

Status Session::on(ArrayDestroyMsg, const ArrayDestroyReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  auto it = arrays_.find(q.id);
  if (it == arrays_.end() || it->second.device != q.device)
    return Status::fail(kInvalidResourceHandle, "no such array on this GPU");
  if (it->second.owner) return invalid("a mipmapped array's level is freed with the array");
  ArrayRecord r = it->second;
  // Like cudaFreeArray, after the work issued before it (the emulated and the real driver keep
  // the memory until queued work is done).
  Status s = exec_.array_destroy(static_cast<int>(q.device), r.handle, r.mipmapped);
  quota_.release(Hold::Array, q.device, r.bytes);
  arrays_.erase(it);
  if (r.mipmapped)
    for (auto l = arrays_.begin(); l != arrays_.end();)
      l = l->second.owner == q.id ? arrays_.erase(l) : std::next(l);
  return s;
}

Status Session::on(ArrayCopyMsg, const ArrayCopyReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  uint64_t stream = 0;
  if (Status s = stream_of(q.device, q.stream, stream); !s.ok()) return s;
  if (q.width == 0 || q.height == 0 || q.depth == 0) return Status::success();
  if (!q.src_array && !q.dst_array) return invalid("an array copy without an array operand");
  backend::Executor::ArrayCopy c;
  c.width = q.width, c.height = q.height, c.depth = q.depth;
  if (Status s = copy_side(q.device, q.src_array, q.src_ptr, q.src_pitch, q.src_rows, q.src_x,
                           q.src_y, q.src_z, q.width, q.height, q.depth, c.src);
      !s.ok())
    return s;
  if (Status s = copy_side(q.device, q.dst_array, q.dst_ptr, q.dst_pitch, q.dst_rows, q.dst_x,
                           q.dst_y, q.dst_z, q.width, q.height, q.depth, c.dst);
      !s.ok())
    return s;
  return exec_.array_copy(static_cast<int>(q.device), c, stream);
}

Status Session::on(ArrayQueryMsg, const ArrayQueryReq& q, ArrayQueryRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (q.op == kQueryTexture1DLinearMaxWidth)  // a device query: `id` is the format, no array
    return exec_.array_query(static_cast<int>(q.device), q.id, false, q.op, rep.values);
  auto it = arrays_.find(q.id);
  if (it == arrays_.end() || it->second.device != q.device)
    return Status::fail(kInvalidResourceHandle, "no such array on this GPU");
  return exec_.array_query(static_cast<int>(q.device), it->second.handle, it->second.mipmapped,
                           q.op, rep.values);
}

Status Session::on(TexCreateMsg, const TexCreateReq& q, TexCreateRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  backend::Executor::TextureSpec t;
  t.res_type = q.res_type;
  if (q.res_type == 0 || q.res_type == 1) {
    if (Status s = array_of(q.device, q.array, q.res_type == 1, t.array); !s.ok()) return s;
  } else if (q.res_type == 2 || q.res_type == 3) {
    uint64_t rows = q.res_type == 2 ? 1 : q.height, width = q.res_type == 2 ? q.width : q.pitch;
    if (Status s = check_range(q.device, q.ptr, q.pitch ? q.pitch : width, width, rows); !s.ok())
      return s;
    t.ptr = q.ptr;
  } else {
    return invalid("unknown resource type " + std::to_string(q.res_type));
  }
  t.format = q.format, t.channels = q.channels;
  t.width = q.width, t.height = q.height, t.pitch = q.pitch;
  t.address_mode[0] = q.address_mode0, t.address_mode[1] = q.address_mode1;
  t.address_mode[2] = q.address_mode2, t.filter_mode = q.filter_mode, t.flags = q.flags;
  t.max_anisotropy = q.max_anisotropy, t.mipmap_filter_mode = q.mipmap_filter_mode;
  t.mipmap_bias = std::bit_cast<float>(q.mipmap_bias);
  t.min_lod = std::bit_cast<float>(q.min_lod), t.max_lod = std::bit_cast<float>(q.max_lod);
  t.border[0] = std::bit_cast<float>(q.border0), t.border[1] = std::bit_cast<float>(q.border1);
  t.border[2] = std::bit_cast<float>(q.border2), t.border[3] = std::bit_cast<float>(q.border3);
  t.view = q.view != 0, t.view_format = q.view_format;
  t.view_width = q.view_width, t.view_height = q.view_height, t.view_depth = q.view_depth;
  t.first_level = q.first_level, t.last_level = q.last_level;
  t.first_layer = q.first_layer, t.last_layer = q.last_layer;
  Status s = exec_.texture_create(static_cast<int>(q.device), q.surface != 0, t, rep.object);
  if (s.ok()) tex_objects_[{q.device, rep.object}] = q.surface != 0;
  return s;
}

Status Session::on(TexDestroyMsg, const TexDestroyReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  auto it = tex_objects_.find({q.device, q.object});
  if (it == tex_objects_.end() || it->second != (q.surface != 0))
    return Status::fail(
        kInvalidResourceHandle,
        std::string("no such ") + (q.surface ? "surface" : "texture") + " object on this GPU");
  tex_objects_.erase(it);
  return exec_.texture_destroy(static_cast<int>(q.device), q.surface != 0, q.object);
}

}  // namespace rgpu::server
