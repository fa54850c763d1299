// CUresult: the one map from the client core's neutral errors, cuGetErrorName/String, and the
// "not supported" path of every entry point rgpu does not implement.
#include <atomic>
#include <mutex>
#include <set>
#include <string>

#include "common/log.h"
#include "frontend/cuda/api.h"

namespace rgpu::cuda_fe {

namespace {

struct ErrorEntry {
  int code;
  const char* name;
  const char* text;
};
constexpr ErrorEntry kErrors[] = {
#include "frontend/cuda/error_table.inc"
};

const ErrorEntry* find_error(int code) {
  for (const ErrorEntry& e : kErrors)
    if (e.code == code) return &e;
  return nullptr;
}

}  // namespace

CUresult to_driver(client::Error e) {
  // The wire's numbers are cudaError_t's, equal to CUresult's except for the runtime-only codes.
  switch (e) {
    case client::errc::InvalidSymbol:
      return CUDA_ERROR_NOT_FOUND;
    case client::errc::InvalidDeviceFunction:
      return CUDA_ERROR_INVALID_HANDLE;
    case client::errc::InvalidConfiguration:
      return CUDA_ERROR_INVALID_VALUE;
    default:
      break;
  }
  // A runtime code with no driver twin (none the core produces today) must not leak as a
  // number the driver would read differently.
  if (!find_error(e)) return CUDA_ERROR_UNKNOWN;
  return static_cast<CUresult>(e);
}

int unsupported(const char* name) {
  static std::mutex mu;
  static std::set<std::string>* seen = new std::set<std::string>;
  std::lock_guard<std::mutex> lock(mu);
  if (seen->insert(name).second)
    LOG_ERROR("%s is not supported by rgpu's libcuda.so.1 yet; it returns CUDA_ERROR_NOT_SUPPORTED",
              name);
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace rgpu::cuda_fe

RGPU_CU CUresult cuGetErrorName(CUresult error, const char** pStr) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  const auto* e = rgpu::cuda_fe::find_error(error);
  *pStr = e ? e->name : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

RGPU_CU CUresult cuGetErrorString(CUresult error, const char** pStr) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  const auto* e = rgpu::cuda_fe::find_error(error);
  *pStr = e ? e->text : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
