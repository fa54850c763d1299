// The cuda backend's CUDA arrays, texture and surface objects: cuArray3DCreate,
// cuMipmappedArrayCreate, cuMemcpy3DAsync with array operands, cuTexObjectCreate,
// cuSurfObjectCreate.  The caller has made the GPU's context current on this thread.
#pragma once

#include <cuda.h>

#include <vector>

#include "backend/cuda/cuda_driver.h"
#include "backend/executor.h"

namespace rgpu::backend {

Status cuda_array_create(const CudaDriver& drv, const Executor::ArraySpec& spec, uint64_t& array);
Status cuda_array_level(const CudaDriver& drv, uint64_t mipmapped, uint32_t level, uint64_t& array);
Status cuda_array_destroy(const CudaDriver& drv, uint64_t array, bool mipmapped);
Status cuda_array_copy(const CudaDriver& drv, const Executor::ArrayCopy& c, CUstream stream);
Status cuda_array_query(const CudaDriver& drv, CUdevice dev, uint64_t array, bool mipmapped,
                        uint32_t op, std::vector<uint64_t>& values);
Status cuda_texture_create(const CudaDriver& drv, bool surface, const Executor::TextureSpec& t,
                           uint64_t& object);
Status cuda_texture_destroy(const CudaDriver& drv, bool surface, uint64_t object);

}  // namespace rgpu::backend
