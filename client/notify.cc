#include "client/notify.h"

#include <vector>

#include "client/client.h"
#include "common/log.h"
#include "proto/messages.h"

namespace rgpu::client {

using namespace rgpu::proto;

CudaError Notifications::add(int dev, AsyncCallback fn, void* data, AsyncCallbackEntry** handle) {
  if (!fn || !handle) return err::InvalidValue;
  if (client_.check_device(dev) != err::Success) return err::InvalidDevice;
  if (std::this_thread::get_id() == thread_.load()) return err::NotPermitted;
  std::lock_guard<std::mutex> reg(reg_mu_);
  bool first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    first = per_device_[dev] == 0;
  }
  if (first) {
    CudaError e;
    ServerLink* l = client_.link(dev, &e);
    if (!l) return e;
    const uint32_t gpu = client_.server_gpu(dev);
    {
      std::lock_guard<std::mutex> lock(mu_);
      devices_[{l, gpu}] = dev;
      if (!started_) {
        started_ = true;
        std::thread t([this] { deliver(); });
        thread_.store(t.get_id());
        t.detach();  // lives as long as the process, as the Client
      }
    }
    l->set_notify_sink([this](const ServerLink* link, uint32_t g, uint32_t type, uint64_t value) {
      post(link, g, type, value);
    });
    if (e = client_.forward<AsyncNotifyEnableMsg>(dev, {0, 1}); e != err::Success) return e;
  }
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t h = next_++;
  targets_[h] = Target{dev, fn, data};
  ++per_device_[dev];
  *handle = reinterpret_cast<AsyncCallbackEntry*>(static_cast<uintptr_t>(h));
  return err::Success;
}

CudaError Notifications::remove(int dev, AsyncCallbackEntry* handle) {
  if (client_.check_device(dev) != err::Success) return err::InvalidDevice;
  if (!handle) return err::InvalidValue;
  if (std::this_thread::get_id() == thread_.load()) return err::NotPermitted;
  const uint64_t h = reinterpret_cast<uintptr_t>(handle);
  std::lock_guard<std::mutex> reg(reg_mu_);
  bool last;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = targets_.find(h);
    if (it == targets_.end() || it->second.dev != dev) return err::InvalidValue;
    targets_.erase(it);
    // A callback of this handle that already started finishes before we return.
    done_cv_.wait(lock, [&] { return running_ != h; });
    last = --per_device_[dev] == 0;
  }
  if (!last) return err::Success;
  return client_.forward<AsyncNotifyEnableMsg>(dev, {0, 0});
}

void Notifications::post(const ServerLink* link, uint32_t gpu, uint32_t type, uint64_t value) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find({link, gpu});
  if (it == devices_.end()) return;
  Pending p{it->second, {}};
  p.info.type = type;
  p.info.bytes_over_budget = value;
  queue_.push_back(p);
  cv_.notify_one();
}

void Notifications::deliver() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return !queue_.empty(); });
    Pending p = queue_.front();
    queue_.pop_front();
    std::vector<uint64_t> handles;
    for (auto& [h, t] : targets_)
      if (t.dev == p.dev) handles.push_back(h);
    for (uint64_t h : handles) {
      auto it = targets_.find(h);  // unregistered meanwhile: not called
      if (it == targets_.end()) continue;
      Target t = it->second;
      running_ = h;
      lock.unlock();
      AsyncNotificationInfo info = p.info;  // each callback gets its own copy
      t.fn(&info, t.data, reinterpret_cast<AsyncCallbackEntry*>(static_cast<uintptr_t>(h)));
      lock.lock();
      running_ = 0;
      done_cv_.notify_all();
    }
  }
}

}  // namespace rgpu::client
