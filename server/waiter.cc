#include "server/waiter.h"

namespace rgpu::server {

Waiter::Waiter(size_t max_threads) : max_threads_(max_threads ? max_threads : 1) {}

Waiter::~Waiter() { stop(); }

void Waiter::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      pending_.fetch_add(1, std::memory_order_acq_rel);
      tasks_.push_back(std::move(task));
      // A thread per outstanding wait up to the cap: a wait must not sit behind another stream's.
      if (free_threads_ < tasks_.size() && threads_.size() < max_threads_)
        threads_.emplace_back([this] { run(); });
      else
        cv_.notify_one();
      return;
    }
  }
  task();  // the session is ending: nobody else will run it
}

void Waiter::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
}

void Waiter::stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
    cv_.notify_all();
  }
  for (auto& t : threads) t.join();
}

void Waiter::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++free_threads_;
      cv_.wait(lock, [&] { return !tasks_.empty() || stopping_; });
      --free_threads_;
      if (tasks_.empty()) return;  // stopping, nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
      idle_cv_.notify_all();
    }
  }
}

}  // namespace rgpu::server
