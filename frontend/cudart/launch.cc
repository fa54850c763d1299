// Launches beyond the triple-chevron: cudaLaunchKernelExC with every launch attribute, cooperative
// launches, kernel queries (name, parameters, cluster and shared-memory occupancy), and the
// library API (cudaLibrary* / cudaKernel*) on the client core's module store.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <vector>

#include "common/log.h"
#include "frontend/common/launch_attributes.h"
#include "frontend/cudart/api.h"
#include "frontend/cudart/graph_nodes.h"
#include "frontend/cudart/handles.h"
#include "frontend/cudart/registration.h"

using namespace rgpu;
using rgpu::cudart::core;
using rgpu::cudart::ret;

#define RGPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using Attr = client::Client::LaunchAttribute;

// CUDA 13's answer for a function it does not know.
constexpr CudaError kInvalidResourceHandle = client::errc::InvalidResourceHandle;
constexpr CudaError kInvalidSymbol = client::errc::InvalidSymbol;
constexpr CudaError kInvalidKernelImage = 200;  // cudaErrorInvalidKernelImage
constexpr CudaError kFileNotFound = 301;        // cudaErrorFileNotFound

client::Client::Dim3 d3(dim3 d) { return {d.x, d.y, d.z}; }

client::Function* function_of(const void* func) {
  return cudart::Registration::get().function(func);
}


// One runtime attribute in the core's terms; false for an id this build does not know.
// The attribute's id as the number the program stored: it may be no enumerator at all, and reading
// such a value as the enum type is undefined.
int raw_id(const cudaLaunchAttribute& a) {
  int id;
  static_assert(sizeof id == sizeof a.id);
  std::memcpy(&id, &a.id, sizeof id);
  return id;
}

bool convert(const cudaLaunchAttribute& a, Attr& out) {
  return frontend::launch_attribute(raw_id(a), a.val, out,
                                    [](cudaEvent_t e) { return cudart::event_of(e); });
}

}  // namespace

bool rgpu::cudart::launch_attribute(const cudaLaunchAttribute& a, Attr& out) {
  return convert(a, out);
}

namespace {

// The attributes of a launch configuration; those that leave a launch as it is (ignored entries,
// cooperative 0, programmatic serialization 0) are dropped, so such a launch stays a plain one.
cudaError_t attributes(const cudaLaunchConfig_t* config, std::vector<Attr>& out) {
  out.clear();
  if (config->numAttrs && !config->attrs) return ret(err::InvalidValue);
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const cudaLaunchAttribute& a = config->attrs[i];
    const int id = raw_id(a);
    if (id == cudaLaunchAttributeIgnore) continue;
    if (id == cudaLaunchAttributeCooperative && !a.val.cooperative) continue;
    if (id == cudaLaunchAttributeProgrammaticStreamSerialization &&
        !a.val.programmaticStreamSerializationAllowed)
      continue;
    Attr c;
    if (!convert(a, c)) {
      LOG_ERROR(
          "cudaLaunchKernelExC: launch attribute %d is unknown to rgpu (cudaErrorInvalidValue)",
          id);
      return ret(err::InvalidValue);
    }
    out.push_back(c);
  }
  return cudaSuccess;
}

cudaError_t launch_attributed(const void* func, dim3 grid, dim3 block, void** args, size_t shmem,
                              cudaStream_t stream, bool per_thread,
                              const std::vector<Attr>& attrs) {
  client::Function* f = function_of(func);
  if (!f) return ret(kInvalidResourceHandle);
  client::Stream s;
  if (CudaError e = cudart::stream_arg(stream, per_thread, &s); e != err::Success) return ret(e);
  return ret(core().launch_ex(f, d3(grid), d3(block), args, shmem, s, attrs));
}

cudaError_t launch_ex(const cudaLaunchConfig_t* config, const void* func, void** args,
                      bool per_thread) {
  if (!config) return ret(err::InvalidValue);
  std::vector<Attr> attrs;
  if (cudaError_t e = attributes(config, attrs); e != cudaSuccess) return e;
  return launch_attributed(func, config->gridDim, config->blockDim, args, config->dynamicSmemBytes,
                           config->stream, per_thread, attrs);
}

cudaError_t cooperative(const void* func, dim3 grid, dim3 block, void** args, size_t shmem,
                        cudaStream_t stream, bool per_thread) {
  Attr a;
  a.id = cudaLaunchAttributeCooperative;
  a.v[0] = 1;
  return launch_attributed(func, grid, block, args, shmem, stream, per_thread, {a});
}

client::Module* library_of(cudaLibrary_t lib) {
  auto* m = reinterpret_cast<client::Module*>(lib);
  return m && core().modules().valid(m) ? m : nullptr;
}

// A library kernel's handle: its store function, registered under its own address so that every
// call taking a function (launches, attributes, occupancy) finds it.
cudaKernel_t library_kernel(client::Module* m, const std::string& name) {
  client::Function* f = core().modules().function(m, name);
  if (!f) return nullptr;
  cudart::Registration::get().add_function(m, f, name.c_str());
  return reinterpret_cast<cudaKernel_t>(f);
}

cudaError_t library_load(cudaLibrary_t* library, const void* code, size_t size) {
  if (!library || !code) return ret(err::InvalidValue);
  client::Module* m = nullptr;
  if (CudaError e = core().module_load(code, size, &m); e != err::Success) return ret(e);
  *library = reinterpret_cast<cudaLibrary_t>(m);
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args) {
  return launch_ex(config, func, args, false);
}

cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args,
                                        size_t sharedMem, cudaStream_t stream) {
  return cooperative(func, gridDim, blockDim, args, sharedMem, stream, false);
}

// ---- kernel queries --------------------------------------------------------------------------

cudaError_t cudaGetKernel(cudaKernel_t* kernelPtr, const void* entryFuncAddr) {
  if (!kernelPtr) return ret(err::InvalidValue);
  if (!function_of(entryFuncAddr)) return ret(kInvalidResourceHandle);
  *kernelPtr = reinterpret_cast<cudaKernel_t>(const_cast<void*>(entryFuncAddr));
  return cudaSuccess;
}

cudaError_t cudaFuncGetName(const char** name, const void* func) {
  if (!name) return ret(err::InvalidValue);
  client::Function* f = function_of(func);
  if (!f) return ret(kInvalidResourceHandle);
  *name = f->name.c_str();  // store functions are never freed
  return cudaSuccess;
}

cudaError_t cudaGetFuncBySymbol(cudaFunction_t* functionPtr, const void* symbolPtr) {
  if (!functionPtr) return ret(err::InvalidValue);
  client::Function* f = function_of(symbolPtr);
  if (!f) return ret(kInvalidResourceHandle);
  // rgpu's handle for the function (the driver front-end, issue 12, takes the same objects).
  cudart::Registration::get().add_function(f->module, f, f->name.c_str());
  *functionPtr = reinterpret_cast<cudaFunction_t>(f);
  return cudaSuccess;
}

cudaError_t cudaFuncGetParamInfo(const void* func, size_t paramIndex, size_t* paramOffset,
                                 size_t* paramSize) {
  client::Function* f = function_of(func);
  if (!f) return ret(kInvalidResourceHandle);
  return ret(core().param_info(f, paramIndex, paramOffset, paramSize));
}

cudaError_t cudaFuncSetSharedMemConfig(const void* func, cudaSharedMemConfig config) {
  // Deprecated: bank size is fixed on every GPU CUDA 13 supports; the call checks and succeeds.
  if (config < cudaSharedMemBankSizeDefault || config > cudaSharedMemBankSizeEightByte)
    return ret(err::InvalidValue);
  if (!function_of(func)) return ret(kInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t* dynamicSmemSize, const void* func,
                                                      int numBlocks, int blockSize) {
  client::Function* f = function_of(func);
  if (!f) return ret(kInvalidResourceHandle);
  return ret(core().occupancy_dynamic_smem(f, numBlocks, blockSize, dynamicSmemSize));
}

static cudaError_t cluster_query(int query, int* value, const void* func,
                                 const cudaLaunchConfig_t* config) {
  if (!value || !config) return ret(err::InvalidValue);
  client::Function* f = function_of(func);
  if (!f) return ret(kInvalidResourceHandle);
  std::vector<Attr> attrs;
  if (cudaError_t e = attributes(config, attrs); e != cudaSuccess) return e;
  return ret(core().occupancy_cluster(f, query, d3(config->gridDim), d3(config->blockDim),
                                      config->dynamicSmemBytes, attrs, value));
}

cudaError_t cudaOccupancyMaxActiveClusters(int* numClusters, const void* func,
                                           const cudaLaunchConfig_t* launchConfig) {
  return cluster_query(0, numClusters, func, launchConfig);
}

cudaError_t cudaOccupancyMaxPotentialClusterSize(int* clusterSize, const void* func,
                                                 const cudaLaunchConfig_t* launchConfig) {
  return cluster_query(1, clusterSize, func, launchConfig);
}

// ---- libraries -------------------------------------------------------------------------------

cudaError_t cudaLibraryLoadData(cudaLibrary_t* library, const void* code, cudaJitOption*, void**,
                                unsigned int, cudaLibraryOption*, void**, unsigned int) {
  // JIT and library options are hints to the server's driver; rgpu does not forward them.
  return library_load(library, code, 0);
}

cudaError_t cudaLibraryLoadFromFile(cudaLibrary_t* library, const char* fileName, cudaJitOption*,
                                    void**, unsigned int, cudaLibraryOption*, void**,
                                    unsigned int) {
  if (!library || !fileName) return ret(err::InvalidValue);
  std::ifstream in(fileName, std::ios::binary);
  if (!in) {
    LOG_ERROR("cudaLibraryLoadFromFile: cannot open %s", fileName);
    return ret(kFileNotFound);
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // PTX text needs its terminating NUL, as cuLibraryLoadData reads it.
  if (!bytes.empty() && bytes[0] != 0x7f && static_cast<unsigned char>(bytes[0]) != 0x50)
    bytes.push_back('\0');
  if (bytes.empty()) return ret(kInvalidKernelImage);
  return library_load(library, bytes.data(), bytes.size());
}

cudaError_t cudaLibraryUnload(cudaLibrary_t library) {
  client::Module* m = library_of(library);
  if (!m) return ret(kInvalidResourceHandle);
  return ret(core().module_unload(m));
}

cudaError_t cudaLibraryGetKernel(cudaKernel_t* pKernel, cudaLibrary_t library, const char* name) {
  if (!pKernel || !name) return ret(err::InvalidValue);
  client::Module* m = library_of(library);
  if (!m) return ret(kInvalidResourceHandle);
  std::shared_ptr<const client::KernelNames> names;
  if (CudaError e = core().module_kernels(m, &names); e != err::Success) return ret(e);
  if (names->set.count(name) == 0) return ret(client::errc::NotFound);
  *pKernel = library_kernel(m, name);
  return *pKernel ? cudaSuccess : ret(kInvalidResourceHandle);
}

cudaError_t cudaLibraryGetKernelCount(unsigned int* count, cudaLibrary_t lib) {
  if (!count) return ret(err::InvalidValue);
  client::Module* m = library_of(lib);
  if (!m) return ret(kInvalidResourceHandle);
  std::vector<std::string> names;
  if (CudaError e = core().module_kernel_names(m, names); e != err::Success) return ret(e);
  *count = static_cast<unsigned>(names.size());
  return cudaSuccess;
}

cudaError_t cudaLibraryEnumerateKernels(cudaKernel_t* kernels, unsigned int numKernels,
                                        cudaLibrary_t lib) {
  if (!kernels) return ret(err::InvalidValue);
  client::Module* m = library_of(lib);
  if (!m) return ret(kInvalidResourceHandle);
  std::vector<std::string> names;
  if (CudaError e = core().module_kernel_names(m, names); e != err::Success) return ret(e);
  for (unsigned i = 0; i < numKernels && i < names.size(); ++i)
    kernels[i] = library_kernel(m, names[i]);
  return cudaSuccess;
}

cudaError_t cudaLibraryGetGlobal(void** dptr, size_t* bytes, cudaLibrary_t library,
                                 const char* name) {
  if (!name) return ret(err::InvalidValue);
  client::Module* m = library_of(library);
  if (!m) return ret(kInvalidResourceHandle);
  client::Variable* v = core().modules().variable(m, name);
  if (!v) return ret(kInvalidResourceHandle);
  uint64_t addr = 0, size = 0;
  if (CudaError e = core().global_info(v, &addr, &size); e != err::Success)
    return ret(e == kInvalidSymbol ? client::errc::NotFound : e);
  if (dptr) *dptr = reinterpret_cast<void*>(addr);
  if (bytes) *bytes = static_cast<size_t>(size);
  return cudaSuccess;
}

cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t kernel, cudaFuncAttribute attr, int value,
                                            int device) {
  client::Function* f = function_of(reinterpret_cast<const void*>(kernel));
  if (!f) return ret(kInvalidResourceHandle);
  return ret(core().func_set_attribute_on(f, device, static_cast<int>(attr), value));
}

}  // extern "C"

// Per-thread-default-stream variants.
RGPU_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config, const void* func,
                                                 void** args) {
  return launch_ex(config, func, args, true);
}
RGPU_EXPORT cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* func, dim3 gridDim,
                                                         dim3 blockDim, void** args,
                                                         size_t sharedMem, cudaStream_t stream) {
  return cooperative(func, gridDim, blockDim, args, sharedMem, stream, true);
}
