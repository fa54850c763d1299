// Shared by the arrays group's runtime files (arrays.cc, arrays_copy.cc, textures.cc): array
// handles and channel formats.  A cudaArray_t / cudaMipmappedArray_t is the core's array id
// under a tag in the high bits: unique, and not an address (non-canonical on x86-64 and
// AArch64), so dereferencing one faults at once.
#pragma once

#include <cstdint>

#include "frontend/cudart/api.h"

namespace rgpu::cudart {

constexpr uint64_t kArrayTag = 0xA7A0ull << 48, kMipmappedTag = 0xA7A1ull << 48;
constexpr uint64_t kIdMask = (1ull << 48) - 1;

inline cudaArray_t array_handle(uint64_t id) {
  return reinterpret_cast<cudaArray_t>(kArrayTag | id);
}
inline cudaMipmappedArray_t mipmapped_handle(uint64_t id) {
  return reinterpret_cast<cudaMipmappedArray_t>(kMipmappedTag | id);
}
// The core's id of a handle; 0 when it is not one of ours.
inline uint64_t array_id(const void* h) {
  auto v = reinterpret_cast<uint64_t>(h);
  return (v & ~kIdMask) == kArrayTag ? v & kIdMask : 0;
}
inline uint64_t mipmapped_id(const void* h) {
  auto v = reinterpret_cast<uint64_t>(h);
  return (v & ~kIdMask) == kMipmappedTag ? v & kIdMask : 0;
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
