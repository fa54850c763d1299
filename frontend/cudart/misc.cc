// Runtime entry points of the misc group (issue 11 leftovers): peer access undone, GPUDirect RDMA
// flushes, atomic capabilities, CUDA IPC event handles (client/misc.cc) and the logs API
// (client/logs.h).
#include "client/logs.h"
#include "frontend/cudart/api.h"

using rgpu::cudart::core;
using rgpu::cudart::ret;
namespace err = rgpu::err;
using rgpu::CudaError;
using rgpu::client::Logs;

static_assert(sizeof(cudaIpcEventHandle_t) == rgpu::client::Client::kIpcHandleBytes);
static_assert(static_cast<int>(cudaLogLevelError) == Logs::Error);
static_assert(static_cast<int>(cudaLogLevelWarning) == Logs::Warning);

extern "C" {

cudaError_t cudaDeviceDisablePeerAccess(int peerDevice) {
  return ret(core().disable_peer_access(peerDevice));
}

cudaError_t cudaDeviceFlushGPUDirectRDMAWrites(enum cudaFlushGPUDirectRDMAWritesTarget target,
                                               enum cudaFlushGPUDirectRDMAWritesScope scope) {
  return ret(core().flush_rdma_writes(static_cast<uint32_t>(target), static_cast<uint32_t>(scope)));
}

cudaError_t cudaDeviceGetHostAtomicCapabilities(unsigned int* capabilities,
                                                const enum cudaAtomicOperation* operations,
                                                unsigned int count, int device) {
  static_assert(sizeof(enum cudaAtomicOperation) == sizeof(uint32_t));
  return ret(core().atomic_caps(device, -1, reinterpret_cast<const uint32_t*>(operations), count,
                                capabilities));
}

cudaError_t cudaDeviceGetP2PAtomicCapabilities(unsigned int* capabilities,
                                               const enum cudaAtomicOperation* operations,
                                               unsigned int count, int srcDevice, int dstDevice) {
  if (dstDevice < 0) return ret(err::InvalidDevice);
  return ret(core().atomic_caps(srcDevice, dstDevice, reinterpret_cast<const uint32_t*>(operations),
                                count, capabilities));
}

cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t event) {
  if (!handle) return ret(err::InvalidValue);
  return ret(core().ipc_get_event_handle(rgpu::cudart::event_of(event),
                                         reinterpret_cast<uint8_t*>(handle->reserved)));
}

cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* event, cudaIpcEventHandle_t handle) {
  if (!event) return ret(err::InvalidValue);
  rgpu::client::Event* e = nullptr;
  CudaError r = core().ipc_open_event_handle(reinterpret_cast<const uint8_t*>(handle.reserved), &e);
  if (r == err::Success) *event = reinterpret_cast<cudaEvent_t>(e);
  return ret(r);
}

// ---- the logs API
// A cudaLogsCallbackHandle is the client's callback number.

cudaError_t cudaLogsRegisterCallback(cudaLogsCallback_t callbackFunc, void* userData,
                                     cudaLogsCallbackHandle* callback_out) {
  if (!callbackFunc) return ret(err::InvalidValue);
  uint64_t h = Logs::get().add_callback(reinterpret_cast<Logs::Callback>(callbackFunc), userData);
  if (callback_out) *callback_out = reinterpret_cast<cudaLogsCallbackHandle>(h);
  return cudaSuccess;
}

cudaError_t cudaLogsUnregisterCallback(cudaLogsCallbackHandle callback) {
  if (!Logs::get().remove_callback(reinterpret_cast<uint64_t>(callback)))
    return ret(err::InvalidValue);
  return cudaSuccess;
}

cudaError_t cudaLogsCurrent(cudaLogIterator* iterator_out, unsigned int flags) {
  (void)flags;  // reserved; NVIDIA's runtime accepts any value
  if (!iterator_out) return ret(err::InvalidValue);
  *iterator_out = Logs::get().current();
  return cudaSuccess;
}

cudaError_t cudaLogsDumpToFile(cudaLogIterator* iterator, const char* pathToFile,
                               unsigned int flags) {
  if (!pathToFile || flags) return ret(err::InvalidValue);
  static_assert(sizeof(cudaLogIterator) == sizeof(uint32_t));
  return ret(Logs::get().dump_to_file(iterator, pathToFile));
}

cudaError_t cudaLogsDumpToMemory(cudaLogIterator* iterator, char* buffer, size_t* size,
                                 unsigned int flags) {
  if (!buffer || !size || flags) return ret(err::InvalidValue);
  uint32_t it = iterator ? *iterator : 0;
  CudaError r = Logs::get().dump_to_memory(iterator ? &it : nullptr, buffer, size);
  if (r == err::Success && iterator) *iterator = it;
  return ret(r);
}

}  // extern "C"
