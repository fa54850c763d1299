// The cuda backend's part of the drvlibs group: tensor maps encoded by NVIDIA's driver, the
// potential block size search without a callback, and stream memory operations.  The entry points
// are looked up in libcuda.so.1 when first asked (a driver without one answers NotSupported for it
// alone).  The caller made the GPU's context current.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/cuda_driver.h"
#include "backend/executor.h"

namespace rgpu::backend {

Status cuda_tensor_map_encode(const CudaDriver& drv, const Executor::TensorMapArgs& a,
                              uint8_t (&map)[128]);
Status cuda_tensor_map_replace_address(const CudaDriver& drv, uint8_t (&map)[128],
                                       uint64_t address);
Status cuda_occupancy_block_size(const CudaDriver& drv, CUfunction f, uint64_t dynamic_smem,
                                 int32_t limit, uint32_t flags, int32_t& min_grid,
                                 int32_t& block_size);
Status cuda_stream_mem_ops(const CudaDriver& drv, CUstream stream,
                           const std::vector<Executor::MemOp>& ops);

// cuLink*: a CUlinkState per handle (no JIT options: they are accepted and not applied on the
// client, as for modules).
Status cuda_link_create(const CudaDriver& drv, uint64_t& link);
Status cuda_link_add(const CudaDriver& drv, uint64_t link, uint32_t type, const std::string& name,
                     const uint8_t* data, size_t size);
Status cuda_link_complete(const CudaDriver& drv, uint64_t link, std::vector<uint8_t>& image);
Status cuda_link_destroy(const CudaDriver& drv, uint64_t link);

}  // namespace rgpu::backend
