// The cuda backend's CUDA IPC (Executor::ipc_mem_*): the cuMemCreate memory behind a mapping
// exported as a POSIX file descriptor (it was created with that handle type where the driver
// allows it: see mem_map), and such a descriptor imported and mapped in another session's window.
#pragma once

#include <cuda.h>

#include "backend/cuda/cuda_driver.h"
#include "backend/executor.h"

namespace rgpu::backend {

constexpr uint32_t kCudaIpcKind = 0x43554441;  // "CUDA": a cuMemExportToShareableHandle fd

// The caller made the GPU's context current.  `fd` is new (the caller's to close); `base` and
// `size` are the mapping that holds `ptr`.
Status cuda_ipc_export(const CudaDriver& drv, uint64_t ptr, int& fd, uint64_t& base,
                       uint64_t& size);
// Maps the memory behind `fd` at `addr` (reserved, nothing mapped) for GPU `dev`.
Status cuda_ipc_import(const CudaDriver& drv, CUdevice dev, int fd, uint64_t addr, uint64_t size);

}  // namespace rgpu::backend
