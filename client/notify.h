// Asynchronous notifications (cudaDeviceRegisterAsyncNotification,
// cuDeviceRegisterAsyncNotification) in API-neutral form.  While a device has a callback, its
// server forwards its driver's notifications for that GPU (AsyncNotify frames,
// proto/messages_notify.h); the link's receiver only queues them, and a thread of this library's
// own runs the callbacks (so a callback may call CUDA).  Unregistering waits for a callback of that
// handle that is running on the delivery thread; none is called after it returns.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "common/cuda_errors.h"

namespace rgpu::client {

class Client;
class ServerLink;

// cudaAsyncNotificationInfo_t / CUasyncNotificationInfo (the front-ends check the layout).
struct AsyncNotificationInfo {
  uint32_t type = 0;  // 1: over budget
  uint64_t bytes_over_budget = 0;
};
struct AsyncCallbackEntry;  // opaque: a handle is its id
using AsyncCallback = void (*)(AsyncNotificationInfo* info, void* data, AsyncCallbackEntry* handle);

class Notifications {
 public:
  explicit Notifications(Client& c) : client_(c) {}
  // NotPermitted on the delivery thread (cuda_runtime_api.h: callbacks may not register).
  CudaError add(int dev, AsyncCallback fn, void* data, AsyncCallbackEntry** handle);
  CudaError remove(int dev, AsyncCallbackEntry* handle);
  // The receiver of `link`: GPU `gpu` of its server notified (never blocks).
  void post(const ServerLink* link, uint32_t gpu, uint32_t type, uint64_t value);

 private:
  struct Target {
    int dev;
    AsyncCallback fn;
    void* data;
  };
  struct Pending {
    int dev;
    AsyncNotificationInfo info;
  };
  void deliver();  // the delivery thread

  Client& client_;
  std::mutex
      reg_mu_;     // registrations one at a time (held across the server call; never by deliver)
  std::mutex mu_;  // everything below
  std::condition_variable cv_, done_cv_;
  std::map<uint64_t, Target> targets_;                             // by handle
  std::map<int, int> per_device_;                                  // registered handles per device
  std::map<std::pair<const ServerLink*, uint32_t>, int> devices_;  // (link, server GPU) -> device
  std::deque<Pending> queue_;
  uint64_t next_ = 1;
  uint64_t running_ = 0;                   // the handle whose callback runs now
  std::atomic<std::thread::id> thread_{};  // the delivery thread, once started
  bool started_ = false;
};

}  // namespace rgpu::client
