#include "backend/host/host_streams.h"

#include <thread>

namespace rgpu::backend {

void Fence::signal() {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  when_ = std::chrono::steady_clock::now();
  cv_.notify_all();
}

void Fence::wait() {
  if (wait_fn_) {
    if (!ready()) wait_fn_();
    signal();
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
}

bool Fence::ready() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_ || !ready_fn_) return done_;
  }
  if (!ready_fn_()) return false;
  signal();
  return true;
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
  auto stream = std::make_unique<HostStream>(blocking);
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_++;
  streams_[id] = std::move(stream);
  return id;
}

bool HostStreams::destroy(uint64_t stream) {
  // Like cudaStreamDestroy: returns at once; queued work still completes, and device-wide
  // synchronizations (and the legacy stream, for a blocking stream) wait for it.  Ended streams
  // whose work is done are stopped here, outside the lock.
  std::vector<std::unique_ptr<HostStream>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(stream);
    if (it == streams_.end()) return false;
    for (auto e = ended_.begin(); e != ended_.end();)
      if ((*e)->tail()->ready()) {
        done.push_back(std::move(*e));
        e = ended_.erase(e);
      } else {
        ++e;
      }
    ended_.push_back(std::move(it->second));
    streams_.erase(it);
  }
  return true;
}

bool HostStreams::exists(uint64_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  return stream == 0 || streams_.count(stream);
}

FencePtr HostStreams::submit(uint64_t stream, std::function<void()> task,
                             std::vector<FencePtr> waits) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stream == 0) {
    for (auto& [id, s] : streams_)
      if (s->blocking()) waits.push_back(s->tail());
    for (auto& s : ended_)
      if (s->blocking()) waits.push_back(s->tail());
    return legacy_->enqueue(std::move(waits), std::move(task));
  }
  auto it = streams_.find(stream);
  if (it == streams_.end()) return nullptr;
  HostStream& s = *it->second;
  if (s.blocking()) waits.push_back(legacy_->tail());
  return s.enqueue(std::move(waits), std::move(task));
}

FencePtr HostStreams::tail(uint64_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stream == 0) return legacy_->tail();
  auto it = streams_.find(stream);
  return it == streams_.end() ? nullptr : it->second->tail();
}

void HostStreams::synchronize() {
  std::vector<FencePtr> tails;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tails.push_back(legacy_->tail());
    for (auto& [id, s] : streams_) tails.push_back(s->tail());
    for (auto& s : ended_) tails.push_back(s->tail());
  }
  for (auto& f : tails) f->wait();
}

bool HostStreams::synchronize_for(std::chrono::milliseconds limit) {
  std::vector<FencePtr> tails;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tails.push_back(legacy_->tail());
    for (auto& [id, s] : streams_) tails.push_back(s->tail());
    for (auto& s : ended_) tails.push_back(s->tail());
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (auto& f : tails)
    while (!f->ready()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  return true;
}

}  // namespace rgpu::backend
