// Runtime entry points of the misc2 group (issue 11 leftovers): library managed variables and
// unified functions (__managed__ variables of nvcc's registration: kernels.cc; the host shadows:
// client/managed.cc).
#include "common/log.h"
#include "frontend/cudart/api.h"

using rgpu::cudart::core;
using rgpu::cudart::ret;
namespace err = rgpu::err;
namespace errc = rgpu::client::errc;
using rgpu::CudaError;

namespace {

rgpu::client::Module* library_of(cudaLibrary_t lib) {
  auto* m = reinterpret_cast<rgpu::client::Module*>(lib);
  return m && core().modules().valid(m) ? m : nullptr;
}

}  // namespace

extern "C" {

// A library global used as managed memory: its host shadow, kept coherent with the device's copy
// at launches and synchronizations like a __managed__ variable's.
cudaError_t cudaLibraryGetManaged(void** dptr, size_t* bytes, cudaLibrary_t library,
                                  const char* name) {
  if (!name || (!dptr && !bytes)) return ret(err::InvalidValue);
  rgpu::client::Module* m = library_of(library);
  if (!m) return ret(errc::InvalidResourceHandle);
  rgpu::client::Variable* v = core().modules().variable(m, name);
  if (!v) return ret(errc::InvalidResourceHandle);
  uint64_t addr = 0, size = 0;
  if (CudaError e = core().global_info(v, &addr, &size); e != err::Success)
    return ret(e == errc::InvalidSymbol ? errc::NotFound : e);
  void* host = nullptr;
  if (dptr) {
    if (CudaError e = core().managed_variable(v, &host); e != err::Success) return ret(e);
    *dptr = host;
  }
  if (bytes) *bytes = static_cast<size_t>(size);
  return cudaSuccess;
}

// A unified function is a device function callable from the host through one pointer, listed in
// the module's unified table.  rgpu registers no unified tables (__cudaRegisterUnifiedTable stays a
// stub: such a pointer could only be called on the GPU's own host), so no name is a unified
// function here: CUDA's answer for that is cudaErrorSymbolNotFound.
cudaError_t cudaLibraryGetUnifiedFunction(void** fptr, cudaLibrary_t library, const char* symbol) {
  if (!fptr || !symbol) return ret(err::InvalidValue);
  if (!library_of(library)) return ret(errc::InvalidResourceHandle);
  LOG_WARN(
      "cudaLibraryGetUnifiedFunction(%s): rgpu has no unified functions (their pointers are only "
      "callable on the GPU's own host)",
      symbol);
  return ret(errc::NotFound);
}

// NVIDIA's libcudart.so.13 answers 0 to every call of this undocumented entry point (its whole
// body is `return 0`, whatever the arguments); no tool of CUDA 13 emits a call to it.
__attribute__((visibility("default"))) void* __cudaGetProcAddress() { return nullptr; }

// ---- pools shared between processes (client/misc2.cc)

static_assert(sizeof(cudaMemPoolPtrExportData) == rgpu::client::Client::kIpcHandleBytes);

cudaError_t cudaMemPoolExportToShareableHandle(void* shareableHandle, cudaMemPool_t memPool,
                                               enum cudaMemAllocationHandleType handleType,
                                               unsigned int flags) {
  if (!shareableHandle || !memPool || flags) return ret(err::InvalidValue);
  int fd = -1;
  CudaError e = core().mem_pool_export_fd(reinterpret_cast<rgpu::client::Client::MemPool*>(memPool),
                                          static_cast<unsigned>(handleType), &fd);
  if (e == err::Success) *static_cast<int*>(shareableHandle) = fd;  // (int), as CUDA's
  return ret(e);
}

cudaError_t cudaMemPoolImportFromShareableHandle(cudaMemPool_t* memPool, void* shareableHandle,
                                                 enum cudaMemAllocationHandleType handleType,
                                                 unsigned int flags) {
  if (!memPool || flags) return ret(err::InvalidValue);
  // A POSIX file descriptor arrives as the pointer's value, as with CUDA.
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(shareableHandle));
  rgpu::client::Client::MemPool* p = nullptr;
  CudaError e = core().mem_pool_import_fd(fd, static_cast<unsigned>(handleType), &p);
  if (e == err::Success) *memPool = reinterpret_cast<cudaMemPool_t>(p);
  return ret(e);
}

cudaError_t cudaMemPoolExportPointer(struct cudaMemPoolPtrExportData* exportData, void* ptr) {
  if (!exportData) return ret(err::InvalidValue);
  return ret(core().mem_pool_export_pointer(ptr, exportData->reserved));
}

cudaError_t cudaMemPoolImportPointer(void** ptr, cudaMemPool_t memPool,
                                     struct cudaMemPoolPtrExportData* exportData) {
  if (!ptr || !memPool || !exportData) return ret(err::InvalidValue);
  return ret(core().mem_pool_import_pointer(
      reinterpret_cast<rgpu::client::Client::MemPool*>(memPool), exportData->reserved, ptr));
}

}  // extern "C"
