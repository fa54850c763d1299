// The page-state tracker of one managed allocation (docs/architecture.md, "Managed memory"): which
// granules the host copy holds unchanged (Clean), holds changed (Dirty) or does not hold (Device:
// the GPU may have changed them).  Pure bookkeeping: the caller applies the protections and moves
// the bytes the transitions call for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rgpu::client {

enum class PageState : uint8_t {
  Clean,   // host copy equals the device copy; mapped PROT_READ (a write faults: -> Dirty)
  Dirty,   // written on the host since it was last sent; mapped PROT_READ|PROT_WRITE
  Device,  // the device may hold newer bytes; mapped PROT_NONE (an access faults: fetch)
};

// A byte range of the allocation: offset from its base, size (both multiples of the granule, the
// last run may end at the allocation's end).
struct PageRun {
  uint64_t offset = 0;
  uint64_t size = 0;
  bool operator==(const PageRun&) const = default;
};

class PageTracker {
 public:
  // 64 KiB: a multiple of every page size Linux uses for anonymous memory (4 KiB, 16 KiB, 64 KiB),
  // so every granule can be protected on its own; one fault and one round trip move 64 KiB (a
  // round trip costs about as much as sending 64 KiB over a 10 Gb/s link), and a 1 GiB
  // allocation needs 16384 entries.
  static constexpr uint64_t kGranule = 64u << 10;

  PageTracker(uint64_t size, PageState initial);

  uint64_t size() const { return size_; }
  PageState at(uint64_t offset) const { return pages_[offset / kGranule]; }
  // The granule-aligned run of the granule holding `offset`.
  PageRun granule(uint64_t offset) const;

  // Device work may touch [offset, offset + n): every granule there becomes Device.  `send`
  // gets the Dirty granules (coalesced runs: the bytes to send first), `protect` every granule
  // that changed state (coalesced: to map PROT_NONE once the bytes are sent).  With
  // `send` null the dirty bytes are dropped (a discard: the contents become undefined).
  void to_device(uint64_t offset, uint64_t n, std::vector<PageRun>* send,
                 std::vector<PageRun>* protect);
  // Device work will read [offset, offset + n): its Dirty granules become Clean; `send` gets
  // them (coalesced: the bytes to send, then to map PROT_READ).
  void flush(uint64_t offset, uint64_t n, std::vector<PageRun>* send);
  // The Device granules of [offset, offset + n), coalesced into runs of at most `max_run` bytes.
  std::vector<PageRun> device_runs(uint64_t offset, uint64_t n, uint64_t max_run) const;
  // The run of Device granules starting at the granule of `offset`, at most `max` bytes (empty
  // when that granule is not Device).
  PageRun device_run_at(uint64_t offset, uint64_t max) const;
  void set(const PageRun& r, PageState s);

  uint64_t count(PageState s) const;

 private:
  size_t first(uint64_t offset) const { return offset / kGranule; }
  size_t end(uint64_t offset, uint64_t n) const;
  PageRun run(size_t a, size_t b) const;  // granules [a, b) as bytes, clipped to the size
  uint64_t size_ = 0;
  std::vector<PageState> pages_;
};

}  // namespace rgpu::client
