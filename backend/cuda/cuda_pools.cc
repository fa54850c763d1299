#include "backend/cuda/cuda_pools.h"

#include <cstdio>
#include <string>

namespace rgpu::backend {

Status cuda_host_register_mapped(const CudaDriver& drv, void* p, size_t size) {
  CUresult r =
      drv.cuMemHostRegister_v2(p, size, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
  if (r != CUDA_SUCCESS)
    return Status::fail(static_cast<CudaError>(r),
                        "registering mapped page-locked memory: " + drv.describe(r));
  CUdeviceptr dptr = 0;
  r = drv.cuMemHostGetDevicePointer_v2(&dptr, p, 0);
  if (r == CUDA_SUCCESS && dptr == reinterpret_cast<CUdeviceptr>(p)) return Status::success();
  drv.cuMemHostUnregister(p);
  if (r != CUDA_SUCCESS)
    return Status::fail(static_cast<CudaError>(r),
                        "device pointer of mapped page-locked memory: " + drv.describe(r));
  char buf[128];
  snprintf(buf, sizeof buf,
           "the GPU maps page-locked memory at %p at 0x%llx, not at the same "
           "address: kernels could not use the program's pointer",
           p, static_cast<unsigned long long>(dptr));
  return Status::fail(err::NotSupported, buf);
}

}  // namespace rgpu::backend
