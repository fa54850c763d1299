#include "server/buffer_pool.h"

#include <algorithm>
#include <cstdlib>

namespace rgpu::server {

BufferPool::BufferPool(backend::Executor& exec, size_t buffer_bytes, size_t limit,
                       size_t spill_limit)
    : exec_(exec), bytes_(buffer_bytes), limit_(limit), spill_limit_(spill_limit) {}

BufferPool::~BufferPool() {
  for (char* p : pinned_) exec_.free_staging(p);
}

char* BufferPool::take_free_locked() {
  if (free_.empty()) return nullptr;
  char* p = free_.back();
  free_.pop_back();
  ++out_;
  high_water_ = std::max(high_water_, out_);
  return p;
}

char* BufferPool::acquire_wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !free_.empty() || pinned_.size() + growing_ < limit_; });
  if (char* p = take_free_locked()) return p;
  ++growing_;
  lock.unlock();
  auto* p = static_cast<char*>(exec_.alloc_staging(bytes_));  // outside the lock
  lock.lock();
  --growing_;
  if (!p) {
    cv_.notify_all();
    return nullptr;
  }
  pinned_.insert(p);
  ++out_;
  high_water_ = std::max(high_water_, out_);
  return p;
}

char* BufferPool::acquire_reader(std::chrono::milliseconds patience) {
  std::unique_lock<std::mutex> lock(mu_);
  if (char* p = take_free_locked()) return p;
  ++missed_;
  if (!cv_.wait_for(lock, patience, [&] { return !free_.empty() || spilled_ < spill_limit_; }))
    return nullptr;
  if (char* p = take_free_locked()) return p;
  ++spilled_;
  ++out_;
  high_water_ = std::max(high_water_, out_);
  lock.unlock();
  auto* p = static_cast<char*>(malloc(bytes_));
  if (!p) {
    lock.lock();
    --spilled_;
    --out_;
    cv_.notify_all();
  }
  return p;
}

void BufferPool::release(char* p) {
  bool ordinary;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ordinary = !pinned_.count(p);
    --out_;
    if (ordinary)
      --spilled_;
    else
      free_.push_back(p);
    cv_.notify_all();
  }
  if (ordinary) free(p);
}

void BufferPool::top_up(size_t at_least) {
  size_t want;
  {
    std::lock_guard<std::mutex> lock(mu_);
    want = std::max(missed_, at_least > free_.size() ? at_least - free_.size() : 0);
    missed_ = 0;
    size_t room = limit_ > pinned_.size() + growing_ ? limit_ - pinned_.size() - growing_ : 0;
    want = std::min(want, room);
    growing_ += want;
  }
  std::vector<char*> got;
  for (size_t i = 0; i < want; ++i) {
    auto* p = static_cast<char*>(exec_.alloc_staging(bytes_));  // outside the lock
    if (!p) break;
    got.push_back(p);
  }
  std::lock_guard<std::mutex> lock(mu_);
  growing_ -= want;
  for (char* p : got) {
    pinned_.insert(p);
    free_.push_back(p);
  }
  if (!got.empty()) cv_.notify_all();
}

BufferPool::Stats BufferPool::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  return Stats{pinned_.size(), out_, spilled_, high_water_};
}

}  // namespace rgpu::server
