// cuDeviceRegisterAsyncNotification / cuDeviceUnregisterAsyncNotification: the client core's
// notifications (client/notify.h), as the runtime's; the callback and info types are the core's,
// laid out alike.
#include "client/notify.h"

#include <cstddef>

#include "frontend/cuda/api.h"

using namespace rgpu;
using rgpu::client::AsyncCallback;
using rgpu::client::AsyncCallbackEntry;
using rgpu::client::AsyncNotificationInfo;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::to_driver;

static_assert(sizeof(CUasyncNotificationInfo) == sizeof(AsyncNotificationInfo));
static_assert(offsetof(CUasyncNotificationInfo, info.overBudget.bytesOverBudget) ==
              offsetof(AsyncNotificationInfo, bytes_over_budget));
static_assert(static_cast<int>(CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET) == 1);

RGPU_CU CUresult cuDeviceRegisterAsyncNotification(CUdevice device, CUasyncCallback callbackFunc,
                                                   void* userData,
                                                   CUasyncCallbackHandle* callback) {
  RGPU_INIT();
  return to_driver(core().notifications().add(
      device, reinterpret_cast<AsyncCallback>(reinterpret_cast<void (*)()>(callbackFunc)), userData,
      reinterpret_cast<AsyncCallbackEntry**>(callback)));
}

RGPU_CU CUresult cuDeviceUnregisterAsyncNotification(CUdevice device,
                                                     CUasyncCallbackHandle callback) {
  RGPU_INIT();
  return to_driver(
      core().notifications().remove(device, reinterpret_cast<AsyncCallbackEntry*>(callback)));
}
