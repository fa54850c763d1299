#include "backend/cuda/cuda_driver.h"

#include <dlfcn.h>

namespace rgpu::backend {

bool CudaDriver::load(std::string& error) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    error =
        std::string("no NVIDIA driver on this machine (libcuda.so.1: ") + (why ? why : "?") + ")";
    return false;
  }
#define RGPU_LOAD(name, type)                                          \
  name = reinterpret_cast<name##_fn>(dlsym(lib, #name));               \
  if (!name) {                                                         \
    error = "the NVIDIA driver is too old: libcuda.so.1 lacks " #name; \
    return false;                                                      \
  }
  RGPU_CU_FUNCS(RGPU_LOAD)
#undef RGPU_LOAD
  int version = 0;
  cuDriverGetVersion(&version);
  if (version < 13000) {
    error = "the NVIDIA driver supports CUDA " + std::to_string(version / 1000) + "." +
            std::to_string(version % 1000 / 10) + "; rgpud needs CUDA 13.0 or newer";
    return false;
  }
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) {
    error = "the NVIDIA driver found no usable GPU (cuInit: " + describe(r) + ")";
    return false;
  }
  return true;
}

std::string CudaDriver::describe(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName) cuGetErrorName(r, &name);
  if (cuGetErrorString) cuGetErrorString(r, &text);
  return std::string(name ? name : "CUDA_ERROR_?") + " (" + std::to_string(r) + ")" +
         (text ? std::string(": ") + text : "");
}

}  // namespace rgpu::backend
