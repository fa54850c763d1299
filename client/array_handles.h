// The handle values and element sizes of CUDA arrays, shared by both front-ends (a cudaArray_t is a
// CUarray, a cudaMipmappedArray_t a CUmipmappedArray): the core's array id under a tag in the high
// bits: unique, and not an address (non-canonical on x86-64 and AArch64), so dereferencing one
// faults at once.
#pragma once

#include <cstdint>

namespace rgpu::client {

constexpr uint64_t kArrayTag = 0xA7A0ull << 48, kMipmappedTag = 0xA7A1ull << 48;
constexpr uint64_t kArrayIdMask = (1ull << 48) - 1;

inline uint64_t array_handle_value(uint64_t id) { return kArrayTag | id; }
inline uint64_t mipmapped_handle_value(uint64_t id) { return kMipmappedTag | id; }
// The core's id of a handle value; 0 when it is not one of ours.
inline uint64_t array_id_of(uint64_t v) {
  return (v & ~kArrayIdMask) == kArrayTag ? v & kArrayIdMask : 0;
}
inline uint64_t mipmapped_id_of(uint64_t v) {
  return (v & ~kArrayIdMask) == kMipmappedTag ? v & kArrayIdMask : 0;
}

// Bytes of one element of a driver array format (CUarray_format) with `channels` channels, or 0
// for a format rgpu's arrays do not support (1, 2 or 4 channels of 8/16/32-bit integers or
// 16/32-bit floats).
inline uint32_t array_element_bytes(uint32_t format, uint32_t channels) {
  if (channels != 1 && channels != 2 && channels != 4) return 0;
  switch (format) {
    case 0x01:  // unsigned 8
    case 0x08:  // signed 8
      return channels;
    case 0x02:  // unsigned 16
    case 0x09:  // signed 16
    case 0x10:  // half
      return 2 * channels;
    case 0x03:  // unsigned 32
    case 0x0a:  // signed 32
    case 0x20:  // float
      return 4 * channels;
    default:
      return 0;
  }
}

}  // namespace rgpu::client
