// Kernels: nvcc's registration and launch ABI (crt/host_runtime.h, CUDA 13), the plain launch
// calls, function attributes, occupancy, and device symbols (attributed and cooperative launches,
// kernel queries and libraries: launch.cc).
#include <map>
#include <mutex>
#include <vector>

#include "common/log.h"
#include "frontend/cudart/api.h"
#include "frontend/cudart/handles.h"
#include "frontend/cudart/registration.h"

using namespace rgpu;
using rgpu::cudart::core;
using rgpu::cudart::ret;

#define RGPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr CudaError kInvalidConfiguration = client::errc::InvalidConfiguration;
constexpr CudaError kInvalidSymbol = client::errc::InvalidSymbol;
// CUDA 13's answer for an unknown function.
constexpr CudaError kInvalidResourceHandle = client::errc::InvalidResourceHandle;

struct CallConfig {
  dim3 grid, block;
  size_t shared_mem;
  cudaStream_t stream;
};

std::vector<CallConfig>& config_stack() {
  thread_local std::vector<CallConfig> stack;
  return stack;
}

client::Client::Dim3 d3(dim3 d) { return {d.x, d.y, d.z}; }
client::Function* function_of(const void* host_fun) {
  return cudart::Registration::get().function(host_fun);
}
client::Variable* variable_of(const void* host_var) {
  return cudart::Registration::get().variable(host_var);
}

cudaError_t launch(const void* func, dim3 grid, dim3 block, void** args, size_t shmem,
                   cudaStream_t stream, bool per_thread) {
  client::Function* f = function_of(func);
  if (!f) return ret(kInvalidResourceHandle);
  client::Stream s;
  if (CudaError e = core().resolve_stream(cudart::stream_ref(stream, per_thread), &s);
      e != err::Success)
    return ret(e);
  return ret(core().launch(f, d3(grid), d3(block), args, shmem, s));
}

cudaError_t symbol_range(const void* symbol, size_t count, size_t offset, uint64_t* addr) {
  client::Variable* v = variable_of(symbol);
  if (!v) return ret(kInvalidSymbol);
  if (offset > v->size || count > v->size - offset) return ret(err::InvalidValue);
  uint64_t base = 0;
  if (CudaError e = core().symbol_address(v, &base); e != err::Success) return ret(e);
  *addr = base + offset;
  return cudaSuccess;
}

// A copy to or from a symbol; `stream` set: asynchronous on it.
cudaError_t symbol_copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                        cudaStream_t stream, bool async, bool per_thread) {
  auto k = static_cast<client::CopyKind>(kind);
  if (!async) {
    if (!per_thread) return ret(core().memcpy(dst, src, count, k));
    stream = nullptr;
  }
  client::Stream s;
  if (CudaError e = core().resolve_stream(cudart::stream_ref(stream, per_thread), &s);
      e != err::Success)
    return ret(e);
  CudaError e = core().memcpy2d_async(dst, count, src, count, count, 1, k, s);
  if (e == err::Success && !async) e = core().stream_synchronize(s);
  return ret(e);
}

cudaError_t to_symbol(const void* symbol, const void* src, size_t count, size_t offset,
                      cudaMemcpyKind kind, cudaStream_t stream = nullptr, bool async = false,
                      bool per_thread = false) {
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault)
    return ret(err::InvalidMemcpyDirection);
  uint64_t addr = 0;
  if (cudaError_t e = symbol_range(symbol, count, offset, &addr); e != cudaSuccess) return e;
  return symbol_copy(reinterpret_cast<void*>(addr), src, count, kind, stream, async, per_thread);
}

cudaError_t from_symbol(void* dst, const void* symbol, size_t count, size_t offset,
                        cudaMemcpyKind kind, cudaStream_t stream = nullptr, bool async = false,
                        bool per_thread = false) {
  if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault)
    return ret(err::InvalidMemcpyDirection);
  uint64_t addr = 0;
  if (cudaError_t e = symbol_range(symbol, count, offset, &addr); e != cudaSuccess) return e;
  return symbol_copy(dst, reinterpret_cast<const void*>(addr), count, kind, stream, async,
                     per_thread);
}

}  // namespace

// ---- registration -------------------------------------------------------------------------------

RGPU_EXPORT void** __cudaRegisterFatBinary(void* fatCubin) {
  std::string error;
  client::Module* m = cudart::Registration::get().add_fatbin(fatCubin, error);
  if (!m) LOG_ERROR("cannot register a fat binary: %s; its kernels will not run", error.c_str());
  // The handle nvcc keeps: a pointer-sized slot.  Ours holds the module (or null).
  auto** handle = new void*(m);
  return handle;
}

RGPU_EXPORT void __cudaRegisterFatBinaryEnd(void** /*handle*/) {}

RGPU_EXPORT void __cudaUnregisterFatBinary(void** /*handle*/) {
  // Modules stay registered until the process ends: other threads or atexit handlers may still
  // launch their kernels, and the server releases everything when the connection closes.
}

RGPU_EXPORT void __cudaRegisterFunction(void** handle, const char* hostFun, char* deviceFun,
                                        const char* /*deviceName*/, int, uint3*, uint3*, dim3*,
                                        dim3*, int*) {
  auto* m = handle ? static_cast<client::Module*>(*handle) : nullptr;
  if (m && hostFun && deviceFun) cudart::Registration::get().add_function(m, hostFun, deviceFun);
}

RGPU_EXPORT void __cudaRegisterVar(void** handle, char* hostVar, char* deviceAddress,
                                   const char* /*deviceName*/, int /*ext*/, size_t size,
                                   int /*constant*/, int /*global*/) {
  auto* m = handle ? static_cast<client::Module*>(*handle) : nullptr;
  if (m && hostVar && deviceAddress)
    cudart::Registration::get().add_variable(m, hostVar, deviceAddress, size);
}

// __managed__ variables: each is a module global whose host shadow (client/managed.cc) is made
// when the module's first host access calls __cudaInitModule, which stores it in the pointer nvcc
// reads (`*hostVarPtrAddress`).
namespace {

struct ManagedVars {
  std::mutex mu;
  std::map<client::Module*, std::vector<void**>> by_module;  // the shadow pointers to fill
};

ManagedVars& managed_vars() {
  static ManagedVars* v = new ManagedVars;  // accessed from static constructors and at exit
  return *v;
}

}  // namespace

RGPU_EXPORT void __cudaRegisterManagedVar(void** handle, void** hostVarPtrAddress,
                                          char* deviceAddress, const char* /*deviceName*/,
                                          int /*ext*/, size_t size, int /*constant*/,
                                          int /*global*/) {
  auto* m = handle ? static_cast<client::Module*>(*handle) : nullptr;
  if (!m || !hostVarPtrAddress || !deviceAddress) return;
  cudart::Registration::get().add_variable(m, hostVarPtrAddress, deviceAddress, size);
  ManagedVars& mv = managed_vars();
  std::lock_guard<std::mutex> lock(mv.mu);
  mv.by_module[m].push_back(hostVarPtrAddress);
}

RGPU_EXPORT char __cudaInitModule(void** handle) {
  auto* m = handle ? static_cast<client::Module*>(*handle) : nullptr;
  if (!m) {
    LOG_ERROR(
        "__cudaInitModule: the module was not registered; its __managed__ variables "
        "cannot be used");
    return 0;
  }
  std::vector<void**> shadows;
  {
    ManagedVars& mv = managed_vars();
    std::lock_guard<std::mutex> lock(mv.mu);
    shadows = mv.by_module[m];
  }
  for (void** shadow : shadows) {
    client::Variable* v = cudart::Registration::get().variable(shadow);
    void* host = nullptr;
    if (CudaError e = core().managed_variable(v, &host); e != err::Success) {
      LOG_ERROR("__managed__ variable %s: cannot make its host copy (%s)",
                v ? v->name.c_str() : "?",
                cuda_error_name(e) ? cuda_error_name(e) : "an unknown error");
      ret(e);
      return 0;
    }
    *shadow = host;
  }
  return 1;
}

// ---- launch
// ---------------------------------------------------------------------------------------

RGPU_EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                                 struct CUstream_st* stream) {
  config_stack().push_back(CallConfig{gridDim, blockDim, sharedMem, stream});
  return 0;
}

RGPU_EXPORT cudaError_t __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem,
                                                   void* stream) {
  auto& stack = config_stack();
  if (stack.empty()) return ret(kInvalidConfiguration);
  CallConfig c = stack.back();
  stack.pop_back();
  *gridDim = c.grid;
  *blockDim = c.block;
  *sharedMem = c.shared_mem;
  *static_cast<cudaStream_t*>(stream) = c.stream;
  return cudaSuccess;
}

RGPU_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* hostFun) {
  client::Function* f = function_of(hostFun);
  if (!kernel || !f) return ret(kInvalidResourceHandle);
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(hostFun));
  return cudaSuccess;
}

RGPU_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                                           size_t sharedMem, cudaStream_t stream) {
  return launch(reinterpret_cast<const void*>(kernel), grid, block, args, sharedMem, stream, false);
}

RGPU_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block,
                                                void** args, size_t sharedMem,
                                                cudaStream_t stream) {
  return launch(reinterpret_cast<const void*>(kernel), grid, block, args, sharedMem, stream, true);
}

extern "C" {

cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args,
                             size_t sharedMem, cudaStream_t stream) {
  return launch(func, gridDim, blockDim, args, sharedMem, stream, false);
}

// ---- function attributes
// --------------------------------------------------------------------------

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  if (!attr) return ret(err::InvalidValue);
  std::vector<int32_t> v;
  if (CudaError e = core().func_attributes(function_of(func), v); e != err::Success) return ret(e);
  v.resize(16, 0);
  *attr = cudaFuncAttributes{};
  attr->maxThreadsPerBlock = v[0];
  attr->sharedSizeBytes = static_cast<size_t>(v[1]);
  attr->constSizeBytes = static_cast<size_t>(v[2]);
  attr->localSizeBytes = static_cast<size_t>(v[3]);
  attr->numRegs = v[4];
  attr->ptxVersion = v[5];
  attr->binaryVersion = v[6];
  attr->cacheModeCA = v[7];
  attr->maxDynamicSharedSizeBytes = v[8];
  attr->preferredShmemCarveout = v[9];
  attr->clusterDimMustBeSet = v[10];
  attr->requiredClusterWidth = v[11];
  attr->requiredClusterHeight = v[12];
  attr->requiredClusterDepth = v[13];
  attr->nonPortableClusterSizeAllowed = v[14];
  attr->clusterSchedulingPolicyPreference = v[15];
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  return ret(core().func_set_attribute(function_of(func), static_cast<int>(attr), value));
}

cudaError_t cudaFuncSetCacheConfig(const void* func, cudaFuncCache cacheConfig) {
  return ret(core().func_set_cache_config(function_of(func), static_cast<int>(cacheConfig)));
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* numBlocks, const void* func,
                                                                   int blockSize,
                                                                   size_t dynamicSMemSize,
                                                                   unsigned int flags) {
  if (!numBlocks) return ret(err::InvalidValue);
  return ret(core().occupancy(function_of(func), blockSize, dynamicSMemSize, flags, numBlocks));
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, const void* func,
                                                          int blockSize, size_t dynamicSMemSize) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize,
                                                                dynamicSMemSize, 0);
}

// ---- symbols
// --------------------------------------------------------------------------------------

cudaError_t cudaGetSymbolAddress(void** devPtr, const void* symbol) {
  if (!devPtr) return ret(err::InvalidValue);
  client::Variable* v = variable_of(symbol);
  if (!v) return ret(kInvalidSymbol);
  uint64_t addr = 0;
  if (CudaError e = core().symbol_address(v, &addr); e != err::Success) return ret(e);
  *devPtr = reinterpret_cast<void*>(addr);
  return cudaSuccess;
}

cudaError_t cudaGetSymbolSize(size_t* size, const void* symbol) {
  if (!size) return ret(err::InvalidValue);
  client::Variable* v = variable_of(symbol);
  if (!v) return ret(kInvalidSymbol);
  *size = v->size;
  return cudaSuccess;
}

cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset,
                               cudaMemcpyKind kind) {
  return to_symbol(symbol, src, count, offset, kind);
}

cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset,
                                 cudaMemcpyKind kind) {
  return from_symbol(dst, symbol, count, offset, kind);
}

cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count,
                                    size_t offset, cudaMemcpyKind kind, cudaStream_t stream) {
  return to_symbol(symbol, src, count, offset, kind, stream, true);
}

cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count, size_t offset,
                                      cudaMemcpyKind kind, cudaStream_t stream) {
  return from_symbol(dst, symbol, count, offset, kind, stream, true);
}

}  // extern "C"

// Per-thread-default-stream variants.
RGPU_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 gridDim, dim3 blockDim,
                                              void** args, size_t sharedMem, cudaStream_t stream) {
  return launch(func, gridDim, blockDim, args, sharedMem, stream, true);
}
RGPU_EXPORT cudaError_t cudaMemcpyToSymbol_ptds(const void* symbol, const void* src, size_t count,
                                                size_t offset, cudaMemcpyKind kind) {
  return to_symbol(symbol, src, count, offset, kind, nullptr, false, true);
}
RGPU_EXPORT cudaError_t cudaMemcpyFromSymbol_ptds(void* dst, const void* symbol, size_t count,
                                                  size_t offset, cudaMemcpyKind kind) {
  return from_symbol(dst, symbol, count, offset, kind, nullptr, false, true);
}
RGPU_EXPORT cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void* symbol, const void* src,
                                                     size_t count, size_t offset,
                                                     cudaMemcpyKind kind, cudaStream_t stream) {
  return to_symbol(symbol, src, count, offset, kind, stream, true, true);
}
RGPU_EXPORT cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void* dst, const void* symbol, size_t count,
                                                       size_t offset, cudaMemcpyKind kind,
                                                       cudaStream_t stream) {
  return from_symbol(dst, symbol, count, offset, kind, stream, true, true);
}
