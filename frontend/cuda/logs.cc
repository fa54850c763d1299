// The driver's logs API: the process's log kept by the client core (client/logs.h), which the
// runtime's cudaLogs* calls read too.
#include "client/logs.h"

#include "frontend/cuda/api.h"

using namespace rgpu;
using rgpu::client::Logs;
using rgpu::cuda_fe::to_driver;

static_assert(static_cast<int>(CU_LOG_LEVEL_ERROR) == Logs::Error);
static_assert(static_cast<int>(CU_LOG_LEVEL_WARNING) == Logs::Warning);
static_assert(sizeof(CUlogIterator) == sizeof(uint32_t));

// A CUlogsCallbackHandle is the client's callback number.
RGPU_CU CUresult cuLogsRegisterCallback(CUlogsCallback callbackFunc, void* userData,
                                        CUlogsCallbackHandle* callback_out) {
  RGPU_INIT();
  if (!callbackFunc) return CUDA_ERROR_INVALID_VALUE;
  uint64_t h = Logs::get().add_callback(reinterpret_cast<Logs::Callback>(callbackFunc), userData);
  if (callback_out) *callback_out = reinterpret_cast<CUlogsCallbackHandle>(h);
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuLogsUnregisterCallback(CUlogsCallbackHandle callback) {
  RGPU_INIT();
  if (!Logs::get().remove_callback(reinterpret_cast<uint64_t>(callback)))
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuLogsCurrent(CUlogIterator* iterator_out, unsigned int flags) {
  RGPU_INIT();
  (void)flags;  // reserved; NVIDIA's driver accepts any value (seen on an H100, driver 580)
  if (!iterator_out) return CUDA_ERROR_INVALID_VALUE;
  *iterator_out = Logs::get().current();
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuLogsDumpToFile(CUlogIterator* iterator, const char* pathToFile,
                                  unsigned int flags) {
  RGPU_INIT();
  if (!pathToFile || flags) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(Logs::get().dump_to_file(iterator, pathToFile));
}

RGPU_CU CUresult cuLogsDumpToMemory(CUlogIterator* iterator, char* buffer, size_t* size,
                                    unsigned int flags) {
  RGPU_INIT();
  if (!buffer || !size || flags) return CUDA_ERROR_INVALID_VALUE;
  uint32_t it = iterator ? *iterator : 0;
  CUresult r = to_driver(Logs::get().dump_to_memory(iterator ? &it : nullptr, buffer, size));
  if (r == CUDA_SUCCESS && iterator) *iterator = it;
  return r;
}
