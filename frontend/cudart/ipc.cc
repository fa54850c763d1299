// CUDA IPC between processes whose programs use the same rgpud (client/ipc.cc, server/ipc.cc):
// memory handles.  Event handles are not done yet (unsupported.cc's stubs answer them).
#include "frontend/cudart/api.h"

using rgpu::cudart::core;
using rgpu::cudart::ret;

static_assert(sizeof(cudaIpcMemHandle_t) == rgpu::client::Client::kIpcHandleBytes);

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr) {
  if (!handle) return ret(rgpu::err::InvalidValue);
  return ret(core().ipc_get_mem_handle(devPtr, reinterpret_cast<uint8_t*>(handle->reserved)));
}

cudaError_t cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
  if (flags & ~static_cast<unsigned>(cudaIpcMemLazyEnablePeerAccess))
    return ret(rgpu::err::InvalidValue);
  return ret(core().ipc_open_mem_handle(reinterpret_cast<const uint8_t*>(handle.reserved),
                                        core().current_device(), devPtr));
}

cudaError_t cudaIpcCloseMemHandle(void* devPtr) { return ret(core().ipc_close_mem_handle(devPtr)); }
