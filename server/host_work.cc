#include "server/host_work.h"

namespace rgpu::server {

HostWork::~HostWork() {
  stop();
  drain();
}

void HostWork::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_) return;
  running_ = true;
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void HostWork::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_) return;
    stopping_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  running_ = false;
}

void HostWork::drain() {
  for (;;) {
    Task* t;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (tasks_.empty()) return;
      t = tasks_.front();
      tasks_.pop_front();
    }
    t->fn();
    delete t;
    done_.fetch_add(1, std::memory_order_release);
  }
}

size_t HostWork::backlog() {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.size();
}

backend::Status HostWork::on_stream(backend::Executor& exec, int dev, uint64_t stream,
                                    std::function<void()> fn) {
  auto* t = new Task{this, std::move(fn)};
  backend::Status s = exec.host_func(dev, stream, &HostWork::host_function, t);
  if (!s.ok()) {
    exec.stream_synchronize(dev, stream);
    t->fn();
    delete t;
  }
  return s;
}

void HostWork::host_function(void* arg) {
  auto* t = static_cast<Task*>(arg);
  t->self->post(t);
}

void HostWork::post(Task* t) {
  std::lock_guard<std::mutex> lock(mu_);
  tasks_.push_back(t);
  posted_.fetch_add(1, std::memory_order_release);
  cv_.notify_one();
}

void HostWork::flush() {
  const uint64_t target = posted_.load(std::memory_order_acquire);
  if (done_.load(std::memory_order_acquire) >= target) return;
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return done_.load() >= target || !running_ || stopping_; });
}

void HostWork::run() {
  for (;;) {
    Task* t;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !tasks_.empty() || stopping_; });
      if (tasks_.empty()) return;
      t = tasks_.front();
      tasks_.pop_front();
    }
    t->fn();
    delete t;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_.fetch_add(1, std::memory_order_release);
    }
    done_cv_.notify_all();
  }
}

}  // namespace rgpu::server
