// Shared by the driver front-end's array files (arrays.cc, textures.cc, copies.cc): CUarray and
// CUmipmappedArray handles, the runtime's values (client/array_handles.h).
#pragma once

#include "client/array_handles.h"
#include "frontend/cuda/api.h"

namespace rgpu::cuda_fe {

inline CUarray cu_array(uint64_t id) {
  return reinterpret_cast<CUarray>(client::array_handle_value(id));
}
inline CUmipmappedArray cu_mipmapped(uint64_t id) {
  return reinterpret_cast<CUmipmappedArray>(client::mipmapped_handle_value(id));
}
// The core's id of a handle; 0 when it is not one of ours.
inline uint64_t array_id(const void* h) {
  return client::array_id_of(reinterpret_cast<uint64_t>(h));
}
inline uint64_t mipmapped_id(const void* h) {
  return client::mipmapped_id_of(reinterpret_cast<uint64_t>(h));
}

// How a copy runs: synchronously, on the thread's default stream then waiting (_ptds), or on a
// stream.
enum class CopyMode { Sync, SyncThread, Async };
// A 2-D/3-D copy with at least one array operand (copies.cc hands these over); `pt`: stream 0 is
// the thread's stream.
CUresult copy_with_array(const CUDA_MEMCPY3D& c, CopyMode mode, CUstream st, bool pt);

}  // namespace rgpu::cuda_fe
