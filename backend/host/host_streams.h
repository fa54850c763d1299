// Streams for the host backend (a test double), with CUDA's ordering rules, so that rgpu's stream
// handling is tested for real on machines without a GPU: each stream is a worker thread running its
// work in order; work on the legacy default stream waits for every blocking stream and blocking
// streams wait for it; non-blocking streams are independent; events are fences with timestamps.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace rgpu::backend {

class Fence {
 public:
  Fence() = default;
  // A fence whose state lies elsewhere (another process's shared event, host_misc.h): ready once
  // `ready_fn` answers true; `wait_fn` blocks until then.
  Fence(std::function<bool()> ready_fn, std::function<void()> wait_fn)
      : ready_fn_(std::move(ready_fn)), wait_fn_(std::move(wait_fn)) {}
  void signal();
  void wait();
  bool ready();
  std::chrono::steady_clock::time_point when();  // when it was signalled

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::chrono::steady_clock::time_point when_;
  std::function<bool()> ready_fn_;
  std::function<void()> wait_fn_;
};
using FencePtr = std::shared_ptr<Fence>;

class HostStream {
 public:
  explicit HostStream(bool blocking);
  ~HostStream();  // finishes queued work, then stops
  bool blocking() const { return blocking_; }
  // Runs `task` after `waits` and everything queued before it; returns the fence it signals.
  FencePtr enqueue(std::vector<FencePtr> waits, std::function<void()> task);
  FencePtr tail();

 private:
  struct Task {
    std::vector<FencePtr> waits;
    std::function<void()> fn;
    FencePtr fence;
  };
  void run();
  const bool blocking_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  FencePtr tail_;
  bool stop_ = false;
  std::thread worker_;
};

// The streams of one emulated GPU.  Handle 0 is its legacy default stream.  Safe for calls from
// several threads (a session's dispatcher enqueues while its waiters synchronize); nothing waits
// while holding the lock.
class HostStreams {
 public:
  HostStreams();
  uint64_t create(bool blocking);
  bool destroy(uint64_t stream);
  bool exists(uint64_t stream);
  // Queues `task` on `stream` with the legacy stream's implicit synchronization; null when the
  // stream does not exist.
  FencePtr submit(uint64_t stream, std::function<void()> task, std::vector<FencePtr> waits = {});
  // The fence of the stream's latest work; null for a stream that does not exist.
  FencePtr tail(uint64_t stream);
  // Waits until every stream is idle (the work queued when it is called).
  void synchronize();
  // The same, for at most `limit`: false when some stream still had work then.
  bool synchronize_for(std::chrono::milliseconds limit);

 private:
  std::mutex mu_;  // the map; never held while waiting for a fence
  std::unique_ptr<HostStream> legacy_;
  std::map<uint64_t, std::unique_ptr<HostStream>> streams_;
  std::vector<std::unique_ptr<HostStream>> ended_;  // destroyed, their work maybe still running
  uint64_t next_ = 1;
};

}  // namespace rgpu::backend
