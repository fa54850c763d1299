// Every NVML export rgpu does not answer: NVML_ERROR_NOT_SUPPORTED, its name logged once — never a
// crash, never a silent success.  The stubs take no parameters, which is ABI-safe for functions
// that all return an nvmlReturn_t (an int) and whose arguments the callee may ignore.
#include <mutex>
#include <set>
#include <string>

#include "common/log.h"
#include "frontend/nvml/nvml_state.h"

namespace rgpu::nvml {
namespace {

nvmlReturn_t unsupported(const char* name) {
  static std::mutex mu;
  static std::set<std::string>* logged = new std::set<std::string>;
  std::lock_guard<std::mutex> lock(mu);
  if (logged->insert(name).second)
    LOG_WARN("%s is not supported by rgpu's libnvidia-ml.so.1 (NVML_ERROR_NOT_SUPPORTED)", name);
  return NVML_ERROR_NOT_SUPPORTED;
}

}  // namespace
}  // namespace rgpu::nvml

#define RGPU_NVML_STUB(name) \
  RGPU_NVML_API nvmlReturn_t name() { return rgpu::nvml::unsupported(#name); }
#include "frontend/nvml/unsupported_names.inc"
#undef RGPU_NVML_STUB
