// Modules and libraries: images (cubin, fat binary, nvcc's fat binary wrapper, PTX compiled on
// the server) loaded into the current context through the client core's module store (lazily:
// an image travels when a function or global of it is first needed), their functions/kernels and
// globals by name, and function attributes.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/log.h"
#include "frontend/cuda/api.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::function_of;
using rgpu::cuda_fe::module_of;
using rgpu::cuda_fe::to_driver;

namespace {

constexpr uint32_t kWrapperMagic = 0x466243B1;  // __fatBinC_Wrapper_t, what nvcc embeds
struct FatbinWrapper {
  uint32_t magic;
  uint32_t version;
  const void* data;
  const void* unused;
};

// The image itself: nvcc's wrapper points at the fat binary.
const void* unwrap(const void* image) {
  uint32_t magic = 0;
  std::memcpy(&magic, image, sizeof magic);
  if (magic == kWrapperMagic) return static_cast<const FatbinWrapper*>(image)->data;
  return image;
}

// CUDA_MODULE_LOADING=EAGER: a module is loaded on its device when it is loaded, as NVIDIA's
// driver then does.  Otherwise (LAZY, CUDA's default) nothing travels until a function or global
// of it is first needed (client/module_loading.cc).
bool eager_loading() {
  static const bool eager = [] {
    const char* v = getenv("CUDA_MODULE_LOADING");
    return v && strcmp(v, "EAGER") == 0;
  }();
  return eager;
}

// A module needs a current context; a library does not (CUDA 12's libraries are loaded into a
// context when first used there: NVIDIA's runtime loads them before it makes one current).  The
// image's headers are checked here (the client core's load_image), as the driver checks them at
// load; what lies deeper is found when the image is first used.
CUresult load(void** out, const void* image, size_t size = 0, bool library = false) {
  RGPU_INIT();
  if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
  int dev = 0;
  if (client::Error e = cuda_fe::current_device(&dev); e != err::Success) {
    if (!library) return to_driver(e);
    dev = -1;
  }
  client::Module* m = nullptr;
  image = unwrap(image);
  if (size == 0 && client::image_size(image) == 0) return CUDA_ERROR_INVALID_IMAGE;
  CUresult r = to_driver(core().module_load(image, size, &m));
  if (r != CUDA_SUCCESS) return r;
  if (dev >= 0 && eager_loading()) {
    if (CUresult r2 = to_driver(core().module_on(m, dev)); r2 != CUDA_SUCCESS) {
      core().module_unload(m);
      return r2;
    }
  }
  *out = m;
  return CUDA_SUCCESS;
}

CUresult load_file(void** out, const char* path, bool library = false) {
  if (!out || !path) return CUDA_ERROR_INVALID_VALUE;
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    LOG_ERROR("cuModuleLoad/cuLibraryLoadFromFile: cannot open %s", path);
    return CUDA_ERROR_FILE_NOT_FOUND;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  bytes.push_back('\0');  // PTX text needs its terminating NUL
  return load(out, bytes.data(), bytes.size(), library);
}

client::Module* valid_module(const void* h) {
  client::Module* m = module_of(h);
  return m && core().modules().valid(m) ? m : nullptr;
}

// A kernel of the module's image, or CUDA_ERROR_NOT_FOUND.  cuModuleGetFunction (`load`) loads
// the function on the current device, as CUDA's lazy loading does (the image travels then, and
// the server says whether it has the kernel); cuLibraryGetKernel finds the name in the image here
// and loads nothing.
CUresult get_function(void** out, const void* mod, const char* name, bool load) {
  RGPU_INIT();
  if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
  client::Module* m = valid_module(mod);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  if (load) {
    int dev = 0;
    if (CUresult r = to_driver(cuda_fe::current_device(&dev)); r != CUDA_SUCCESS) return r;
    client::Function* f = core().modules().function(m, name);
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    uint32_t id = 0;
    const client::KernelInfo* k = nullptr;
    if (CUresult r = to_driver(core().resolved_kernel(f, dev, &id, &k)); r != CUDA_SUCCESS)
      return r;
    if (!k->found) return CUDA_ERROR_NOT_FOUND;
    *out = f;
    return CUDA_SUCCESS;
  }
  std::shared_ptr<const client::KernelNames> names;
  if (CUresult r = to_driver(core().module_kernels(m, &names)); r != CUDA_SUCCESS) return r;
  if (names->set.count(name) == 0) return CUDA_ERROR_NOT_FOUND;
  client::Function* f = core().modules().function(m, name);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  *out = f;
  return CUDA_SUCCESS;
}

CUresult get_global(CUdeviceptr* dptr, size_t* bytes, const void* mod, const char* name) {
  RGPU_INIT();
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  client::Module* m = valid_module(mod);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  client::Variable* v = core().modules().variable(m, name);
  if (!v) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t addr = 0, size = 0;
  if (CUresult r = to_driver(core().global_info(v, &addr, &size)); r != CUDA_SUCCESS) return r;
  if (dptr) *dptr = addr;
  if (bytes) *bytes = static_cast<size_t>(size);
  return CUDA_SUCCESS;
}

CUresult func_attribute(int* pi, int attrib, const void* fn) {
  RGPU_INIT();
  if (!pi || !fn) return CUDA_ERROR_INVALID_VALUE;
  if (attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  client::Function* f = function_of(fn);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  std::vector<int32_t> v;
  if (CUresult r = to_driver(core().func_attributes(f, v)); r != CUDA_SUCCESS) return r;
  if (static_cast<size_t>(attrib) >= v.size()) return CUDA_ERROR_INVALID_VALUE;
  *pi = v[static_cast<size_t>(attrib)];
  return CUDA_SUCCESS;
}

}  // namespace

// ---- modules ----------------------------------------------------------------------------------

RGPU_CU CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  return load(reinterpret_cast<void**>(module), image);
}
RGPU_CU CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions,
                                    CUjit_option*, void**) {
  // JIT options tune or report on a compilation that happens on the server; none changes what
  // the module holds, so they are accepted and not applied.
  (void)numOptions;
  return load(reinterpret_cast<void**>(module), image);
}
RGPU_CU CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
  return load(reinterpret_cast<void**>(module), fatCubin);
}
RGPU_CU CUresult cuModuleLoad(CUmodule* module, const char* fname) {
  RGPU_INIT();
  return load_file(reinterpret_cast<void**>(module), fname);
}
RGPU_CU CUresult cuModuleUnload(CUmodule hmod) {
  RGPU_INIT();
  client::Module* m = valid_module(hmod);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  return to_driver(core().module_unload(m));
}
RGPU_CU CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  return get_function(reinterpret_cast<void**>(hfunc), hmod, name, true);
}
RGPU_CU CUresult cuModuleGetGlobal_v2(CUdeviceptr* dptr, size_t* bytes, CUmodule hmod,
                                      const char* name) {
  return get_global(dptr, bytes, hmod, name);
}
RGPU_CU CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode* mode) {
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  *mode = eager_loading() ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
  return CUDA_SUCCESS;
}

// ---- libraries and kernels ----------------------------------------------------------------------

RGPU_CU CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option*, void**,
                                   unsigned int, CUlibraryOption*, void**, unsigned int) {
  return load(reinterpret_cast<void**>(library), code, 0, true);
}
RGPU_CU CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* fileName, CUjit_option*,
                                       void**, unsigned int, CUlibraryOption*, void**,
                                       unsigned int) {
  RGPU_INIT();
  return load_file(reinterpret_cast<void**>(library), fileName, true);
}
RGPU_CU CUresult cuLibraryUnload(CUlibrary library) {
  RGPU_INIT();
  client::Module* m = valid_module(library);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  return to_driver(core().module_unload(m));
}
RGPU_CU CUresult cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library, const char* name) {
  return get_function(reinterpret_cast<void**>(pKernel), library, name, false);
}
RGPU_CU CUresult cuLibraryGetModule(CUmodule* pMod, CUlibrary library) {
  RGPU_INIT();
  if (!pMod) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_module(library)) return CUDA_ERROR_INVALID_HANDLE;
  *pMod = reinterpret_cast<CUmodule>(library);  // one object: the library is its module
  return CUDA_SUCCESS;
}
RGPU_CU CUresult cuLibraryGetGlobal(CUdeviceptr* dptr, size_t* bytes, CUlibrary library,
                                    const char* name) {
  return get_global(dptr, bytes, library, name);
}
// A library global used as managed memory: its host shadow (the address is the same on both
// sides), kept coherent like a __managed__ variable's (the runtime's cudaLibraryGetManaged).
RGPU_CU CUresult cuLibraryGetManaged(CUdeviceptr* dp, size_t* bytes, CUlibrary library,
                                     const char* name) {
  RGPU_INIT();
  if (!name || (!dp && !bytes)) return CUDA_ERROR_INVALID_VALUE;
  client::Module* m = valid_module(library);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  client::Variable* v = core().modules().variable(m, name);
  if (!v) return CUDA_ERROR_NOT_FOUND;
  uint64_t addr = 0, size = 0;
  if (auto e = core().global_info(v, &addr, &size); e != err::Success)
    return e == client::errc::InvalidSymbol ? CUDA_ERROR_NOT_FOUND : to_driver(e);
  if (dp) {
    void* host = nullptr;
    if (CUresult r = to_driver(core().managed_variable(v, &host)); r != CUDA_SUCCESS) return r;
    *dp = cuda_fe::dptr(host);
  }
  if (bytes) *bytes = static_cast<size_t>(size);
  return CUDA_SUCCESS;
}

// rgpu registers no unified tables (__cudaRegisterUnifiedTable stays a stub: such a pointer could
// only be called on the GPU's own host): no name is a unified function, CUDA_ERROR_NOT_FOUND.
RGPU_CU CUresult cuLibraryGetUnifiedFunction(void** fptr, CUlibrary library, const char* symbol) {
  RGPU_INIT();
  if (!fptr || !symbol) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_module(library)) return CUDA_ERROR_INVALID_HANDLE;
  LOG_WARN(
      "cuLibraryGetUnifiedFunction(%s): rgpu has no unified functions (their pointers are "
      "only callable on the GPU's own host)",
      symbol);
  return CUDA_ERROR_NOT_FOUND;
}

RGPU_CU CUresult cuLibraryGetKernelCount(unsigned int* count, CUlibrary lib) {
  RGPU_INIT();
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  client::Module* m = valid_module(lib);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  std::vector<std::string> names;
  if (CUresult r = to_driver(core().module_kernel_names(m, names)); r != CUDA_SUCCESS) return r;
  *count = static_cast<unsigned>(names.size());
  return CUDA_SUCCESS;
}
RGPU_CU CUresult cuKernelGetFunction(CUfunction* pFunc, CUkernel kernel) {
  RGPU_INIT();
  if (!pFunc || !kernel) return CUDA_ERROR_INVALID_VALUE;
  if (!function_of(kernel)) return CUDA_ERROR_INVALID_HANDLE;
  *pFunc = reinterpret_cast<CUfunction>(kernel);  // one object for both
  return CUDA_SUCCESS;
}
RGPU_CU CUresult cuKernelGetLibrary(CUlibrary* pLib, CUkernel kernel) {
  RGPU_INIT();
  if (!pLib || !kernel) return CUDA_ERROR_INVALID_VALUE;
  client::Function* f = function_of(kernel);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  *pLib = reinterpret_cast<CUlibrary>(f->module);
  return CUDA_SUCCESS;
}
RGPU_CU CUresult cuKernelGetName(const char** name, CUkernel kernel) {
  RGPU_INIT();
  if (!name || !kernel) return CUDA_ERROR_INVALID_VALUE;
  client::Function* f = function_of(kernel);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  *name = f->name.c_str();
  return CUDA_SUCCESS;
}
RGPU_CU CUresult cuFuncGetName(const char** name, CUfunction func) {
  RGPU_INIT();
  if (!name || !func) return CUDA_ERROR_INVALID_VALUE;
  client::Function* f = function_of(func);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  *name = f->name.c_str();
  return CUDA_SUCCESS;
}
RGPU_CU CUresult cuFuncGetModule(CUmodule* hmod, CUfunction func) {
  RGPU_INIT();
  if (!hmod || !func) return CUDA_ERROR_INVALID_VALUE;
  client::Function* f = function_of(func);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  *hmod = reinterpret_cast<CUmodule>(f->module);
  return CUDA_SUCCESS;
}

// ---- attributes and parameters ----------------------------------------------------------------

RGPU_CU CUresult cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction hfunc) {
  return func_attribute(pi, attrib, hfunc);
}
RGPU_CU CUresult cuKernelGetAttribute(int* pi, CUfunction_attribute attrib, CUkernel kernel,
                                      CUdevice dev) {
  if (core().check_device(dev) != err::Success) return CUDA_ERROR_INVALID_DEVICE;
  return func_attribute(pi, attrib, kernel);
}
RGPU_CU CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  RGPU_INIT();
  client::Function* f = function_of(hfunc);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  return to_driver(core().func_set_attribute(f, attrib, value));
}
RGPU_CU CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
                                      CUdevice dev) {
  RGPU_INIT();
  client::Function* f = function_of(kernel);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  return to_driver(core().func_set_attribute_on(f, dev, attrib, val));
}
RGPU_CU CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config) {
  RGPU_INIT();
  client::Function* f = function_of(hfunc);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  return to_driver(core().func_set_cache_config(f, config));
}
RGPU_CU CUresult cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice) {
  return cuFuncSetCacheConfig(reinterpret_cast<CUfunction>(kernel), config);
}
// Parameter layouts come from the server when the function is first used on a device
// (client/module_loading.cc) and are answered from there.
RGPU_CU CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t* paramOffset,
                                    size_t* paramSize) {
  RGPU_INIT();
  if (!func || !paramOffset) return CUDA_ERROR_INVALID_VALUE;
  client::Function* f = function_of(func);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  size_t size = 0;
  CUresult r = to_driver(core().param_info(f, paramIndex, paramOffset, &size));
  if (r == CUDA_SUCCESS && paramSize) *paramSize = size;
  return r;
}
RGPU_CU CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t* paramOffset,
                                      size_t* paramSize) {
  return cuFuncGetParamInfo(reinterpret_cast<CUfunction>(kernel), paramIndex, paramOffset,
                            paramSize);
}

// ---- enumeration ----------------------------------------------------------------------------

namespace {

// The first `n` kernels of a module or library, as the functions the module store names.
CUresult enumerate(void** out, unsigned n, const void* mod) {
  RGPU_INIT();
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  client::Module* m = valid_module(mod);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  std::vector<std::string> names;
  if (CUresult r = to_driver(core().module_kernel_names(m, names)); r != CUDA_SUCCESS) return r;
  if (n > names.size()) n = static_cast<unsigned>(names.size());
  for (unsigned i = 0; i < n; ++i) {
    client::Function* f = core().modules().function(m, names[i]);
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    out[i] = f;
  }
  return CUDA_SUCCESS;
}

}  // namespace

RGPU_CU CUresult cuLibraryEnumerateKernels(CUkernel* kernels, unsigned int numKernels,
                                           CUlibrary lib) {
  return enumerate(reinterpret_cast<void**>(kernels), numKernels, lib);
}
RGPU_CU CUresult cuModuleGetFunctionCount(unsigned int* count, CUmodule mod) {
  return cuLibraryGetKernelCount(count, reinterpret_cast<CUlibrary>(mod));
}
RGPU_CU CUresult cuModuleEnumerateFunctions(CUfunction* functions, unsigned int numFunctions,
                                            CUmodule mod) {
  return enumerate(reinterpret_cast<void**>(functions), numFunctions, mod);
}
