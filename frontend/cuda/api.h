// Shared by the libcuda.so.1 translation units: the driver API's declarations (exported with
// default visibility; the version script keeps everything else local), the mapping of the client
// core's neutral errors to CUresult, the driver's handles as the core's objects, and the "not
// supported" path.
//
// Handles: a CUcontext is a client::Context*, a CUmodule and a CUlibrary are a client::Module*, a
// CUfunction and a CUkernel are a client::Function* (NVIDIA's runtime passes a CUkernel where a
// CUfunction is expected, which cuda.h allows), a CUstream is a client::Stream* and a CUevent a
// client::Event* — the representation the runtime front-end gives cudaStream_t/cudaEvent_t, so that
// one process's two front-ends can share the objects (issue 12 item 3).  CU_STREAM_LEGACY (1),
// CU_STREAM_PER_THREAD (2) and 0 decode as the runtime's handles do.
#pragma once

#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop

#include <cstdint>

#include "client/client.h"

namespace rgpu::cuda_fe {

// The core's neutral error as a CUresult (client/errors.h: only the runtime-only codes differ).
CUresult to_driver(client::Error e);
// For entry points rgpu does not implement: logs the name once, returns CUDA_ERROR_NOT_SUPPORTED.
int unsupported(const char* name);
// CUDA_ERROR_NOT_INITIALIZED until cuInit succeeded, then CUDA_SUCCESS.
CUresult initialized();

inline client::Client& core() { return client::Client::get(); }

constexpr uintptr_t kStreamLegacy = 1;     // CU_STREAM_LEGACY
constexpr uintptr_t kStreamPerThread = 2;  // CU_STREAM_PER_THREAD

inline client::StreamRef stream_ref(CUstream handle, bool per_thread) {
  const auto h = reinterpret_cast<uintptr_t>(handle);
  if (h == kStreamLegacy || (h == 0 && !per_thread)) return client::StreamRef::legacy();
  if (h == 0 || h == kStreamPerThread) return client::StreamRef::per_thread();
  return client::StreamRef::of(reinterpret_cast<client::Stream*>(handle));
}
// Resolves a CUstream; `per_thread` for the _ptsz/_ptds variants (0 is the thread's stream there).
inline client::Error stream_of(CUstream s, bool per_thread, client::Stream* out) {
  return core().resolve_stream(stream_ref(s, per_thread), out);
}

inline client::Context* ctx_of(CUcontext c) { return reinterpret_cast<client::Context*>(c); }
inline CUcontext cu(client::Context* c) { return reinterpret_cast<CUcontext>(c); }
inline client::Module* module_of(const void* m) {
  return reinterpret_cast<client::Module*>(const_cast<void*>(m));
}
// The function a CUfunction/CUkernel names, or null when it is none of a loaded module (NVIDIA's
// runtime passes unregistered host pointers straight through: they must not be dereferenced).
inline client::Function* function_of(const void* f) {
  auto* fn = reinterpret_cast<client::Function*>(const_cast<void*>(f));
  return f && core().modules().valid_function(fn) ? fn : nullptr;
}
inline client::Event* event_of(CUevent e) { return reinterpret_cast<client::Event*>(e); }
inline void* ptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }
inline CUdeviceptr dptr(const void* p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

// The device of the calling thread's current context (CUDA_ERROR_INVALID_CONTEXT without one).
client::Error current_device(int* dev);

}  // namespace rgpu::cuda_fe

#define RGPU_CU extern "C" __attribute__((visibility("default")))
// Returns CUDA_ERROR_NOT_INITIALIZED from the calling entry point until cuInit succeeded.
#define RGPU_INIT() \
  if (CUresult r_ = ::rgpu::cuda_fe::initialized(); r_ != CUDA_SUCCESS) return r_
