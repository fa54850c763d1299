#include "backend/cuda/cuda_vmm.h"

#include <string>

namespace rgpu::backend {
namespace {

Status check(const CudaDriver& drv, CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return Status::success();
  // CUresult and cudaError_t share their numbers for the codes these calls return.
  return Status::fail(static_cast<CudaError>(r), std::string(what) + ": " + drv.describe(r));
}

CUmemAllocationProp prop_of(CUdevice dev, bool shareable) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes =
      shareable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  return prop;
}

}  // namespace

Status cuda_vmm_granularity(const CudaDriver& drv, CUdevice dev, bool recommended, uint64_t& g) {
  CUmemAllocationProp prop = prop_of(dev, false);
  size_t v = 0;
  Status s =
      check(drv,
            drv.cuMemGetAllocationGranularity(&v, &prop,
                                              recommended ? CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
                                                          : CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            "cuMemGetAllocationGranularity");
  g = v;
  return s;
}

Status cuda_vmm_create(const CudaDriver& drv, CUdevice dev, uint64_t size, bool shareable,
                       uint64_t& handle) {
  CUmemGenericAllocationHandle h = 0;
  CUmemAllocationProp prop = prop_of(dev, shareable);
  CUresult r = drv.cuMemCreate(&h, size, &prop, 0);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_OUT_OF_MEMORY && shareable) {
    prop = prop_of(dev, false);  // a system without shareable handles: the plain kind
    r = drv.cuMemCreate(&h, size, &prop, 0);
  }
  handle = h;
  return check(drv, r, "cuMemCreate");
}

Status cuda_vmm_release(const CudaDriver& drv, uint64_t handle) {
  return check(drv, drv.cuMemRelease(handle), "cuMemRelease");
}

Status cuda_vmm_map(const CudaDriver& drv, uint64_t addr, uint64_t size, uint64_t offset,
                    uint64_t handle) {
  return check(drv, drv.cuMemMap(addr, size, offset, handle, 0), "cuMemMap");
}

Status cuda_vmm_unmap(const CudaDriver& drv, uint64_t addr, uint64_t size) {
  return check(drv, drv.cuMemUnmap(addr, size), "cuMemUnmap");
}

Status cuda_vmm_set_access(const CudaDriver& drv, uint64_t addr, uint64_t size, CUdevice peer,
                           uint32_t flags) {
  CUmemAccessDesc a{};
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = peer;
  a.flags = static_cast<CUmemAccess_flags>(flags);
  return check(drv, drv.cuMemSetAccess(addr, size, &a, 1), "cuMemSetAccess");
}

}  // namespace rgpu::backend
