// Waits of a session, off its dispatcher.  The dispatcher enqueues work in arrival order (that
// order is what gives CUDA's cross-stream rules); a request that must wait for the GPU (a stream,
// event or device synchronization, a synchronous copy) enqueues what it needs without waiting and
// posts the wait and its reply here.  Waits run on a small pool of threads, created on demand up
// to a cap (a client has one synchronous call in flight per thread, so few are ever needed);
// beyond it waits queue in order.  A waiter holds no session lock while it waits.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rgpu::server {

class Waiter {
 public:
  explicit Waiter(size_t max_threads = 16);
  ~Waiter();
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  // Runs `task` on a waiter thread.  Never waits (the dispatcher calls it).  After stop(), runs
  // `task` on the calling thread.
  void post(std::function<void()> task);
  // Waits posted and not finished (the session counts them as busy: heartbeats go out).
  size_t pending() const { return pending_.load(std::memory_order_acquire); }
  // Returns once every wait posted before the call has finished.
  void wait_idle();
  // Runs what is queued, then ends the threads.  Idempotent.
  void stop();

 private:
  void run();
  const size_t max_threads_;
  std::mutex mu_;
  std::condition_variable cv_;       // waiter threads: a task or stop
  std::condition_variable idle_cv_;  // wait_idle()
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  size_t free_threads_ = 0;  // threads waiting for a task
  bool stopping_ = false;
  std::atomic<size_t> pending_{0};
};

}  // namespace rgpu::server
