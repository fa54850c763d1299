// One address window's allocator: every allocation of a virtual device lands inside the window the
// client reserved for it, so device addresses are unique across all of a client's servers.
//
// Large requests (> kSmallMax) get their own mapping, rounded up to the backend's granularity.
// Small ones are carved from slabs (one granule, at least 2 MiB) in power-of-two size classes of at
// least kAlign bytes (CUDA's alignment), so a small allocation does not cost a granule.  A slab
// whose last block is freed is unmapped, and a large allocation's mapping is unmapped when freed,
// except that freed mappings of up to kSpareMax bytes in all are kept as spares and reused by a
// later request of the same length, so a malloc/free loop does not map and unmap every time (a
// granule costs ~100 us of VMM calls on a GPU). Spares go back when the window has no room, when
// mapping fails for want of memory, and on trim() (cudaMemGetInfo), so they never cost this
// session an allocation and free memory reads as after cudaFree; other processes on the same GPU
// may find up to kSpareMax per window held until then.
//
// A mapping that holds memory shared with other processes (an IPC export, share()) is never
// handed out again: no block is carved from its slab any more, its freed blocks are not reused,
// and it is unmapped, not kept as a spare, once its last allocation is freed.  So memory
// allocated after an export never lies in the exported mapping, and memory freed after it never
// comes back to this process at an address another process can still reach.
//
// The heap only does bookkeeping and calls its Mapper; it knows nothing of CUDA, and the unit
// tests drive it with a fake.  Not thread-safe (a session's dispatcher owns it).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "backend/executor.h"

namespace rgpu::server {

// Backs and releases address ranges of the window (granule-aligned, granule multiples).
class Mapper {
 public:
  virtual ~Mapper() = default;
  virtual backend::Status map(uint64_t addr, uint64_t size) = 0;
  virtual backend::Status unmap(uint64_t addr, uint64_t size) = 0;
};

class DeviceHeap {
 public:
  static constexpr uint64_t kAlign = 256;           // every allocation starts at a multiple of this
  static constexpr uint64_t kSmallMax = 1 << 20;    // larger requests get mappings of their own
  static constexpr uint64_t kSpareMax = 256 << 20;  // freed mappings kept for reuse, in all

  // `granule` must be a power of two; base and size multiples of it (checked by the caller).
  DeviceHeap(uint64_t base, uint64_t size, uint64_t granule, Mapper& mapper);
  ~DeviceHeap();  // unmaps everything still mapped
  DeviceHeap(const DeviceHeap&) = delete;
  DeviceHeap& operator=(const DeviceHeap&) = delete;

  // size 0 is the caller's business (CUDA returns a null pointer without asking).
  backend::Status alloc(uint64_t size, uint64_t& ptr);
  // InvalidValue when `ptr` is not the start of a live allocation (double free included).
  backend::Status free(uint64_t ptr);
  // Address space of `size` bytes (rounded up to the granule) taken from the window with nothing
  // mapped: for memory the caller maps itself (an IPC import).  unreserve gives it back.
  backend::Status reserve(uint64_t size, uint64_t& addr);
  void unreserve(uint64_t addr, uint64_t size);
  // Unmaps everything (allocations included) and forgets it: cudaDeviceReset, session end.
  void release_all();
  // Unmaps the spares (memory freed by the program but kept mapped for reuse).
  void trim();
  // The live allocation starting at `ptr` is shared with other processes (see above); `mapping`
  // and `length` are the mapping that holds it.  InvalidValue when `ptr` is not the start of a
  // live allocation.
  backend::Status share(uint64_t ptr, uint64_t& mapping, uint64_t& length);
  // Whether the live allocation starting at `ptr` lies in a shared mapping (false for none).
  bool shared(uint64_t ptr) const;

  uint64_t base() const { return base_; }
  uint64_t size() const { return size_; }
  uint64_t slab_size() const { return slab_; }
  bool contains(uint64_t p) const { return p >= base_ && p - base_ < size_; }
  // Bytes mapped right now (allocations, slabs, the spare), for tests and logs.
  uint64_t mapped_bytes() const { return mapped_; }
  size_t live_allocations() const { return live_.size(); }
  bool has_spare() const { return !spares_.empty(); }
  uint64_t spare_bytes() const { return spare_bytes_; }

 private:
  struct Slab {
    int cls = 0;                  // size class: block = kAlign << cls
    uint32_t used = 0;            // blocks handed out
    std::vector<uint32_t> free_;  // block indices not handed out
    bool shared = false;          // holds shared memory: no block is handed out any more
  };
  struct Live {
    uint64_t mapped = 0;  // > 0: a large allocation's own mapping of this many bytes
    uint64_t slab = 0;    // else the slab it was carved from
    bool shared = false;  // a large allocation's mapping holds shared memory
  };
  static int class_of(uint64_t size);
  uint64_t block_size(int cls) const { return kAlign << cls; }
  // Address space of the window (granule multiples), first fit, coalesced on return.
  bool take_range(uint64_t len, uint64_t& addr);
  void return_range(uint64_t addr, uint64_t len);
  // A mapped range of `len` bytes: a spare of that length, else a new mapping.
  backend::Status get_mapping(uint64_t len, uint64_t& addr);
  // Keeps a freed mapping as a spare (evicting the largest ones to stay within kSpareMax), or
  // unmaps it when it alone is larger.
  void drop_mapping(uint64_t addr, uint64_t len);
  void unmap_range(uint64_t addr, uint64_t len);
  backend::Status alloc_small(uint64_t size, uint64_t& ptr);

  uint64_t base_, size_, granule_, slab_;
  Mapper& mapper_;
  std::map<uint64_t, uint64_t> free_ranges_;  // unmapped address space: start -> length
  std::unordered_map<uint64_t, Slab> slabs_;  // by slab base
  std::vector<std::set<uint64_t>> partial_;   // per class: slabs with a free block, by address
  std::unordered_map<uint64_t, Live> live_;   // allocations by start address
  std::multimap<uint64_t, uint64_t> spares_;  // mapped, unused ranges: length -> start
  uint64_t spare_bytes_ = 0;
  uint64_t mapped_ = 0;
};

}  // namespace rgpu::server
