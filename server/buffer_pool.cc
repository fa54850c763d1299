#include "server/buffer_pool.h"

namespace rgpu::server {

BufferPool::~BufferPool() {
  for (char* p : all_) exec_.free_staging(p);
}

char* BufferPool::acquire(bool wait) {
  std::unique_lock<std::mutex> lock(mu_);
  if (wait) cv_.wait(lock, [&] { return !free_.empty() || out_ < limit_; });
  if (!free_.empty()) {
    char* p = free_.back();
    free_.pop_back();
    ++out_;
    return p;
  }
  auto* p = static_cast<char*>(exec_.alloc_staging(bytes_));
  if (!p) return nullptr;
  all_.push_back(p);
  ++out_;
  return p;
}

void BufferPool::release(char* p) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(p);
  --out_;
  cv_.notify_one();
}

}  // namespace rgpu::server
