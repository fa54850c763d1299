// Page-locked staging buffers of one size, allocated on demand from the backend and reused for the
// life of the session.  `acquire(true)` waits while `limit` buffers are out (the dispatcher, whose
// buffers come back as the writer sends them); `acquire(false)` never waits (the reader, which must
// keep reading so that callback completions are never stuck behind it).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <vector>

#include "backend/executor.h"

namespace rgpu::server {

class BufferPool {
 public:
  BufferPool(backend::Executor& exec, size_t buffer_bytes, size_t limit)
      : exec_(exec), bytes_(buffer_bytes), limit_(limit) {}
  ~BufferPool();
  size_t buffer_bytes() const { return bytes_; }
  // nullptr when the backend cannot allocate.
  char* acquire(bool wait);
  void release(char* p);

 private:
  backend::Executor& exec_;
  const size_t bytes_, limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<char*> free_;
  std::vector<char*> all_;
  size_t out_ = 0;
};

}  // namespace rgpu::server
