// The device memory one session may touch, per GPU: its allocations (freeable) and the global
// variables of its modules (not freeable).  Every pointer a request names is checked against it
// before the backend touches memory, so a bad pointer is a clear cudaErrorInvalidValue on every
// backend, and a reset or disconnect knows what to release.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace rgpu::server {

class AllocationTable {
 public:
  // `joinable`: a range of mapped virtual memory (cuMemMap); a request may span such ranges that
  // follow each other without a gap, as one mapping of a reservation.
  void add(uint64_t base, uint64_t size, bool freeable = true, bool joinable = false) {
    remove(base);
    ranges_[base] = {size, freeable, joinable};
    if (freeable) freeable_bytes_ += size;
  }
  bool remove(uint64_t base) {
    auto it = ranges_.find(base);
    if (it == ranges_.end()) return false;
    if (it->second.freeable) freeable_bytes_ -= it->second.size;
    ranges_.erase(it);
    return true;
  }
  // Bytes of the freeable allocations (what the client holds).
  uint64_t freeable_bytes() const { return freeable_bytes_; }
  // True for the base address of a freeable allocation.
  bool is_base(uint64_t p) const {
    auto it = ranges_.find(p);
    return it != ranges_.end() && it->second.freeable;
  }
  // True when [p, p + size) lies inside one range (or joinable ranges without gaps).
  bool contains(uint64_t p, uint64_t size) const;
  // The freeable allocations (base addresses).
  std::vector<uint64_t> allocations() const;
  void clear() {
    ranges_.clear();
    freeable_bytes_ = 0;
  }

 private:
  struct Range {
    uint64_t size;
    bool freeable;
    bool joinable;
  };
  std::map<uint64_t, Range> ranges_;
  uint64_t freeable_bytes_ = 0;
};

}  // namespace rgpu::server
