// CUDA arrays through the driver API: 1-D/2-D/3-D, layered and cubemap arrays, mipmapped arrays
// and their levels, descriptors (kept by the client core: no round trip), memory requirements and
// sparse properties (the server's answers).  The core's descriptions are in the driver's terms.
#include "frontend/cuda/arrays.h"

#include <algorithm>
#include <vector>

#include "common/log.h"

using namespace rgpu;
using rgpu::cuda_fe::array_id;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::mipmapped_id;
using rgpu::cuda_fe::to_driver;

namespace {

constexpr unsigned kKnownFlags = CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST |
                                 CUDA_ARRAY3D_CUBEMAP | CUDA_ARRAY3D_TEXTURE_GATHER |
                                 CUDA_ARRAY3D_COLOR_ATTACHMENT | CUDA_ARRAY3D_SPARSE |
                                 CUDA_ARRAY3D_DEFERRED_MAPPING;

// Checks a description as NVIDIA's driver does and fills the core's.
CUresult describe(const CUDA_ARRAY3D_DESCRIPTOR& a, client::Client::ArrayDesc* d) {
  d->element = client::array_element_bytes(a.Format, a.NumChannels);
  if (!d->element) {
    LOG_ERROR(
        "cuArrayCreate: format 0x%x with %u channels is not one rgpu supports for arrays (1, 2 or "
        "4 channels of 8/16/32-bit integers, 16/32-bit floats)",
        static_cast<unsigned>(a.Format), a.NumChannels);
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (a.Flags & ~kKnownFlags) return CUDA_ERROR_INVALID_VALUE;
  if (a.Width == 0 || (a.Height == 0 && a.Depth != 0)) return CUDA_ERROR_INVALID_VALUE;
  if ((a.Flags & CUDA_ARRAY3D_LAYERED) && a.Depth == 0) return CUDA_ERROR_INVALID_VALUE;
  if (a.Flags & CUDA_ARRAY3D_CUBEMAP) {
    const bool layered = a.Flags & CUDA_ARRAY3D_LAYERED;
    if (a.Width != a.Height || (layered ? a.Depth % 6 != 0 : a.Depth != 6))
      return CUDA_ERROR_INVALID_VALUE;
  }
  d->width = a.Width, d->height = a.Height, d->depth = a.Depth;
  d->format = a.Format, d->channels = a.NumChannels, d->flags = a.Flags;
  return CUDA_SUCCESS;
}

CUresult create(const client::Client::ArrayDesc& d, uint64_t* id) {
  int dev = 0;
  if (client::Error e = cuda_fe::current_device(&dev); e != err::Success) return to_driver(e);
  return to_driver(core().array_create(dev, d, id));
}

CUresult record(uint64_t id, bool mipmapped, client::Client::ArrayRecord* r) {
  if (!core().array_record(id, mipmapped, r)) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

CUresult requirements(uint64_t id, bool mipmapped, CUdevice dev,
                      CUDA_ARRAY_MEMORY_REQUIREMENTS* out) {
  RGPU_INIT();
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!id) return CUDA_ERROR_INVALID_HANDLE;
  std::vector<uint64_t> v;
  if (CUresult r = to_driver(core().array_query(id, mipmapped, dev, 1, &v)); r != CUDA_SUCCESS)
    return r;
  if (v.size() < 2) return CUDA_ERROR_UNKNOWN;
  *out = {};
  out->size = v[0];
  out->alignment = v[1];
  return CUDA_SUCCESS;
}

CUresult sparse(uint64_t id, bool mipmapped, CUDA_ARRAY_SPARSE_PROPERTIES* p) {
  RGPU_INIT();
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  client::Client::ArrayRecord r;
  if (CUresult res = record(id, mipmapped, &r); res != CUDA_SUCCESS) return res;
  std::vector<uint64_t> v;
  if (CUresult res = to_driver(core().array_query(id, mipmapped, r.device, 2, &v));
      res != CUDA_SUCCESS)
    return res;
  if (v.size() < 6) return CUDA_ERROR_UNKNOWN;
  *p = {};
  p->tileExtent.width = static_cast<unsigned>(v[0]);
  p->tileExtent.height = static_cast<unsigned>(v[1]);
  p->tileExtent.depth = static_cast<unsigned>(v[2]);
  p->miptailFirstLevel = static_cast<unsigned>(v[3]);
  p->miptailSize = v[4];
  p->flags = static_cast<unsigned>(v[5]);
  return CUDA_SUCCESS;
}

}  // namespace

RGPU_CU CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* pAllocateArray) {
  RGPU_INIT();
  if (!pHandle || !pAllocateArray) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR a{};
  a.Width = pAllocateArray->Width, a.Height = pAllocateArray->Height;
  a.Format = pAllocateArray->Format, a.NumChannels = pAllocateArray->NumChannels;
  client::Client::ArrayDesc d;
  if (CUresult r = describe(a, &d); r != CUDA_SUCCESS) return r;
  uint64_t id = 0;
  if (CUresult r = create(d, &id); r != CUDA_SUCCESS) return r;
  *pHandle = cuda_fe::cu_array(id);
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuArray3DCreate_v2(CUarray* pHandle,
                                    const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray) {
  RGPU_INIT();
  if (!pHandle || !pAllocateArray) return CUDA_ERROR_INVALID_VALUE;
  client::Client::ArrayDesc d;
  if (CUresult r = describe(*pAllocateArray, &d); r != CUDA_SUCCESS) return r;
  uint64_t id = 0;
  if (CUresult r = create(d, &id); r != CUDA_SUCCESS) return r;
  *pHandle = cuda_fe::cu_array(id);
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle,
                                        const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,
                                        unsigned int numMipmapLevels) {
  RGPU_INIT();
  if (!pHandle || !pMipmappedArrayDesc || numMipmapLevels == 0) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_ARRAY3D_DESCRIPTOR& a = *pMipmappedArrayDesc;
  client::Client::ArrayDesc d;
  if (CUresult r = describe(a, &d); r != CUDA_SUCCESS) return r;
  // No more levels than the largest dimension halves to 1.
  uint64_t largest = std::max<uint64_t>(
      {a.Width, a.Height, (a.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) ? 0 : a.Depth});
  unsigned most = 1;
  while (largest >> most) ++most;
  if (numMipmapLevels > most) return CUDA_ERROR_INVALID_VALUE;
  d.levels = numMipmapLevels;
  uint64_t id = 0;
  if (CUresult r = create(d, &id); r != CUDA_SUCCESS) return r;
  *pHandle = cuda_fe::cu_mipmapped(id);
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuMipmappedArrayGetLevel(CUarray* pLevelArray, CUmipmappedArray hMipmappedArray,
                                          unsigned int level) {
  RGPU_INIT();
  if (!pLevelArray) return CUDA_ERROR_INVALID_VALUE;
  uint64_t mip = mipmapped_id(hMipmappedArray), id = 0;
  if (!mip) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = to_driver(core().array_level(mip, level, &id)); r != CUDA_SUCCESS) return r;
  *pLevelArray = cuda_fe::cu_array(id);
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuArrayDestroy(CUarray hArray) {
  RGPU_INIT();
  uint64_t id = array_id(hArray);
  if (!id) return CUDA_ERROR_INVALID_HANDLE;
  return to_driver(core().array_destroy(id, false));
}

RGPU_CU CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  RGPU_INIT();
  uint64_t id = mipmapped_id(hMipmappedArray);
  if (!id) return CUDA_ERROR_INVALID_HANDLE;
  return to_driver(core().array_destroy(id, true));
}

RGPU_CU CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR* pArrayDescriptor, CUarray hArray) {
  RGPU_INIT();
  if (!pArrayDescriptor) return CUDA_ERROR_INVALID_VALUE;
  client::Client::ArrayRecord r;
  if (CUresult res = record(array_id(hArray), false, &r); res != CUDA_SUCCESS) return res;
  pArrayDescriptor->Width = r.desc.width;
  pArrayDescriptor->Height = r.desc.height;
  pArrayDescriptor->Format = static_cast<CUarray_format>(r.desc.format);
  pArrayDescriptor->NumChannels = r.desc.channels;
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR* pArrayDescriptor,
                                           CUarray hArray) {
  RGPU_INIT();
  if (!pArrayDescriptor) return CUDA_ERROR_INVALID_VALUE;
  client::Client::ArrayRecord r;
  if (CUresult res = record(array_id(hArray), false, &r); res != CUDA_SUCCESS) return res;
  pArrayDescriptor->Width = r.desc.width;
  pArrayDescriptor->Height = r.desc.height;
  pArrayDescriptor->Depth = r.desc.depth;
  pArrayDescriptor->Format = static_cast<CUarray_format>(r.desc.format);
  pArrayDescriptor->NumChannels = r.desc.channels;
  pArrayDescriptor->Flags = r.desc.flags;
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuArrayGetPlane(CUarray* pPlaneArray, CUarray hArray, unsigned int) {
  RGPU_INIT();
  if (!pPlaneArray) return CUDA_ERROR_INVALID_VALUE;
  client::Client::ArrayRecord r;
  if (CUresult res = record(array_id(hArray), false, &r); res != CUDA_SUCCESS) return res;
  // Only multi-planar formats (NV12) have planes, and rgpu's arrays have none: as CUDA answers
  // for a single-plane array.
  return CUDA_ERROR_INVALID_VALUE;
}

RGPU_CU CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* memoryRequirements,
                                              CUarray array, CUdevice device) {
  return requirements(array_id(array), false, device, memoryRequirements);
}

RGPU_CU CUresult cuMipmappedArrayGetMemoryRequirements(
    CUDA_ARRAY_MEMORY_REQUIREMENTS* memoryRequirements, CUmipmappedArray mipmap, CUdevice device) {
  return requirements(mipmapped_id(mipmap), true, device, memoryRequirements);
}

RGPU_CU CUresult cuArrayGetSparseProperties(CUDA_ARRAY_SPARSE_PROPERTIES* sparseProperties,
                                            CUarray array) {
  return sparse(array_id(array), false, sparseProperties);
}

RGPU_CU CUresult cuMipmappedArrayGetSparseProperties(CUDA_ARRAY_SPARSE_PROPERTIES* sparseProperties,
                                                     CUmipmappedArray mipmap) {
  return sparse(mipmapped_id(mipmap), true, sparseProperties);
}

RGPU_CU CUresult cuDeviceGetTexture1DLinearMaxWidth(size_t* maxWidthInElements,
                                                    CUarray_format format, unsigned numChannels,
                                                    CUdevice dev) {
  RGPU_INIT();
  if (!maxWidthInElements) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().texture1d_linear_max_width(dev, static_cast<uint32_t>(format),
                                                     numChannels, maxWidthInElements));
}
