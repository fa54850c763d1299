// Server-to-server copies, the data path both ends share: rows of device memory moved through
// page-locked staging buffers in chunks, so that the GPU's copy of one chunk overlaps the network
// moving the next (docs/architecture.md, "Server-to-server copies").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "backend/executor.h"

namespace rgpu::server {

// `height` rows of `width` bytes, `pitch` apart, from `base` on GPU `dev`.  Offsets count the
// packed bytes (row r starts at r * width).
struct PeerRows {
  int dev = 0;
  uint64_t base = 0;
  uint64_t pitch = 0;
  uint64_t width = 0;
  uint64_t height = 0;
  uint64_t bytes() const { return width * height; }
};

// The largest chunk: reserving two buffers of it serves every copy.
constexpr uint64_t kPeerMaxChunk = 4u << 20;

// Chunking by copy size: up to 256 KiB in one shot; up to 16 MiB in 1 MiB chunks; larger in
// 4 MiB chunks; two buffers per side (one in the GPU's copy engine, one on the network).  A GPU
// sweep (scripts/gpu-peer-tune.sh, docs/benchmarks.md) found nothing better beyond its noise.
// RGPU_PEER_ONESHOT / RGPU_PEER_CHUNK (bytes, or with a K or M suffix; at most 64 MiB) in rgpud's
// environment replace the one-shot limit and set one chunk size for larger copies (tuning sweeps;
// both servers of a copy must have the same).  A malformed or zero value is ignored.
uint64_t peer_chunk_bytes(uint64_t total);
constexpr uint64_t kPeerTuningMax = 64u << 20;
uint64_t peer_bytes_setting(const char* text, uint64_t fallback);

// Page-locked buffers of a session (Executor::alloc_staging), by size, made on demand and kept
// for reuse (a few per size).  Thread-safe; never holds its lock across a backend call.
class StagingPool {
 public:
  explicit StagingPool(backend::Executor& exec) : exec_(exec) {}
  ~StagingPool();
  // A buffer of at least `bytes` (a kept one of the smallest size that fits, else a new one);
  // `cls`: its size, for put().  Null when page-locked memory cannot be had.
  char* get(uint64_t bytes, uint64_t& cls);
  void put(char* p, uint64_t cls);
  // Makes sure `count` buffers for chunks of `bytes` are kept free, allocating them now: called
  // on the dispatcher before a copy's stream is gated, because allocating page-locked memory
  // may wait for the GPU's work, which would then wait for the copy that waits for the memory.
  void reserve(uint64_t bytes, size_t count);

 private:
  backend::Executor& exec_;
  std::mutex mu_;
  std::map<uint64_t, std::vector<char*>> free_;
};

// A private non-blocking stream per GPU for one peer link's copies, made at its first use there;
// the link's thread owns it and destroys the streams when the link ends.
struct PrivateStreams {
  std::map<int, uint64_t> by_gpu;
  backend::Status get(backend::Executor& exec, int dev, uint64_t& stream);
  void destroy(backend::Executor& exec);
};

// Sends the rows' bytes [0, rows.bytes()) chunk by chunk: each chunk is copied to a staging
// buffer on `stream` (a private one), then handed to `send(offset, data, size)` while the next
// chunk is being copied.  Returns the first device error; exceptions of `send` pass through
// (after the stream has let go of the buffers).
using PeerSend = std::function<void(uint64_t offset, const char* data, uint64_t size)>;
backend::Status peer_send_rows(backend::Executor& exec, StagingPool& pool, const PeerRows& rows,
                               uint64_t stream, const PeerSend& send);

// Receives chunks with `recv(buffer, capacity, offset, size)` (false: no more) and copies each to
// the rows on `stream` while the next one arrives.  A chunk outside the rows, or a device error,
// is remembered and later chunks are still received (and dropped), so the link stays in step;
// returns the first such error.  Exceptions of `recv` pass through (after the stream is idle).
using PeerRecv =
    std::function<bool(char* buffer, uint64_t capacity, uint64_t& offset, uint64_t& size)>;
backend::Status peer_recv_rows(backend::Executor& exec, StagingPool& pool, const PeerRows& rows,
                               uint64_t stream, const PeerRecv& recv);

}  // namespace rgpu::server
