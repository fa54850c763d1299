// Conditional graph nodes on the cuda backend (Executor::cond_handle_create, capture_into,
// capture_conditional, capture_finish, native_instantiate): the driver's own conditional handles
// and nodes, in native graphs built by capturing a session's replay into them
// (server/graphs_cond.cc).  The caller made the device's context current.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_driver.h"
#include "backend/executor.h"

namespace rgpu::backend {

Status cuda_cond_handle_create(const CudaDriver& drv, CUcontext ctx, uint64_t& graph,
                               uint32_t value, uint32_t flags, uint64_t& handle);
Status cuda_capture_into(const CudaDriver& drv, CUstream stream, uint64_t graph, bool empty_first);
Status cuda_capture_conditional(const CudaDriver& drv, CUcontext ctx, CUstream stream,
                                uint64_t handle, uint32_t type, uint32_t size,
                                std::vector<uint64_t>& bodies);
Status cuda_capture_finish(const CudaDriver& drv, CUstream stream);
Status cuda_native_instantiate(const CudaDriver& drv, uint64_t graph, uint64_t& exec);

}  // namespace rgpu::backend
