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

// Weak, as libcudart.so.13's stubs: tools/check_nvml_list.py tells them from the implemented
// (strong) exports, which docs/compatibility.md lists.
#define RGPU_NVML_STUB(name) \
  RGPU_NVML_API __attribute__((weak)) nvmlReturn_t name() { return rgpu::nvml::unsupported(#name); }
#include "frontend/nvml/unsupported_names.inc"
#undef RGPU_NVML_STUB
