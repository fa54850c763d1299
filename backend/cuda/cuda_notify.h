// The cuda backend's asynchronous notifications: the driver's cuDeviceRegisterAsyncNotification,
// looked up in libcuda.so.1 when first asked (an older driver loses only this), registered for a
// GPU while the session has a target for it.
#pragma once

#include <cuda.h>

#include <map>
#include <memory>
#include <mutex>

#include "backend/cuda/cuda_driver.h"
#include "backend/executor.h"
#include "backend/notify_slot.h"

namespace rgpu::backend {

class CudaNotify {
 public:
  ~CudaNotify();
  // Registers the driver's callback for `dev` (index `index`) when `fn` is set and none is, or
  // unregisters it when `fn` is empty.
  Status set(const CudaDriver& drv, CUdevice dev, int index, Executor::Notify fn);

 private:
  struct Entry {
    NotifySlot slot;
    CUdevice dev = 0;
    CUasyncCallbackHandle handle = nullptr;  // registered with the driver while set
  };
  static void on_driver(CUasyncNotificationInfo* info, void* user, CUasyncCallbackHandle);
  std::mutex mu_;
  const CudaDriver* drv_ = nullptr;
  // Entries live as long as the executor: the driver's callback may name one after unregistering.
  std::map<int, std::unique_ptr<Entry>> entries_;
};

}  // namespace rgpu::backend
