// The cuda backend's part of the misc group: atomic capabilities (looked up in libcuda.so.1 when
// asked, so that an older driver still runs everything else) and CUDA IPC event handles, which
// travel through rgpud as a memfd holding the driver's 64-byte cuIpcGetEventHandle handle.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_driver.h"
#include "backend/executor.h"

namespace rgpu::backend {

constexpr uint32_t kCudaIpcEventKind = 0x43554556;  // "CUEV": a memfd holding a CUipcEventHandle

// cuDeviceGetHostAtomicCapabilities (`peer` < 0) or cuDeviceGetP2PAtomicCapabilities.
Status cuda_atomic_caps(const CudaDriver& drv, CUdevice dev, CUdevice peer, bool host,
                        const std::vector<uint32_t>& ops, std::vector<uint32_t>& caps);
// The caller made the event's context current.  `fd` is new (the caller's to close).
Status cuda_ipc_event_export(const CudaDriver& drv, CUevent event, int& fd);
Status cuda_ipc_event_import(const CudaDriver& drv, int fd, CUevent& event);

}  // namespace rgpu::backend
