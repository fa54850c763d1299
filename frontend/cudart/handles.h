// The runtime's special stream handles, decoded into the client core's neutral StreamRef:
// 0 (the legacy default stream, or the per-thread one through the _ptsz/_ptds entry points of
// `--default-stream per-thread` programs), cudaStreamLegacy (1), cudaStreamPerThread (2), and
// otherwise a stream object the core created.
#pragma once

#include <cstdint>

#include "client/client.h"

namespace rgpu::cudart {

constexpr uintptr_t kStreamLegacyHandle = 1;     // cudaStreamLegacy
constexpr uintptr_t kStreamPerThreadHandle = 2;  // cudaStreamPerThread

inline client::StreamRef stream_ref(const void* handle, bool per_thread) {
  const auto h = reinterpret_cast<uintptr_t>(handle);
  if (h == kStreamLegacyHandle || (h == 0 && !per_thread)) return client::StreamRef::legacy();
  if (h == 0 || h == kStreamPerThreadHandle) return client::StreamRef::per_thread();
  return client::StreamRef::of(reinterpret_cast<client::Stream*>(const_cast<void*>(handle)));
}

inline client::Event* event_of(const void* handle) {
  return reinterpret_cast<client::Event*>(const_cast<void*>(handle));
}

}  // namespace rgpu::cudart
