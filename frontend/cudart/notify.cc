// cudaDeviceRegisterAsyncNotification / cudaDeviceUnregisterAsyncNotification: the client core's
// notifications (client/notify.h); the callback and info types are the core's, laid out alike.
#include "client/notify.h"

#include <cstddef>

#include "frontend/cudart/api.h"

using rgpu::client::AsyncCallback;
using rgpu::client::AsyncCallbackEntry;
using rgpu::client::AsyncNotificationInfo;
using rgpu::cudart::core;
using rgpu::cudart::ret;

static_assert(sizeof(cudaAsyncNotificationInfo_t) == sizeof(AsyncNotificationInfo));
static_assert(offsetof(cudaAsyncNotificationInfo_t, info.overBudget.bytesOverBudget) ==
              offsetof(AsyncNotificationInfo, bytes_over_budget));
static_assert(static_cast<int>(cudaAsyncNotificationTypeOverBudget) == 1);

extern "C" {

cudaError_t cudaDeviceRegisterAsyncNotification(int device, cudaAsyncCallback callbackFunc,
                                                void* userData,
                                                cudaAsyncCallbackHandle_t* callback) {
  return ret(core().notifications().add(
      device, reinterpret_cast<AsyncCallback>(reinterpret_cast<void (*)()>(callbackFunc)), userData,
      reinterpret_cast<AsyncCallbackEntry**>(callback)));
}

cudaError_t cudaDeviceUnregisterAsyncNotification(int device, cudaAsyncCallbackHandle_t callback) {
  return ret(
      core().notifications().remove(device, reinterpret_cast<AsyncCallbackEntry*>(callback)));
}

}  // extern "C"
