// Messages of the async notification group (cudaDeviceRegisterAsyncNotification and the driver's
// cuDeviceRegisterAsyncNotification).  Included from proto/messages.h; ids 0x1500-0x15FF
// (proto/catalogue.def).
#pragma once

#include <cstdint>

#include "proto/wire.h"

namespace rgpu::proto {

// ---- notify
// The client has (enable 1) or no longer has (enable 0) a callback for GPU `device`'s
// notifications: the server registers its driver's callback for that GPU, or unregisters it (no
// AsyncNotify for the GPU is queued after the reply).
struct AsyncNotifyEnableReq {
  uint32_t device = 0;
  uint32_t enable = 0;
  RGPU_FIELDS(device, enable)
};
using AsyncNotifyEnableRep = Empty;
// Pushed: a notification of GPU `device` (type: CUasyncNotificationType; value: for OVER_BUDGET,
// the bytes over budget).
struct AsyncNotifyMsg {
  uint32_t device = 0;
  uint32_t type = 0;
  uint64_t value = 0;
  RGPU_FIELDS(device, type, value)
};

}  // namespace rgpu::proto
