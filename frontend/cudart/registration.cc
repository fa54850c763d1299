// nvcc's registration ABI (crt/host_runtime.h).  Every program nvcc builds calls these from a static
// constructor, kernels or not, so they must succeed quietly.  This records what is registered;
// shipping modules and launching kernels are the kernel work's (until then a launch fails with
// cudaErrorNotSupported through __cudaPushCallConfiguration's stub).
#include <mutex>
#include <string>
#include <vector>

#include "frontend/cudart/api.h"

namespace rgpu::cudart {
namespace {

struct FatBinary {
  void* wrapper;  // first member: nvcc treats the handle as void**
  std::vector<std::string> functions;
  std::vector<std::string> variables;
};

std::mutex& mu() {
  static std::mutex* m = new std::mutex;
  return *m;
}

}  // namespace
}  // namespace rgpu::cudart

using rgpu::cudart::FatBinary;
using rgpu::cudart::mu;

#define RGPU_EXPORT extern "C" __attribute__((visibility("default")))

RGPU_EXPORT void** __cudaRegisterFatBinary(void* fatCubin) {
  auto* fb = new FatBinary{fatCubin, {}, {}};
  return reinterpret_cast<void**>(fb);
}

RGPU_EXPORT void __cudaRegisterFatBinaryEnd(void** /*handle*/) {}

RGPU_EXPORT void __cudaUnregisterFatBinary(void** handle) {
  delete reinterpret_cast<FatBinary*>(handle);
}

RGPU_EXPORT void __cudaRegisterFunction(void** handle, const char* /*hostFun*/, char* deviceFun,
                                        const char* /*deviceName*/, int, void*, void*, void*,
                                        void*, int*) {
  std::lock_guard<std::mutex> lock(mu());
  if (handle && deviceFun) reinterpret_cast<FatBinary*>(handle)->functions.emplace_back(deviceFun);
}

RGPU_EXPORT void __cudaRegisterVar(void** handle, char* /*hostVar*/, char* deviceAddress,
                                   const char* /*deviceName*/, int, size_t, int, int) {
  std::lock_guard<std::mutex> lock(mu());
  if (handle && deviceAddress)
    reinterpret_cast<FatBinary*>(handle)->variables.emplace_back(deviceAddress);
}
