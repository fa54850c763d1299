// A request's payload as it arrives: the reader appends page-locked chunks while the dispatcher
// already works on the first ones, so receiving chunk i+1 overlaps the copy of chunk i.  Chunks
// nobody took go back to their pool when the last owner lets go.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "server/buffer_pool.h"

namespace rgpu::server {

struct Chunk {
  char* data;
  size_t size;
};

class PayloadStream {
 public:
  PayloadStream(BufferPool& pool, uint64_t total) : pool_(pool), total_(total) {}
  ~PayloadStream() {
    for (Chunk& c : chunks_) pool_.release(c.data);
  }
  uint64_t total() const { return total_; }

  // Reader side.
  void push(Chunk c) {
    std::lock_guard<std::mutex> lock(mu_);
    chunks_.push_back(c);
    cv_.notify_all();
  }
  void abort() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

  // Dispatcher side: the next chunk, in order (the caller then owns it); false when the payload
  // is exhausted or the client went away before sending it all.
  bool next(Chunk& c) {
    std::unique_lock<std::mutex> lock(mu_);
    if (taken_ == total_) return false;
    cv_.wait(lock, [&] { return !chunks_.empty() || aborted_; });
    if (chunks_.empty()) return false;
    c = chunks_.front();
    chunks_.pop_front();
    taken_ += c.size;
    return true;
  }
  void release(Chunk c) { pool_.release(c.data); }
  // Appends every chunk to `out` (a request whose payload is kept whole: a module image, a graph
  // node's bytes), giving the buffers back as it goes.  Returns the bytes appended: fewer than
  // total() when the client went away mid-payload.
  template <class Byte>
  uint64_t gather(std::vector<Byte>& out) {
    uint64_t n = 0;
    for (Chunk c; next(c);) {
      out.insert(out.end(), reinterpret_cast<const Byte*>(c.data),
                 reinterpret_cast<const Byte*>(c.data) + c.size);
      n += c.size;
      release(c);
    }
    return n;
  }

 private:
  BufferPool& pool_;
  const uint64_t total_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Chunk> chunks_;
  uint64_t taken_ = 0;
  bool aborted_ = false;
};

}  // namespace rgpu::server
