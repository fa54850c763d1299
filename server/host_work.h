// Work that CUDA host functions hand to rgpud.  A host function runs on a driver thread that may
// hold driver locks (cuLaunchHostFunc), so it only posts here — a short critical section, no CUDA
// call, no wait — and the session's completion thread does the work: returning buffers to pools,
// queueing frames for the client.  See "Locks and CUDA" in docs/architecture.md.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "backend/executor.h"

namespace rgpu::server {

class HostWork {
 public:
  HostWork() = default;
  ~HostWork();
  void start();
  // Runs what was posted until now, then stops the thread; later posts run in drain().
  void stop();
  // Runs everything posted so far on the calling thread (after stop()).
  void drain();

  // Queues fn to run on `stream` of `dev` once the stream's earlier work is done, on the completion
  // thread.  If the backend cannot queue it, the stream is synchronized and fn runs here.
  backend::Status on_stream(backend::Executor& exec, int dev, uint64_t stream,
                            std::function<void()> fn);

  // Waits until every task posted before this call has run (the completion thread is running).
  // A synchronizing reply calls it first: what a stream handed over before it finished (the data
  // of an asynchronous copy) is queued for the client before the reply.
  void flush();

  // Tasks posted and not yet run (for tests and counters).
  size_t backlog();

 private:
  struct Task {
    HostWork* self;
    std::function<void()> fn;
  };
  static void host_function(void* task);  // what the backend calls: post, nothing else
  void post(Task* t);
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task*> tasks_;
  std::condition_variable done_cv_;
  std::atomic<uint64_t> posted_{0}, done_{0};
  bool stopping_ = false;
  bool running_ = false;
  std::thread thread_;
};

}  // namespace rgpu::server
