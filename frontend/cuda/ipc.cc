// CUDA IPC through the driver API: memory and event handles between processes whose programs use
// the same rgpud (client/ipc.cc, client/misc.cc).
#include "frontend/cuda/api.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::dptr;
using rgpu::cuda_fe::ptr;
using rgpu::cuda_fe::to_driver;

static_assert(sizeof(CUipcMemHandle) == client::Client::kIpcHandleBytes);
static_assert(sizeof(CUipcEventHandle) == client::Client::kIpcHandleBytes);

RGPU_CU CUresult cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dp) {
  RGPU_INIT();
  if (!pHandle) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(
      core().ipc_get_mem_handle(ptr(dp), reinterpret_cast<uint8_t*>(pHandle->reserved)));
}

RGPU_CU CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                       unsigned int Flags) {
  RGPU_INIT();
  int dev = 0;
  if (client::Error e = cuda_fe::current_device(&dev); e != err::Success) return to_driver(e);
  if (!pdptr || (Flags & ~static_cast<unsigned>(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)))
    return CUDA_ERROR_INVALID_VALUE;
  void* p = nullptr;
  CUresult r = to_driver(
      core().ipc_open_mem_handle(reinterpret_cast<const uint8_t*>(handle.reserved), dev, &p));
  if (r == CUDA_SUCCESS) *pdptr = dptr(p);
  return r;
}

#undef cuIpcOpenMemHandle
// The first version differed only in how it treated its flags on NVIDIA's side.
RGPU_CU CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
  return cuIpcOpenMemHandle_v2(pdptr, handle, Flags);
}

RGPU_CU CUresult cuIpcCloseMemHandle(CUdeviceptr dp) {
  RGPU_INIT();
  return to_driver(core().ipc_close_mem_handle(ptr(dp)));
}

RGPU_CU CUresult cuIpcGetEventHandle(CUipcEventHandle* pHandle, CUevent event) {
  RGPU_INIT();
  if (!pHandle) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().ipc_get_event_handle(cuda_fe::event_of(event),
                                               reinterpret_cast<uint8_t*>(pHandle->reserved)));
}

RGPU_CU CUresult cuIpcOpenEventHandle(CUevent* phEvent, CUipcEventHandle handle) {
  RGPU_INIT();
  if (!phEvent) return CUDA_ERROR_INVALID_VALUE;
  client::Event* e = nullptr;
  CUresult r = to_driver(
      core().ipc_open_event_handle(reinterpret_cast<const uint8_t*>(handle.reserved), &e));
  if (r == CUDA_SUCCESS) *phEvent = reinterpret_cast<CUevent>(e);
  return r;
}
