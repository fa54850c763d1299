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

// A unified function is a device function callable from the host through one pointer: only a
// device whose unifiedFunctionPointers attribute is set has them, and then the pointer is only
// callable in the GPU's own machine, not in this remote client.
cudaError_t cudaLibraryGetUnifiedFunction(void** fptr, cudaLibrary_t library, const char* symbol) {
  if (!fptr || !symbol) return ret(err::InvalidValue);
  if (!library_of(library)) return ret(errc::InvalidResourceHandle);
  for (int d = 0; d < core().device_count(); ++d) {
    const rgpu::client::DeviceInfo* info = nullptr;
    if (core().device_info(d, &info) != err::Success) continue;
    if (info->attr(129) != 0) {  // CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS
      LOG_ERROR(
          "cudaLibraryGetUnifiedFunction(%s): a unified function pointer is only callable on the "
          "GPU's own host, not through rgpu",
          symbol);
      return ret(err::NotSupported);
    }
  }
  // CUDA's answer when no device has unified function pointers.
  return ret(errc::NotFound);
}

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
