#include "backend/cuda/cuda_arrays.h"

#include <string>

namespace rgpu::backend {
namespace {

Status check(const CudaDriver& drv, CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return Status::success();
  // CUresult and cudaError_t share their numbers for every code these calls return.
  return Status::fail(static_cast<CudaError>(r), std::string(what) + ": " + drv.describe(r));
}

CUDA_ARRAY3D_DESCRIPTOR descriptor(const Executor::ArraySpec& s) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = s.width, d.Height = s.height, d.Depth = s.depth;
  d.Format = static_cast<CUarray_format>(s.format);
  d.NumChannels = s.channels;
  d.Flags = s.flags;
  return d;
}

void side(const Executor::CopySide& s, CUmemorytype& type, size_t& x, size_t& y, size_t& z,
          CUdeviceptr& ptr, CUarray& array, size_t& pitch, size_t& height) {
  x = s.x, y = s.y, z = s.z;
  if (s.array) {
    type = CU_MEMORYTYPE_ARRAY;
    array = reinterpret_cast<CUarray>(s.array);
  } else {
    type = CU_MEMORYTYPE_DEVICE;
    ptr = s.ptr, pitch = s.pitch, height = s.slice_rows;
  }
}

}  // namespace

Status cuda_array_create(const CudaDriver& drv, const Executor::ArraySpec& spec, uint64_t& array) {
  CUDA_ARRAY3D_DESCRIPTOR d = descriptor(spec);
  if (spec.levels) {
    CUmipmappedArray m = nullptr;
    Status s =
        check(drv, drv.cuMipmappedArrayCreate(&m, &d, spec.levels), "cuMipmappedArrayCreate");
    array = reinterpret_cast<uint64_t>(m);
    return s;
  }
  CUarray a = nullptr;
  Status s = check(drv, drv.cuArray3DCreate_v2(&a, &d), "cuArray3DCreate");
  array = reinterpret_cast<uint64_t>(a);
  return s;
}

Status cuda_array_level(const CudaDriver& drv, uint64_t mipmapped, uint32_t level,
                        uint64_t& array) {
  CUarray a = nullptr;
  Status s = check(
      drv, drv.cuMipmappedArrayGetLevel(&a, reinterpret_cast<CUmipmappedArray>(mipmapped), level),
      "cuMipmappedArrayGetLevel");
  array = reinterpret_cast<uint64_t>(a);
  return s;
}

Status cuda_array_destroy(const CudaDriver& drv, uint64_t array, bool mipmapped) {
  if (mipmapped)
    return check(drv, drv.cuMipmappedArrayDestroy(reinterpret_cast<CUmipmappedArray>(array)),
                 "cuMipmappedArrayDestroy");
  return check(drv, drv.cuArrayDestroy(reinterpret_cast<CUarray>(array)), "cuArrayDestroy");
}

Status cuda_array_copy(const CudaDriver& drv, const Executor::ArrayCopy& c, CUstream stream) {
  CUDA_MEMCPY3D p{};
  side(c.src, p.srcMemoryType, p.srcXInBytes, p.srcY, p.srcZ, p.srcDevice, p.srcArray, p.srcPitch,
       p.srcHeight);
  side(c.dst, p.dstMemoryType, p.dstXInBytes, p.dstY, p.dstZ, p.dstDevice, p.dstArray, p.dstPitch,
       p.dstHeight);
  p.WidthInBytes = c.width, p.Height = c.height, p.Depth = c.depth;
  // The driver refuses a linear side whose slice height is below the copy's rows, even for one
  // slice (a 2-D copy gives none).
  if (!c.src.array && p.srcHeight < c.height) p.srcHeight = c.height;
  if (!c.dst.array && p.dstHeight < c.height) p.dstHeight = c.height;
  return check(drv, drv.cuMemcpy3DAsync_v2(&p, stream), "cuMemcpy3DAsync");
}

Status cuda_array_query(const CudaDriver& drv, CUdevice dev, uint64_t array, bool mipmapped,
                        uint32_t op, std::vector<uint64_t>& values) {
  if (op == 1) {
    CUDA_ARRAY_MEMORY_REQUIREMENTS r{};
    Status s =
        mipmapped
            ? check(drv,
                    drv.cuMipmappedArrayGetMemoryRequirements(
                        &r, reinterpret_cast<CUmipmappedArray>(array), dev),
                    "cuMipmappedArrayGetMemoryRequirements")
            : check(drv,
                    drv.cuArrayGetMemoryRequirements(&r, reinterpret_cast<CUarray>(array), dev),
                    "cuArrayGetMemoryRequirements");
    values = {r.size, r.alignment};
    return s;
  }
  if (op == 2) {
    CUDA_ARRAY_SPARSE_PROPERTIES p{};
    Status s =
        mipmapped ? check(drv,
                          drv.cuMipmappedArrayGetSparseProperties(
                              &p, reinterpret_cast<CUmipmappedArray>(array)),
                          "cuMipmappedArrayGetSparseProperties")
                  : check(drv, drv.cuArrayGetSparseProperties(&p, reinterpret_cast<CUarray>(array)),
                          "cuArrayGetSparseProperties");
    values = {p.tileExtent.width,  p.tileExtent.height, p.tileExtent.depth,
              p.miptailFirstLevel, p.miptailSize,       p.flags};
    return s;
  }
  if (op == 3) {  // the widest 1-D linear texture of this format (array = format | channels << 32)
    size_t width = 0;
    Status s = check(drv,
                     drv.cuDeviceGetTexture1DLinearMaxWidth(
                         &width, static_cast<CUarray_format>(array & 0xffffffffu),
                         static_cast<unsigned>(array >> 32), dev),
                     "cuDeviceGetTexture1DLinearMaxWidth");
    values = {width};
    return s;
  }
  return Status::fail(err::InvalidValue, "unknown array query " + std::to_string(op));
}

Status cuda_texture_create(const CudaDriver& drv, bool surface, const Executor::TextureSpec& t,
                           uint64_t& object) {
  CUDA_RESOURCE_DESC r{};
  r.resType = static_cast<CUresourcetype>(t.res_type);
  switch (t.res_type) {
    case CU_RESOURCE_TYPE_ARRAY:
      r.res.array.hArray = reinterpret_cast<CUarray>(t.array);
      break;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
      r.res.mipmap.hMipmappedArray = reinterpret_cast<CUmipmappedArray>(t.array);
      break;
    case CU_RESOURCE_TYPE_LINEAR:
      r.res.linear.devPtr = t.ptr;
      r.res.linear.format = static_cast<CUarray_format>(t.format);
      r.res.linear.numChannels = t.channels;
      r.res.linear.sizeInBytes = t.width;
      break;
    case CU_RESOURCE_TYPE_PITCH2D:
      r.res.pitch2D.devPtr = t.ptr;
      r.res.pitch2D.format = static_cast<CUarray_format>(t.format);
      r.res.pitch2D.numChannels = t.channels;
      r.res.pitch2D.width = t.width;
      r.res.pitch2D.height = t.height;
      r.res.pitch2D.pitchInBytes = t.pitch;
      break;
    default:
      return Status::fail(err::InvalidValue, "unknown resource type " + std::to_string(t.res_type));
  }
  if (surface) {
    CUsurfObject s = 0;
    Status st = check(drv, drv.cuSurfObjectCreate(&s, &r), "cuSurfObjectCreate");
    object = s;
    return st;
  }
  CUDA_TEXTURE_DESC d{};
  for (int i = 0; i < 3; ++i) d.addressMode[i] = static_cast<CUaddress_mode>(t.address_mode[i]);
  d.filterMode = static_cast<CUfilter_mode>(t.filter_mode);
  d.flags = t.flags;
  d.maxAnisotropy = t.max_anisotropy;
  d.mipmapFilterMode = static_cast<CUfilter_mode>(t.mipmap_filter_mode);
  d.mipmapLevelBias = t.mipmap_bias;
  d.minMipmapLevelClamp = t.min_lod;
  d.maxMipmapLevelClamp = t.max_lod;
  for (int i = 0; i < 4; ++i) d.borderColor[i] = t.border[i];
  CUDA_RESOURCE_VIEW_DESC v{};
  if (t.view) {
    v.format = static_cast<CUresourceViewFormat>(t.view_format);
    v.width = t.view_width, v.height = t.view_height, v.depth = t.view_depth;
    v.firstMipmapLevel = t.first_level, v.lastMipmapLevel = t.last_level;
    v.firstLayer = t.first_layer, v.lastLayer = t.last_layer;
  }
  CUtexObject o = 0;
  Status st =
      check(drv, drv.cuTexObjectCreate(&o, &r, &d, t.view ? &v : nullptr), "cuTexObjectCreate");
  object = o;
  return st;
}

Status cuda_texture_destroy(const CudaDriver& drv, bool surface, uint64_t object) {
  return surface ? check(drv, drv.cuSurfObjectDestroy(object), "cuSurfObjectDestroy")
                 : check(drv, drv.cuTexObjectDestroy(object), "cuTexObjectDestroy");
}

}  // namespace rgpu::backend
