// The cuda backend's context settings (Executor::device_config): limits, cache and shared-memory
// configuration, profiler, persisting L2 and P2P attributes, on the GPU's primary context.
#pragma once

#include <cuda.h>

#include "backend/cuda/cuda_driver.h"
#include "backend/executor.h"

namespace rgpu::backend {

// The caller has made `dev`'s context current on this thread; `peer` is the peer GPU's device
// for ConfigOp::P2PAttribute (else unused).
Status cuda_device_config(const CudaDriver& drv, CUdevice dev, CUdevice peer, Executor::ConfigOp op,
                          uint32_t key, uint64_t& value);

}  // namespace rgpu::backend
