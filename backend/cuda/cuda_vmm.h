// The cuda backend's virtual memory management for the program (Executor::vmm_*): the driver's own
// cuMemCreate / cuMemMap / cuMemSetAccess / cuMemUnmap / cuMemRelease on ranges of the session's
// window.  Handles are the driver's CUmemGenericAllocationHandle values.  The caller made the GPU's
// context current.
#pragma once

#include <cuda.h>

#include "backend/cuda/cuda_driver.h"
#include "backend/executor.h"

namespace rgpu::backend {

Status cuda_vmm_granularity(const CudaDriver& drv, CUdevice dev, bool recommended, uint64_t& g);
// A POSIX file descriptor handle type when `shareable` (and the driver allows it), else none.
Status cuda_vmm_create(const CudaDriver& drv, CUdevice dev, uint64_t size, bool shareable,
                       uint64_t& handle);
Status cuda_vmm_release(const CudaDriver& drv, uint64_t handle);
Status cuda_vmm_map(const CudaDriver& drv, uint64_t addr, uint64_t size, uint64_t offset,
                    uint64_t handle);
Status cuda_vmm_unmap(const CudaDriver& drv, uint64_t addr, uint64_t size);
Status cuda_vmm_set_access(const CudaDriver& drv, uint64_t addr, uint64_t size, CUdevice peer,
                           uint32_t flags);

}  // namespace rgpu::backend
