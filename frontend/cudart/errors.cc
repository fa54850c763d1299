// Errors: the last-error rules, the error name/description table and the not-supported path.
#include <mutex>
#include <set>
#include <string>

#include "common/log.h"
#include "frontend/cudart/api.h"

namespace rgpu::cudart {

cudaError_t& last_error() {
  thread_local cudaError_t e = cudaSuccess;
  return e;
}

cudaError_t ret(client::Error e) {
  const cudaError_t r = to_runtime(e);
  if (r != cudaSuccess) last_error() = r;
  return r;
}

int unsupported(const char* name) {
  static std::mutex mu;
  static std::set<std::string>* seen = new std::set<std::string>;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (seen->insert(name).second)
      LOG_ERROR("%s is not supported by rgpu yet; it returns cudaErrorNotSupported", name);
  }
  ret(err::NotSupported);
  return cudaErrorNotSupported;
}

}  // namespace rgpu::cudart

using rgpu::cudart::last_error;

extern "C" {

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error();
  last_error() = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error(); }

const char* cudaGetErrorName(cudaError_t error) {
  const char* n = rgpu::cuda_error_name(error);
  return n ? n : "unrecognized error code";
}

const char* cudaGetErrorString(cudaError_t error) {
  const char* s = rgpu::cuda_error_string(error);
  return s ? s : "unrecognized error code";
}

}  // extern "C"
