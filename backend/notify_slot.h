// Where a backend keeps one GPU's asynchronous notification target (Executor::set_async_notify):
// fire() calls it under a mutex, so set() returns only once no call of the old target is running
// and none can start.  The target must not block (the session's queues it with
// Outbox::Block::Never), so holding the mutex across it is safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <utility>

#include "backend/executor.h"

namespace rgpu::backend {

class NotifySlot {
 public:
  void set(Executor::Notify fn) {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = std::move(fn);
  }
  bool armed() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<bool>(fn_);
  }
  void fire(uint32_t type, uint64_t value) {
    std::lock_guard<std::mutex> lock(mu_);
    if (fn_) fn_(type, value);
  }

 private:
  std::mutex mu_;
  Executor::Notify fn_;
};

}  // namespace rgpu::backend
