// CUDA arrays in the runtime (issue 11, item 2): channel descriptors (pure host), allocation of
// arrays, layered/cubemap/3-D and mipmapped arrays, and their queries.  The client core keeps
// each array's description, so the getters are answered here; memory requirements and sparse
// properties are the server's answers.
#include "frontend/cudart/arrays.h"

#include <vector>

#include "common/log.h"

using namespace rgpu;
using rgpu::cudart::core;
using rgpu::cudart::ret;

namespace rgpu::cudart {

bool driver_format(const cudaChannelFormatDesc& d, uint32_t* format, uint32_t* channels) {
  int bits[4] = {d.x, d.y, d.z, d.w};
  uint32_t n = 0;
  while (n < 4 && bits[n] != 0) ++n;
  for (uint32_t i = n; i < 4; ++i)
    if (bits[i] != 0) return false;
  if (n == 0 || n == 3) return false;
  for (uint32_t i = 1; i < n; ++i)
    if (bits[i] != bits[0]) return false;
  uint32_t f = 0;
  switch (d.f) {
    case cudaChannelFormatKindSigned:
      f = bits[0] == 8 ? 0x08 : bits[0] == 16 ? 0x09 : bits[0] == 32 ? 0x0a : 0;
      break;
    case cudaChannelFormatKindUnsigned:
      f = bits[0] == 8 ? 0x01 : bits[0] == 16 ? 0x02 : bits[0] == 32 ? 0x03 : 0;
      break;
    case cudaChannelFormatKindFloat:
      f = bits[0] == 16 ? 0x10 : bits[0] == 32 ? 0x20 : 0;
      break;
    default:
      break;
  }
  if (!f) return false;
  *format = f;
  *channels = n;
  return true;
}

cudaChannelFormatDesc runtime_format(uint32_t format, uint32_t channels) {
  int bits = 0;
  cudaChannelFormatKind kind = cudaChannelFormatKindNone;
  switch (format) {
    case 0x01:
      bits = 8, kind = cudaChannelFormatKindUnsigned;
      break;
    case 0x02:
      bits = 16, kind = cudaChannelFormatKindUnsigned;
      break;
    case 0x03:
      bits = 32, kind = cudaChannelFormatKindUnsigned;
      break;
    case 0x08:
      bits = 8, kind = cudaChannelFormatKindSigned;
      break;
    case 0x09:
      bits = 16, kind = cudaChannelFormatKindSigned;
      break;
    case 0x0a:
      bits = 32, kind = cudaChannelFormatKindSigned;
      break;
    case 0x10:
      bits = 16, kind = cudaChannelFormatKindFloat;
      break;
    case 0x20:
      bits = 32, kind = cudaChannelFormatKindFloat;
      break;
    default:
      break;
  }
  cudaChannelFormatDesc d{0, 0, 0, 0, kind};
  int* c[4] = {&d.x, &d.y, &d.z, &d.w};
  for (uint32_t i = 0; i < channels && i < 4; ++i) *c[i] = bits;
  return d;
}

uint32_t element_bytes(uint32_t format, uint32_t channels) {
  return client::array_element_bytes(format, channels);
}

}  // namespace rgpu::cudart

namespace {

using rgpu::cudart::array_id;
using rgpu::cudart::mipmapped_id;

constexpr unsigned kKnownFlags = cudaArrayLayered | cudaArraySurfaceLoadStore | cudaArrayCubemap |
                                 cudaArrayTextureGather | cudaArrayColorAttachment |
                                 cudaArraySparse | cudaArrayDeferredMapping;

// Checks the description as the runtime does and fills the core's.
CudaError describe(const cudaChannelFormatDesc* desc, cudaExtent e, unsigned flags,
                   client::Client::ArrayDesc* d) {
  if (!desc) return err::InvalidValue;
  if (!cudart::driver_format(*desc, &d->format, &d->channels)) {
    LOG_ERROR(
        "array: channel format (%d, %d, %d, %d, kind %d) is not one rgpu supports for arrays "
        "(1, 2 or 4 equal channels of 8/16/32-bit integers, 16/32-bit floats)",
        desc->x, desc->y, desc->z, desc->w, static_cast<int>(desc->f));
    return static_cast<CudaError>(cudaErrorInvalidChannelDescriptor);
  }
  if (flags & ~kKnownFlags) return err::InvalidValue;
  if (e.width == 0 || (e.height == 0 && e.depth != 0)) return err::InvalidValue;
  if ((flags & cudaArrayLayered) && e.depth == 0) return err::InvalidValue;
  if (flags & cudaArrayCubemap) {
    bool layered = flags & cudaArrayLayered;
    if (e.width != e.height || (layered ? e.depth % 6 != 0 : e.depth != 6))
      return err::InvalidValue;
  }
  d->width = e.width, d->height = e.height, d->depth = e.depth, d->flags = flags;
  d->element = cudart::element_bytes(d->format, d->channels);
  return err::Success;
}

cudaError_t query(uint64_t id, bool mipmapped, int dev, uint32_t op,
                  std::vector<uint64_t>* values) {
  if (!id) return ret(client::errc::InvalidResourceHandle);
  return ret(core().array_query(id, mipmapped, dev, op, values));
}

}  // namespace

extern "C" {

struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w,
                                                   enum cudaChannelFormatKind f) {
  return cudaChannelFormatDesc{x, y, z, w, f};
}

cudaError_t cudaMallocArray(cudaArray_t* array, const struct cudaChannelFormatDesc* desc,
                            size_t width, size_t height, unsigned int flags) {
  if (!array) return ret(err::InvalidValue);
  client::Client::ArrayDesc d;
  if (CudaError e = describe(desc, cudaExtent{width, height, 0}, flags, &d); e != err::Success)
    return ret(e);
  if (flags & (cudaArrayLayered | cudaArrayCubemap)) return ret(err::InvalidValue);
  uint64_t id = 0;
  if (CudaError e = core().array_create(core().current_device(), d, &id); e != err::Success)
    return ret(e);
  *array = cudart::array_handle(id);
  return cudaSuccess;
}

cudaError_t cudaMalloc3DArray(cudaArray_t* array, const struct cudaChannelFormatDesc* desc,
                              struct cudaExtent extent, unsigned int flags) {
  if (!array) return ret(err::InvalidValue);
  client::Client::ArrayDesc d;
  if (CudaError e = describe(desc, extent, flags, &d); e != err::Success) return ret(e);
  uint64_t id = 0;
  if (CudaError e = core().array_create(core().current_device(), d, &id); e != err::Success)
    return ret(e);
  *array = cudart::array_handle(id);
  return cudaSuccess;
}

cudaError_t cudaMallocMipmappedArray(cudaMipmappedArray_t* mipmappedArray,
                                     const struct cudaChannelFormatDesc* desc,
                                     struct cudaExtent extent, unsigned int numLevels,
                                     unsigned int flags) {
  if (!mipmappedArray || numLevels == 0) return ret(err::InvalidValue);
  client::Client::ArrayDesc d;
  if (CudaError e = describe(desc, extent, flags, &d); e != err::Success) return ret(e);
  // No more levels than the largest dimension halves to 1 (as the driver checks).
  uint64_t largest = std::max({extent.width, extent.height,
                               (flags & (cudaArrayLayered | cudaArrayCubemap)) ? 0 : extent.depth});
  unsigned most = 1;
  while (largest >> most) ++most;
  if (numLevels > most) return ret(err::InvalidValue);
  d.levels = numLevels;
  uint64_t id = 0;
  if (CudaError e = core().array_create(core().current_device(), d, &id); e != err::Success)
    return ret(e);
  *mipmappedArray = cudart::mipmapped_handle(id);
  return cudaSuccess;
}

cudaError_t cudaGetMipmappedArrayLevel(cudaArray_t* levelArray,
                                       cudaMipmappedArray_const_t mipmappedArray,
                                       unsigned int level) {
  if (!levelArray) return ret(err::InvalidValue);
  uint64_t mip = mipmapped_id(mipmappedArray), id = 0;
  if (!mip) return ret(client::errc::InvalidResourceHandle);
  if (CudaError e = core().array_level(mip, level, &id); e != err::Success) return ret(e);
  *levelArray = cudart::array_handle(id);
  return cudaSuccess;
}

cudaError_t cudaFreeArray(cudaArray_t array) {
  if (!array) return cudaSuccess;  // as CUDA: freeing nothing succeeds
  uint64_t id = array_id(array);
  if (!id) return ret(client::errc::InvalidResourceHandle);
  return ret(core().array_destroy(id, false));
}

cudaError_t cudaFreeMipmappedArray(cudaMipmappedArray_t mipmappedArray) {
  if (!mipmappedArray) return cudaSuccess;
  uint64_t id = mipmapped_id(mipmappedArray);
  if (!id) return ret(client::errc::InvalidResourceHandle);
  return ret(core().array_destroy(id, true));
}

cudaError_t cudaGetChannelDesc(struct cudaChannelFormatDesc* desc, cudaArray_const_t array) {
  client::Client::ArrayRecord r;
  if (!desc) return ret(err::InvalidValue);
  if (!core().array_record(array_id(array), false, &r))
    return ret(client::errc::InvalidResourceHandle);
  *desc = cudart::runtime_format(r.desc.format, r.desc.channels);
  return cudaSuccess;
}

cudaError_t cudaArrayGetInfo(struct cudaChannelFormatDesc* desc, struct cudaExtent* extent,
                             unsigned int* flags, cudaArray_t array) {
  client::Client::ArrayRecord r;
  if (!core().array_record(array_id(array), false, &r))
    return ret(client::errc::InvalidResourceHandle);
  if (desc) *desc = cudart::runtime_format(r.desc.format, r.desc.channels);
  if (extent) *extent = cudaExtent{r.desc.width, r.desc.height, r.desc.depth};
  if (flags) *flags = r.desc.flags;
  return cudaSuccess;
}

cudaError_t cudaArrayGetPlane(cudaArray_t* pPlaneArray, cudaArray_t hArray, unsigned int planeIdx) {
  (void)planeIdx;
  if (!pPlaneArray) return ret(err::InvalidValue);
  if (!core().array_record(array_id(hArray), false, nullptr))
    return ret(client::errc::InvalidResourceHandle);
  // Only multi-planar formats (NV12) have planes, and rgpu's arrays have none: as CUDA answers
  // for a single-plane array.
  return ret(err::InvalidValue);
}

cudaError_t cudaDeviceGetTexture1DLinearMaxWidth(size_t* maxWidthInElements,
                                                 const struct cudaChannelFormatDesc* fmtDesc,
                                                 int device) {
  if (!maxWidthInElements || !fmtDesc) return ret(err::InvalidValue);
  uint32_t format = 0, channels = 0;
  if (!cudart::driver_format(*fmtDesc, &format, &channels))
    return ret(cudaErrorInvalidChannelDescriptor);
  return ret(core().texture1d_linear_max_width(device, format, channels, maxWidthInElements));
}

cudaError_t cudaArrayGetMemoryRequirements(struct cudaArrayMemoryRequirements* memoryRequirements,
                                           cudaArray_t array, int device) {
  if (!memoryRequirements) return ret(err::InvalidValue);
  std::vector<uint64_t> v;
  if (cudaError_t e = query(array_id(array), false, device, 1, &v); e != cudaSuccess) return e;
  if (v.size() < 2) return ret(err::Unknown);
  *memoryRequirements = {};
  memoryRequirements->size = v[0];
  memoryRequirements->alignment = v[1];
  return cudaSuccess;
}

cudaError_t cudaMipmappedArrayGetMemoryRequirements(
    struct cudaArrayMemoryRequirements* memoryRequirements, cudaMipmappedArray_t mipmap,
    int device) {
  if (!memoryRequirements) return ret(err::InvalidValue);
  std::vector<uint64_t> v;
  if (cudaError_t e = query(mipmapped_id(mipmap), true, device, 1, &v); e != cudaSuccess) return e;
  if (v.size() < 2) return ret(err::Unknown);
  *memoryRequirements = {};
  memoryRequirements->size = v[0];
  memoryRequirements->alignment = v[1];
  return cudaSuccess;
}

static cudaError_t sparse(uint64_t id, bool mipmapped, struct cudaArraySparseProperties* p) {
  if (!p) return ret(err::InvalidValue);
  client::Client::ArrayRecord r;
  if (!core().array_record(id, mipmapped, &r)) return ret(client::errc::InvalidResourceHandle);
  std::vector<uint64_t> v;
  if (cudaError_t e = query(id, mipmapped, r.device, 2, &v); e != cudaSuccess) return e;
  if (v.size() < 6) return ret(err::Unknown);
  *p = {};
  p->tileExtent.width = static_cast<unsigned>(v[0]);
  p->tileExtent.height = static_cast<unsigned>(v[1]);
  p->tileExtent.depth = static_cast<unsigned>(v[2]);
  p->miptailFirstLevel = static_cast<unsigned>(v[3]);
  p->miptailSize = v[4];
  p->flags = static_cast<unsigned>(v[5]);
  return cudaSuccess;
}

cudaError_t cudaArrayGetSparseProperties(struct cudaArraySparseProperties* sparseProperties,
                                         cudaArray_t array) {
  return sparse(array_id(array), false, sparseProperties);
}

cudaError_t cudaMipmappedArrayGetSparseProperties(
    struct cudaArraySparseProperties* sparseProperties, cudaMipmappedArray_t mipmap) {
  return sparse(mipmapped_id(mipmap), true, sparseProperties);
}

}  // extern "C"
