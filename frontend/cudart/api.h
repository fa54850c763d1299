// Shared by the libcudart.so.13 translation units: CUDA's declarations (exported with default
// visibility; the version script keeps everything else local), the per-thread last error, and
// the "not supported" path.
#pragma once

#pragma GCC visibility push(default)
#include <cuda_runtime_api.h>
#pragma GCC visibility pop

#include "client/client.h"
#include "common/cuda_errors.h"
#include "frontend/cudart/handles.h"

namespace rgpu::cudart {

// The core's neutral error as a cudaError_t (the wire's numbers are cudaError_t's: identity).
inline cudaError_t to_runtime(client::Error e) { return static_cast<cudaError_t>(e); }
// Records `e` as the calling thread's last error when it is not cudaSuccess, and returns it.
cudaError_t ret(client::Error e);
// The last-error slot itself (cudaGetLastError / cudaPeekAtLastError).
cudaError_t& last_error();
// For API functions rgpu does not implement: logs the name once, returns cudaErrorNotSupported.
int unsupported(const char* name);

// The client core, with the calling thread bound to a context as NVIDIA's runtime binds it: a
// thread without a current context gets its runtime device's (device 0's) primary context, so
// that driver-API calls after runtime calls find it (cuCtxGetCurrent, cuModuleLoad, ...).
inline client::Client& core() {
  client::Client& c = client::Client::get();
  if (!c.contexts().current()) c.set_current_device(0);  // one TLS load when bound
  return c;
}

// Resolves a cudaStream_t; `per_thread` for the _ptsz/_ptds entry points (0 means the calling
// thread's default stream there).
inline CudaError stream_arg(cudaStream_t s, bool per_thread, client::Stream* out) {
  return core().resolve_stream(stream_ref(s, per_thread), out);
}

// Queries answer cudaErrorNotReady without it becoming the last error.
inline cudaError_t ret_query(CudaError e) {
  return e == err::NotReady ? cudaErrorNotReady : ret(e);
}

}  // namespace rgpu::cudart
