#include "backend/host/host_arrays.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace rgpu::backend {
namespace {

constexpr uint32_t kLayered = 0x01, kCubemap = 0x04;  // CUDA_ARRAY3D_LAYERED, _CUBEMAP
constexpr uint64_t kMaxBytes = 1ull << 32;            // one array of the test double: 4 GiB
constexpr uint64_t kMaxDim = 1u << 16;                // and no dimension beyond 65536

Status invalid(const std::string& m) { return Status::fail(err::InvalidValue, m); }
Status no_handle(const char* what) {
  return Status::fail(400, std::string("no such ") + what + " on this GPU");
}

}  // namespace

uint32_t HostArrays::element_bytes(uint32_t format, uint32_t channels) {
  if (channels != 1 && channels != 2 && channels != 4) return 0;
  switch (format) {
    case 0x01:
    case 0x08:
      return channels;  // (UN)SIGNED_INT8
    case 0x02:
    case 0x09:
    case 0x10:
      return 2 * channels;  // (UN)SIGNED_INT16, HALF
    case 0x03:
    case 0x0a:
    case 0x20:
      return 4 * channels;  // (UN)SIGNED_INT32, FLOAT
    default:
      return 0;
  }
}

Status HostArrays::create(const Executor::ArraySpec& spec, uint64_t& handle) {
  uint32_t element = element_bytes(spec.format, spec.channels);
  if (!element)
    return Status::fail(err::NotSupported,
                        "host backend: array format " + std::to_string(spec.format) + " with " +
                            std::to_string(spec.channels) + " channels is not emulated");
  if (spec.width == 0 || spec.width > kMaxDim || spec.height > kMaxDim || spec.depth > kMaxDim)
    return invalid("array dimensions " + std::to_string(spec.width) + " x " +
                   std::to_string(spec.height) + " x " + std::to_string(spec.depth) +
                   " are beyond the host backend's (1..65536 each)");
  if ((spec.flags & kCubemap) &&
      (spec.width != spec.height ||
       ((spec.flags & kLayered) ? spec.depth % 6 != 0 || spec.depth == 0 : spec.depth != 6)))
    return invalid("a cubemap array needs width == height and 6 faces per layer");
  uint32_t levels = std::max<uint32_t>(spec.levels, 1);
  if (levels > 17) return invalid("more mipmap levels than a 65536-wide array has");
  auto make = [&](uint64_t w, uint64_t h, uint64_t d) -> std::shared_ptr<Array> {
    auto a = std::make_shared<Array>();
    a->spec = spec;
    a->spec.width = w, a->spec.height = h, a->spec.depth = d, a->spec.levels = 0;
    a->w = std::max<uint64_t>(w, 1), a->h = std::max<uint64_t>(h, 1);
    a->d = std::max<uint64_t>(d, 1), a->element = element;
    uint64_t bytes = a->w * a->h * a->d * element;  // each factor < 2^17: no overflow
    if (bytes > kMaxBytes) return nullptr;
    a->bytes.assign(bytes, 0);
    return a;
  };
  std::lock_guard<std::mutex> lock(mu_);
  if (spec.levels == 0) {
    auto a = make(spec.width, spec.height, spec.depth);
    if (!a) return Status::fail(err::MemoryAllocation, "host backend: array over 4 GiB");
    handle = next_++;
    arrays_[handle] = a;
    return Status::success();
  }
  auto m = std::make_shared<Array>();
  m->spec = spec;
  bool layers = spec.flags & (kLayered | kCubemap);
  for (uint32_t l = 0; l < levels; ++l) {
    auto dim = [&](uint64_t v) { return v ? std::max<uint64_t>(v >> l, 1) : 0; };
    auto a = make(dim(spec.width), dim(spec.height), layers ? spec.depth : dim(spec.depth));
    if (!a) return Status::fail(err::MemoryAllocation, "host backend: array over 4 GiB");
    m->levels.push_back(a);
  }
  handle = next_++;
  mipmapped_[handle] = m;
  return Status::success();
}

Status HostArrays::level(uint64_t mipmapped, uint32_t level, uint64_t& handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = mipmapped_.find(mipmapped);
  if (it == mipmapped_.end()) return no_handle("mipmapped array");
  if (level >= it->second->levels.size())
    return invalid("level " + std::to_string(level) + " of a mipmapped array of " +
                   std::to_string(it->second->levels.size()) + " levels");
  handle = next_++;
  level_handles_[handle] = it->second->levels[level];
  return Status::success();
}

Status HostArrays::destroy(uint64_t handle, bool mipmapped) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& map = mipmapped ? mipmapped_ : arrays_;
  auto it = map.find(handle);
  if (it == map.end()) return no_handle(mipmapped ? "mipmapped array" : "array");
  if (mipmapped)  // its level handles go with it
    for (auto l = level_handles_.begin(); l != level_handles_.end();)
      l = std::find(it->second->levels.begin(), it->second->levels.end(), l->second) !=
                  it->second->levels.end()
              ? level_handles_.erase(l)
              : std::next(l);
  map.erase(it);  // queued copies and launches keep the memory until they are done
  return Status::success();
}

std::shared_ptr<HostArrays::Array> HostArrays::find(uint64_t handle, bool mipmapped) const {
  if (mipmapped) {
    auto it = mipmapped_.find(handle);
    return it == mipmapped_.end() ? nullptr : it->second;
  }
  auto it = arrays_.find(handle);
  if (it != arrays_.end()) return it->second;
  auto l = level_handles_.find(handle);
  return l == level_handles_.end() ? nullptr : l->second;
}

Status HostArrays::plan_copy(const Executor::ArrayCopy& c, std::function<void()>& work) {
  struct Side {
    std::shared_ptr<Array> array;
    uint8_t* base;
    uint64_t pitch, slice;
  };
  Side sides[2];
  const Executor::CopySide* in[2] = {&c.src, &c.dst};
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < 2; ++i) {
      const Executor::CopySide& s = *in[i];
      const char* which = i ? "destination" : "source";
      if (!s.array) {
        sides[i] = {
            nullptr,
            reinterpret_cast<uint8_t*>(s.ptr + s.x + s.y * s.pitch + s.z * s.pitch * s.slice_rows),
            s.pitch, s.pitch * s.slice_rows};
        continue;
      }
      auto a = find(s.array, false);
      if (!a) return no_handle("array");
      if (s.x % a->element || s.x > a->pitch() || c.width > a->pitch() - s.x ||
          c.width % a->element || s.y > a->h || c.height > a->h - s.y || s.z > a->d ||
          c.depth > a->d - s.z)
        return invalid(std::string("the copy's box leaves the ") + which + " array (" +
                       std::to_string(a->w) + " x " + std::to_string(a->h) + " x " +
                       std::to_string(a->d) + " elements of " + std::to_string(a->element) +
                       " bytes)");
      sides[i] = {a, a->bytes.data() + s.z * a->slice() + s.y * a->pitch() + s.x, a->pitch(),
                  a->slice()};
    }
  }
  uint64_t w = c.width, h = c.height, d = c.depth;
  work = [src = sides[0], dst = sides[1], w, h, d] {
    for (uint64_t z = 0; z < d; ++z)
      for (uint64_t y = 0; y < h; ++y)
        memmove(dst.base + z * dst.slice + y * dst.pitch, src.base + z * src.slice + y * src.pitch,
                w);
  };
  return Status::success();
}

Status HostArrays::query(uint64_t handle, bool mipmapped, uint32_t op,
                         std::vector<uint64_t>& values) {
  if (op == 3) {  // widest 1-D linear texture: what an H200 answers (2^28 elements)
    const uint64_t channels = handle >> 32;
    if (channels != 1 && channels != 2 && channels != 4)
      return invalid("a texture format has 1, 2 or 4 channels");
    values = {uint64_t{1} << 28};
    return Status::success();
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto a = find(handle, mipmapped);
  if (!a) return no_handle(mipmapped ? "mipmapped array" : "array");
  if (op == 1) {  // memory requirements: what the emulation holds, 2 MiB aligned like a GPU's
    if (!(a->spec.flags & 0x80))  // CUDA_ARRAY3D_DEFERRED_MAPPING, as the driver requires
      return invalid("the array was not created with CUDA_ARRAY3D_DEFERRED_MAPPING");
    uint64_t bytes = a->bytes.size();
    for (auto& l : a->levels) bytes += l->bytes.size();
    values = {(bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20), 2u << 20};
    return Status::success();
  }
  if (op == 2)  // as a GPU answers for an array made without CUDA_ARRAY3D_SPARSE
    return invalid("the array was not created sparse (CUDA_ARRAY3D_SPARSE)");
  return invalid("unknown array query " + std::to_string(op));
}

Status HostArrays::texture_create(bool surface, const Executor::TextureSpec& spec,
                                  uint64_t& object) {
  Object o;
  o.surface = surface;
  o.spec = spec;
  std::lock_guard<std::mutex> lock(mu_);
  if (spec.res_type == 0 || spec.res_type == 1) {
    o.array = find(spec.array, spec.res_type == 1);
    if (!o.array) return no_handle(spec.res_type == 1 ? "mipmapped array" : "array");
    if (surface && spec.res_type != 0) return invalid("a surface object needs an array resource");
  } else if (spec.res_type == 2 || spec.res_type == 3) {
    if (surface) return invalid("a surface object needs an array resource");
    if (!element_bytes(spec.format, spec.channels))
      return Status::fail(err::NotSupported, "host backend: texture format not emulated");
  } else {
    return invalid("unknown resource type " + std::to_string(spec.res_type));
  }
  object = next_++;
  objects_[object] = std::move(o);
  return Status::success();
}

Status HostArrays::texture_destroy(bool surface, uint64_t object) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(object);
  if (it == objects_.end() || it->second.surface != surface)
    return no_handle(surface ? "surface object" : "texture object");
  objects_.erase(it);
  return Status::success();
}

int HostArrays::resource(void* ctx, unsigned long long object, unsigned level,
                         rgpu_host_resource* out) {
  auto* self = static_cast<HostArrays*>(ctx);
  std::lock_guard<std::mutex> lock(self->mu_);
  auto it = self->objects_.find(object);
  if (it == self->objects_.end() || !out) return -1;
  const Object& o = it->second;
  const Executor::TextureSpec& t = o.spec;
  *out = rgpu_host_resource{};
  out->surface = o.surface;
  for (int i = 0; i < 3; ++i) out->address_mode[i] = static_cast<int>(t.address_mode[i]);
  out->filter_mode = static_cast<int>(t.filter_mode);
  out->flags = t.flags;
  for (int i = 0; i < 4; ++i) out->border[i] = t.border[i];
  out->levels = 1;
  if (o.array) {
    const Array* a = o.array.get();
    if (!o.array->levels.empty()) {
      if (level >= o.array->levels.size()) return -1;
      out->levels = static_cast<unsigned>(o.array->levels.size());
      a = o.array->levels[level].get();
    } else if (level != 0) {
      return -1;
    }
    out->base = const_cast<uint8_t*>(a->bytes.data());
    out->pitch = a->pitch(), out->slice = a->slice();
    out->width = static_cast<unsigned>(a->w), out->height = static_cast<unsigned>(a->h);
    out->depth = static_cast<unsigned>(a->d);
    out->element = a->element, out->channels = a->spec.channels;
    out->format = static_cast<int>(a->spec.format);
    return 0;
  }
  if (level != 0) return -1;
  out->element = element_bytes(t.format, t.channels);
  out->channels = t.channels, out->format = static_cast<int>(t.format);
  out->base = reinterpret_cast<void*>(t.ptr);
  if (t.res_type == 2) {  // linear: width is in bytes
    out->width = static_cast<unsigned>(t.width / out->element), out->height = 1;
    out->pitch = t.width;
  } else {
    out->width = static_cast<unsigned>(t.width), out->height = static_cast<unsigned>(t.height);
    out->pitch = t.pitch;
  }
  out->depth = 1, out->slice = out->pitch * out->height;
  return 0;
}

}  // namespace rgpu::backend
