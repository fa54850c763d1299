// Shared by the arrays group's runtime files (arrays.cc, arrays_copy.cc, textures.cc): array
// handles (client/array_handles.h: the driver front-end's too) and channel formats.
#pragma once

#include <cstdint>

#include "client/array_handles.h"
#include "frontend/cudart/api.h"

namespace rgpu::cudart {

inline cudaArray_t array_handle(uint64_t id) {
  return reinterpret_cast<cudaArray_t>(client::array_handle_value(id));
}
inline cudaMipmappedArray_t mipmapped_handle(uint64_t id) {
  return reinterpret_cast<cudaMipmappedArray_t>(client::mipmapped_handle_value(id));
}
// The core's id of a handle; 0 when it is not one of ours.
inline uint64_t array_id(const void* h) {
  return client::array_id_of(reinterpret_cast<uint64_t>(h));
}
inline uint64_t mipmapped_id(const void* h) {
  return client::mipmapped_id_of(reinterpret_cast<uint64_t>(h));
}

// A channel format as the driver's CUarray_format and channel count; false when the runtime
// format has no array equivalent here.
bool driver_format(const cudaChannelFormatDesc& d, uint32_t* format, uint32_t* channels);
// The runtime's description of a driver format.
cudaChannelFormatDesc runtime_format(uint32_t format, uint32_t channels);
// Bytes of one element.
uint32_t element_bytes(uint32_t format, uint32_t channels);

// A cudaMemcpy3D with an array operand (devmem_memory.cc hands these over).
cudaError_t memcpy3d_array(const cudaMemcpy3DParms* p, cudaStream_t stream, bool async,
                           bool per_thread);

}  // namespace rgpu::cudart
