#include "backend/cuda/cuda_notify.h"

#include <dlfcn.h>

#include <string>

namespace rgpu::backend {
namespace {

using RegisterFn = CUresult (*)(CUdevice, CUasyncCallback, void*, CUasyncCallbackHandle*);
using UnregisterFn = CUresult (*)(CUdevice, CUasyncCallbackHandle);

void* driver_symbol(const CudaDriver& drv, const char* name) {
  return drv.handle ? dlsym(drv.handle, name) : nullptr;
}

}  // namespace

void CudaNotify::on_driver(CUasyncNotificationInfo* info, void* user, CUasyncCallbackHandle) {
  if (!info || !user) return;
  const uint64_t value = info->type == CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET
                             ? info->info.overBudget.bytesOverBudget
                             : 0;
  static_cast<Entry*>(user)->slot.fire(static_cast<uint32_t>(info->type), value);
}

Status CudaNotify::set(const CudaDriver& drv, CUdevice dev, int index, Executor::Notify fn) {
  std::lock_guard<std::mutex> lock(mu_);
  drv_ = &drv;
  auto& e = entries_[index];
  if (!e) e = std::make_unique<Entry>();
  e->dev = dev;
  if (fn) {
    e->slot.set(std::move(fn));
    if (e->handle) return Status::success();
    auto reg =
        reinterpret_cast<RegisterFn>(driver_symbol(drv, "cuDeviceRegisterAsyncNotification"));
    if (!reg) {
      e->slot.set({});
      return Status::fail(err::NotSupported,
                          "the server's NVIDIA driver lacks cuDeviceRegisterAsyncNotification");
    }
    CUresult r = reg(dev, &CudaNotify::on_driver, e.get(), &e->handle);
    if (r != CUDA_SUCCESS) {
      e->handle = nullptr;
      e->slot.set({});
      return Status::fail(static_cast<CudaError>(r),
                          "cuDeviceRegisterAsyncNotification: " + drv.describe(r));
    }
    return Status::success();
  }
  Status s = Status::success();
  if (e->handle) {
    auto unreg =
        reinterpret_cast<UnregisterFn>(driver_symbol(drv, "cuDeviceUnregisterAsyncNotification"));
    CUresult r = unreg ? unreg(dev, e->handle) : CUDA_ERROR_NOT_SUPPORTED;
    if (r != CUDA_SUCCESS)
      s = Status::fail(static_cast<CudaError>(r),
                       "cuDeviceUnregisterAsyncNotification: " + drv.describe(r));
    e->handle = nullptr;
  }
  e->slot.set({});  // a late call from the driver finds no target
  return s;
}

CudaNotify::~CudaNotify() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!drv_) return;
  auto unreg =
      reinterpret_cast<UnregisterFn>(driver_symbol(*drv_, "cuDeviceUnregisterAsyncNotification"));
  for (auto& [index, e] : entries_) {
    if (e->handle && unreg) unreg(e->dev, e->handle);
    e->slot.set({});
  }
}

}  // namespace rgpu::backend
