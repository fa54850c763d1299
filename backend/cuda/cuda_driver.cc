#include "backend/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <cstring>

namespace rgpu::backend {

namespace {

// Where NVIDIA's installers put the driver library, tried after the search.
constexpr const char* kSystemPaths[] = {
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
    "/usr/lib64/libcuda.so.1",
    "/usr/lib/libcuda.so.1",
    "/usr/local/nvidia/lib64/libcuda.so.1",
    "/usr/lib/wsl/lib/libcuda.so.1",
};

// rgpu's client libcuda.so.1 answers its private core table (client/core_table.h:
// "rgpu-core-table\1"); NVIDIA's answers CUDA_ERROR_NOT_FOUND.  Asking makes nothing.
bool is_rgpu_client(void* lib) {
  using GetExportTable = CUresult (*)(const void**, const CUuuid*);
  auto get = reinterpret_cast<GetExportTable>(dlsym(lib, "cuGetExportTable"));
  if (!get) return false;
  CUuuid id;
  std::memcpy(id.bytes, "rgpu-core-table\1", 16);
  const void* table = nullptr;
  return get(&table, &id) == CUDA_SUCCESS && table != nullptr;
}

std::string path_of(void* lib, const char* fallback) {
  Dl_info info{};
  void* sym = dlsym(lib, "cuInit");
  if (sym && dladdr(sym, &info) != 0 && info.dli_fname) return info.dli_fname;
  return fallback;
}

// NVIDIA's libcuda.so.1: the search's, else the first of kSystemPaths; never rgpu's.
void* open_nvidia_driver(std::string& error) {
  std::string rgpu_found, why;
  auto attempt = [&](const char* name) -> void* {
    void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      if (why.empty()) {
        const char* e = dlerror();
        why = e ? e : "?";
      }
      return nullptr;
    }
    if (!is_rgpu_client(lib)) return lib;
    if (rgpu_found.empty()) rgpu_found = path_of(lib, name);
    dlclose(lib);
    return nullptr;
  };
  if (void* lib = attempt("libcuda.so.1")) return lib;
  for (const char* p : kSystemPaths)
    if (void* lib = attempt(p)) return lib;
  if (!rgpu_found.empty())
    error = "the libcuda.so.1 found is rgpu's own client library (" + rgpu_found +
            "), not NVIDIA's driver, and no NVIDIA driver was found elsewhere: rgpud never runs "
            "on rgpu's libraries (take rgpu's lib directory off LD_LIBRARY_PATH and LD_PRELOAD)";
  else
    error = "no NVIDIA driver on this machine (libcuda.so.1: " + why + ")";
  return nullptr;
}

}  // namespace

bool CudaDriver::load(std::string& error) {
  void* lib = open_nvidia_driver(error);
  if (!lib) return false;
  handle = lib;
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
