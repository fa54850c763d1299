#include "server/peer_pipe.h"

#include <bit>
#include <cstdlib>

#include "common/cuda_errors.h"

namespace rgpu::server {

using backend::Rect;
using backend::Status;

namespace {

constexpr uint64_t kOneShot = 256u << 10;
constexpr size_t kKeepPerSize = 4;

uint64_t size_class(uint64_t bytes) { return std::bit_ceil(std::max<uint64_t>(bytes, 64u << 10)); }

// The device side of the packed bytes [offset, offset + size) of `rows`, moved to or from `host`
// on `stream`: a partial first row, whole rows (one 2-D copy), a partial last row.
Status move(backend::Executor& exec, const PeerRows& rows, uint64_t offset, uint64_t size,
            char* host, bool to_device, uint64_t stream) {
  auto copy = [&](uint64_t dev_addr, char* h, uint64_t width, uint64_t height) {
    if (to_device)
      return exec.copy_to_device_async(rows.dev, dev_addr, rows.pitch, h, width,
                                       Rect{width, height}, stream);
    return exec.copy_to_host_async(rows.dev, h, width, dev_addr, rows.pitch, Rect{width, height},
                                   stream);
  };
  while (size > 0) {
    const uint64_t row = offset / rows.width, col = offset % rows.width;
    const uint64_t addr = rows.base + row * rows.pitch + col;
    uint64_t width, height;
    if (col != 0 || size < rows.width) {
      width = std::min(size, rows.width - col);
      height = 1;
    } else {
      width = rows.width;
      height = size / rows.width;
    }
    if (Status s = copy(addr, host, width, height); !s.ok()) return s;
    const uint64_t n = width * height;
    offset += n;
    host += n;
    size -= n;
  }
  return Status::success();
}

// Two staging buffers for one transfer, given back (after the stream is idle) however it ends.
struct Buffers {
  backend::Executor& exec;
  StagingPool& pool;
  uint64_t stream;
  int dev;
  uint64_t bytes;
  char* b[2] = {nullptr, nullptr};
  uint64_t cls[2] = {0, 0};
  ~Buffers() {
    exec.stream_synchronize(dev, stream);
    for (int i = 0; i < 2; ++i)
      if (b[i]) pool.put(b[i], cls[i]);
  }
  bool get() {
    b[0] = pool.get(bytes, cls[0]);
    b[1] = pool.get(bytes, cls[1]);
    return b[0] && b[1];
  }
};

Status no_staging(uint64_t bytes) {
  return Status::fail(err::MemoryAllocation,
                      "cannot allocate " + std::to_string(bytes >> 10) +
                          " KiB of page-locked staging memory for a peer copy");
}

}  // namespace

Status PrivateStreams::get(backend::Executor& exec, int dev, uint64_t& stream) {
  auto it = by_gpu.find(dev);
  if (it != by_gpu.end()) {
    stream = it->second;
    return Status::success();
  }
  Status s = exec.stream_create(dev, 1 /* non-blocking */, 0, stream);
  if (s.ok()) by_gpu[dev] = stream;
  return s;
}

void PrivateStreams::destroy(backend::Executor& exec) {
  for (auto& [dev, stream] : by_gpu) exec.stream_destroy(dev, stream);
  by_gpu.clear();
}

uint64_t peer_bytes_setting(const char* text, uint64_t fallback) {
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const unsigned long long v = strtoull(text, &end, 10);
  uint64_t scale = 1;
  if (*end == 'K' || *end == 'k') scale = 1u << 10;
  if (*end == 'M' || *end == 'm') scale = 1u << 20;
  if (end == text || v == 0 || v > (kPeerTuningMax / scale)) return fallback;
  return v * scale;
}

uint64_t peer_chunk_bytes(uint64_t total) {
  // Tuning (scripts/gpu-peer-tune.sh): rgpud's environment may replace the one-shot limit and
  // give every larger copy one chunk size.  Both servers of a copy must agree.
  static const uint64_t one_shot = peer_bytes_setting(getenv("RGPU_PEER_ONESHOT"), kOneShot);
  static const uint64_t fixed = peer_bytes_setting(getenv("RGPU_PEER_CHUNK"), 0);
  if (total <= one_shot) return std::max<uint64_t>(total, 1);
  if (fixed) return fixed;
  if (total <= (16u << 20)) return 1u << 20;
  return kPeerMaxChunk;
}

StagingPool::~StagingPool() {
  for (auto& [size, v] : free_)
    for (char* p : v) exec_.free_staging(p);
}

char* StagingPool::get(uint64_t bytes, uint64_t& cls) {
  cls = size_class(bytes);
  {
    // The smallest kept buffer that is large enough (reserve() may have made larger ones only).
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = free_.lower_bound(cls); it != free_.end(); ++it) {
      if (it->second.empty()) continue;
      char* p = it->second.back();
      it->second.pop_back();
      cls = it->first;
      return p;
    }
  }
  return static_cast<char*>(exec_.alloc_staging(cls));  // a backend call: no lock held
}

void StagingPool::reserve(uint64_t bytes, size_t count) {
  const uint64_t c = size_class(bytes);
  count = std::min(count, kKeepPerSize);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (free_[c].size() >= count) return;
    }
    char* p = static_cast<char*>(exec_.alloc_staging(c));  // a backend call: no lock held
    if (!p) return;                                        // the copy reports it later
    std::lock_guard<std::mutex> lock(mu_);
    free_[c].push_back(p);
  }
}

void StagingPool::put(char* p, uint64_t cls) {
  const uint64_t c = size_class(cls);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& v = free_[c];
    if (v.size() < kKeepPerSize) {
      v.push_back(p);
      return;
    }
  }
  exec_.free_staging(p);
}

Status peer_send_rows(backend::Executor& exec, StagingPool& pool, const PeerRows& rows,
                      uint64_t stream, const PeerSend& send) {
  const uint64_t total = rows.bytes(), chunk = peer_chunk_bytes(total);
  Buffers buf{exec, pool, stream, rows.dev, chunk};
  if (!buf.get()) return no_staging(chunk);
  // Chunk i+1 is copied from the GPU while chunk i is being sent.
  uint64_t off = 0, n = std::min(chunk, total);
  if (Status s = move(exec, rows, off, n, buf.b[0], false, stream); !s.ok()) return s;
  if (Status s = exec.stream_synchronize(rows.dev, stream); !s.ok()) return s;
  for (int i = 0; off < total; ++i) {
    const uint64_t next = off + n, next_n = std::min(chunk, total - next);
    char* cur = buf.b[i & 1];
    if (next_n) {
      if (Status s = move(exec, rows, next, next_n, buf.b[(i + 1) & 1], false, stream); !s.ok())
        return s;
    }
    send(off, cur, n);
    if (next_n) {
      if (Status s = exec.stream_synchronize(rows.dev, stream); !s.ok()) return s;
    }
    off = next;
    n = next_n;
  }
  return Status::success();
}

Status peer_recv_rows(backend::Executor& exec, StagingPool& pool, const PeerRows& rows,
                      uint64_t stream, const PeerRecv& recv) {
  const uint64_t total = rows.bytes(), chunk = peer_chunk_bytes(total);
  Buffers buf{exec, pool, stream, rows.dev, chunk};
  if (!buf.get()) {
    // Still drain what the peer sends, so that it hears the error in order.
    std::vector<char> sink(chunk);
    uint64_t o, n;
    while (recv(sink.data(), chunk, o, n)) {
    }
    return no_staging(chunk);
  }
  Status first;
  // Chunk i lands in buffer i%2 while chunk i-1's copy to the GPU runs; the synchronization
  // after receiving chunk i waits for that copy (and buffer (i+1)%2's, issued before, is free).
  for (int i = 0;; ++i) {
    char* cur = buf.b[i & 1];
    uint64_t off = 0, n = 0;
    if (!recv(cur, chunk, off, n)) break;
    if (Status s = exec.stream_synchronize(rows.dev, stream); !s.ok() && first.ok()) first = s;
    if (!first.ok()) continue;
    if (n > chunk || off > total || n > total - off) {
      first = Status::fail(err::InvalidValue, "a peer copy's chunk lies outside its range");
      continue;
    }
    if (Status s = move(exec, rows, off, n, cur, true, stream); !s.ok()) first = s;
  }
  if (Status s = exec.stream_synchronize(rows.dev, stream); !s.ok() && first.ok()) first = s;
  return first;
}

}  // namespace rgpu::server
