#include "backend/host/host_streams.h"

namespace rgpu::backend {

void Fence::signal() {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  when_ = std::chrono::steady_clock::now();
  cv_.notify_all();
}

void Fence::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
}

bool Fence::ready() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

std::chrono::steady_clock::time_point Fence::when() {
  std::lock_guard<std::mutex> lock(mu_);
  return when_;
}

namespace {
FencePtr done_fence() {
  auto f = std::make_shared<Fence>();
  f->signal();
  return f;
}
}  // namespace

HostStream::HostStream(bool blocking) : blocking_(blocking), tail_(done_fence()) {
  worker_ = std::thread([this] { run(); });
}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_one();
  }
  worker_.join();
}

FencePtr HostStream::enqueue(std::vector<FencePtr> waits, std::function<void()> task) {
  auto fence = std::make_shared<Fence>();
  std::lock_guard<std::mutex> lock(mu_);
  tasks_.push_back(Task{std::move(waits), std::move(task), fence});
  tail_ = fence;
  cv_.notify_one();
  return fence;
}

FencePtr HostStream::tail() {
  std::lock_guard<std::mutex> lock(mu_);
  return tail_;
}

void HostStream::run() {
  for (;;) {
    Task t;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !tasks_.empty() || stop_; });
      if (tasks_.empty()) return;
      t = std::move(tasks_.front());
      tasks_.pop_front();
    }
    for (auto& w : t.waits) w->wait();
    if (t.fn) t.fn();
    t.fence->signal();
  }
}

HostStreams::HostStreams() : legacy_(std::make_unique<HostStream>(true)) {}

uint64_t HostStreams::create(bool blocking) {
  uint64_t id = next_++;
  streams_[id] = std::make_unique<HostStream>(blocking);
  return id;
}

bool HostStreams::destroy(uint64_t stream) {
  // Like cudaStreamDestroy: queued work still completes (the worker drains before it stops).
  return streams_.erase(stream) > 0;
}

bool HostStreams::exists(uint64_t stream) const { return stream == 0 || streams_.count(stream); }

FencePtr HostStreams::submit(uint64_t stream, std::function<void()> task,
                             std::vector<FencePtr> waits) {
  if (stream == 0) {
    for (auto& [id, s] : streams_)
      if (s->blocking()) waits.push_back(s->tail());
    return legacy_->enqueue(std::move(waits), std::move(task));
  }
  HostStream& s = *streams_.at(stream);
  if (s.blocking()) waits.push_back(legacy_->tail());
  return s.enqueue(std::move(waits), std::move(task));
}

FencePtr HostStreams::tail(uint64_t stream) {
  return stream == 0 ? legacy_->tail() : streams_.at(stream)->tail();
}

void HostStreams::synchronize() {
  legacy_->tail()->wait();
  for (auto& [id, s] : streams_) s->tail()->wait();
}

}  // namespace rgpu::backend
