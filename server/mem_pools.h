// A session's memory pools (cudaMallocAsync, cudaMemPool*): stream-ordered allocation on top of the
// address windows' heaps (server/device_heap.h), so every pool allocation lands in the window of
// the virtual device it was made for.
//
// Stream order: an allocation is usable in stream order at once (its memory is mapped before the
// reply).  A free records an event on its stream; the block stays in the pool's cache and is handed
// out again
//   - on the stream it was freed on, at once (stream order covers it, as in CUDA),
//   - on any stream once its event has completed (cudaMemPoolReuseAllowOpportunistic),
//   - on another stream before that, when the heap is out of memory, after making the allocating
//     stream wait for the free's event (cudaMemPoolReuseAllowInternalDependencies).
// Cached blocks whose frees completed go back to the heap beyond the pool's release threshold at
// synchronization points (trim_device), at cudaMemPoolTrimTo, and before reading an attribute.
//
// The class does bookkeeping only; what it needs of the GPU goes through PoolOps, so the unit tests
// drive it with a fake.  Not thread-safe: the session's dispatcher owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "backend/executor.h"

namespace rgpu::server {

// What pools ask of the session.  Events are the session's private ones.
struct PoolOps {
  std::function<backend::Status(uint32_t dev, uint64_t window, uint64_t size, uint64_t& ptr)>
      heap_alloc;
  std::function<void(uint32_t dev, uint64_t ptr, uint64_t size)> heap_free;  // heap_alloc's size
  // Records a new event on `stream` (a backend handle).
  std::function<backend::Status(uint32_t dev, uint64_t stream, uint64_t& event)> record;
  std::function<bool(uint32_t dev, uint64_t event)> done;     // completed (or failed)
  std::function<void(uint32_t dev, uint64_t event)> release;  // the event is no longer needed
  std::function<backend::Status(uint32_t dev, uint64_t stream, uint64_t event)> wait;
  // Whether a freed block may be handed out again (not when its memory was shared with another
  // process: server/device_heap.h); unset: always.  Blocks that may not be go back to the heap
  // once their frees completed, whatever the release threshold.
  std::function<bool(uint32_t dev, uint64_t ptr)> reusable;
};

class MemPools {
 public:
  // cudaMemPoolAttr numbers.
  enum Attr : uint32_t {
    kFollowEventDependencies = 1,
    kAllowOpportunistic = 2,
    kAllowInternalDependencies = 3,
    kReleaseThreshold = 4,
    kReservedCurrent = 5,
    kReservedHigh = 6,
    kUsedCurrent = 7,
    kUsedHigh = 8,
  };
  static constexpr size_t kMaxPools = 4096;  // per session

  explicit MemPools(PoolOps ops) : ops_(std::move(ops)) {}

  // Pool ids are the client's; 0 names a GPU's default pool, created at its first use.
  backend::Status create(uint32_t dev, uint64_t id, uint64_t window, uint64_t max_size);
  // Outstanding allocations keep a destroyed pool's memory until they are freed (as in CUDA).
  backend::Status destroy(uint32_t dev, uint64_t id);
  backend::Status alloc(uint32_t dev, uint64_t id, uint64_t window, uint64_t stream, uint64_t size,
                        uint64_t& ptr);
  // `size` is set to the allocation's size.
  backend::Status free(uint32_t dev, uint64_t ptr, uint64_t stream, uint64_t& size);
  backend::Status set_attr(uint32_t dev, uint64_t id, uint32_t attr, uint64_t value);
  backend::Status get_attr(uint32_t dev, uint64_t id, uint32_t attr, uint64_t& value);
  backend::Status trim(uint32_t dev, uint64_t id, uint64_t keep);
  // A synchronization point of GPU `dev`: every pool gives completed cached blocks beyond its
  // release threshold back to the heap.
  void trim_device(uint32_t dev);
  // Gives every completed cached block of `dev`'s pools back (the heap ran out of memory).
  void release_cached(uint32_t dev);
  // A stream is destroyed: its handle may come back for another stream, so blocks freed on it
  // are no longer reusable "on the same stream" (only once their frees completed).
  void forget_stream(uint32_t dev, uint64_t stream);
  // After a device reset: its pools, blocks and events are gone (the heap was released).
  void forget_device(uint32_t dev);
  // Bytes reserved by all pools (held from the heaps), for the per-client memory limit.
  uint64_t reserved_bytes() const;
  bool owns(uint32_t dev, uint64_t ptr) const { return live_.count({dev, ptr}) > 0; }

 private:
  static constexpr uint64_t kNoStream = ~0ull;  // a destroyed stream's blocks
  struct Cached {
    uint64_t ptr = 0, size = 0;
    uint64_t stream = 0;  // backend handle of the stream it was freed on
    uint64_t event = 0;   // recorded there at the free; 0 once known complete (released)
  };
  struct Pool {
    uint64_t window = 0, max_size = 0;
    bool follow = true, opportunistic = true, internal = true;
    uint64_t threshold = 0;
    uint64_t reserved = 0, reserved_high = 0, used = 0, used_high = 0;
    uint32_t live = 0;  // outstanding allocations
    bool destroyed = false;
    std::vector<Cached> cache;
  };
  using Key = std::pair<uint32_t, uint64_t>;  // (GPU, pool id)
  Pool* find(uint32_t dev, uint64_t id, backend::Status& s);
  bool complete(uint32_t dev, Cached& c);  // releases the event once it completed
  bool reusable(uint32_t dev, const Cached& c) const {
    return !ops_.reusable || ops_.reusable(dev, c.ptr);
  }
  // Gives completed cached blocks back until reserved <= keep.
  void shrink(uint32_t dev, Pool& p, uint64_t keep);
  void drop_if_unused(const Key& k);
  void take(Pool& p, size_t index, uint64_t& ptr, uint64_t size, uint32_t dev);

  PoolOps ops_;
  std::map<Key, Pool> pools_;
  struct Live {
    uint64_t pool = 0, size = 0, block = 0;  // block: the cached block's size (>= size)
  };
  std::map<Key, Live> live_;  // (GPU, pointer) -> its allocation
};

}  // namespace rgpu::server
