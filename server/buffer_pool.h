// Staging buffers of one size for a session's bulk copies, page-locked where it counts.
//
// Locks and CUDA: the pool's lock is never held across a backend call.  Page-locked memory is
// allocated (cuMemHostAlloc) outside it, and only by threads that no host function waits for (the
// dispatcher); buffers come back from any thread (the writer, the completion thread) through
// release(), a short critical section.  See "Locks and CUDA" in docs/architecture.md.
//
// Two kinds of user:
//   acquire_wait()   the dispatcher's device-to-host pool: waits while `limit` buffers are out
//                    (they come back as the writer sends them); grows page-locked memory itself.
//   acquire_reader() the reader's payload pool: never calls the backend (the reader must keep
//                    reading: a CallbackDone a stream waits for may be behind this payload).  A
//                    free page-locked buffer if there is one, else ordinary memory, up to
//                    `spill_limit` buffers; past that it waits (bounded) for buffers to come back.
//                    The dispatcher adds page-locked buffers for what the reader missed (top_up()),
//                    up to `limit` of them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "backend/executor.h"

namespace rgpu::server {

class BufferPool {
 public:
  BufferPool(backend::Executor& exec, size_t buffer_bytes, size_t limit, size_t spill_limit = 0);
  ~BufferPool();
  size_t buffer_bytes() const { return bytes_; }

  // nullptr when the backend cannot allocate.
  char* acquire_wait();
  // nullptr when `spill_limit` buffers stay out for longer than `patience`.
  char* acquire_reader(std::chrono::milliseconds patience);
  // Any thread; never calls the backend.
  void release(char* p);
  // Dispatcher: allocates page-locked buffers for the reader's misses (at least `at_least` free
  // ones in all), within the limit.  Calls the backend without holding the lock.
  void top_up(size_t at_least = 0);

  struct Stats {
    size_t page_locked = 0;  // buffers of page-locked memory the pool holds
    size_t out = 0;          // buffers handed out now (both kinds)
    size_t spilled = 0;      // ordinary-memory buffers out now
    size_t high_water = 0;   // most buffers out at once
  };
  Stats stats();

 private:
  char* take_free_locked();

  backend::Executor& exec_;
  const size_t bytes_, limit_, spill_limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<char*> free_;           // page-locked, ready
  std::unordered_set<char*> pinned_;  // every page-locked buffer of the pool
  size_t out_ = 0, spilled_ = 0, high_water_ = 0;
  size_t growing_ = 0;  // page-locked buffers being allocated (counted against the limit)
  size_t missed_ = 0;   // reader acquisitions that found no free page-locked buffer
};

}  // namespace rgpu::server
