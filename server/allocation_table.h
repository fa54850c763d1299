// The device memory one session may touch, per GPU: its allocations (freeable) and the global
// variables of its modules (not freeable).  Every pointer a request names is checked against it
// before the backend touches memory, so a bad pointer is a clear cudaErrorInvalidValue on every
// backend, and a reset or disconnect knows what to release.  The dispatcher changes it; peer
// links (server/peer_host.h) check ranges from their own threads, so every access takes a lock.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace rgpu::server {

class AllocationTable {
 public:
  AllocationTable() = default;
  AllocationTable(const AllocationTable& o) { *this = o; }
  AllocationTable& operator=(const AllocationTable& o) {
    if (this == &o) return *this;
    std::scoped_lock lock(mu_, o.mu_);
    ranges_ = o.ranges_;
    freeable_bytes_ = o.freeable_bytes_;
    stamp_ = o.stamp_;
    return *this;
  }

  // `joinable`: a range of mapped virtual memory (cuMemMap); a request may span such ranges that
  // follow each other without a gap, as one mapping of a reservation.
  void add(uint64_t base, uint64_t size, bool freeable = true, bool joinable = false) {
    std::lock_guard<std::mutex> lock(mu_);
    erase(base);
    ranges_[base] = {size, freeable, joinable, ++stamp_};
    if (freeable) freeable_bytes_ += size;
  }
  // `size`, when given, is set to the range's size (0 when there was none).
  bool remove(uint64_t base, uint64_t* size = nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    if (size) {
      auto it = ranges_.find(base);
      *size = it == ranges_.end() ? 0 : it->second.size;
    }
    return erase(base);
  }
  // Bytes of the freeable allocations (what the client holds).
  uint64_t freeable_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return freeable_bytes_;
  }
  // True for the base address of a freeable allocation.
  bool is_base(uint64_t p) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ranges_.find(p);
    return it != ranges_.end() && it->second.freeable;
  }
  // True when [p, p + size) lies inside one range (or joinable ranges without gaps).  Ranges
  // newer than `born_by` (a stamp()) do not count: memory freed and handed out again since then
  // is not what a request of that time named.
  bool contains(uint64_t p, uint64_t size, uint64_t born_by = UINT64_MAX) const;
  // The stamp of the range that holds `p` (0: none).
  uint64_t stamp_at(uint64_t p) const;
  // The range that holds `p`: false when none does.
  bool range_at(uint64_t p, uint64_t& base, uint64_t& size) const;
  // The stamp of the newest range added so far (ranges are numbered as they are added).
  uint64_t stamp() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stamp_;
  }
  // The freeable allocations (base addresses).
  std::vector<uint64_t> allocations() const;
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ranges_.empty()) freed();
    ranges_.clear();
    freeable_bytes_ = 0;
  }
  // Every range that leaves the table from now on bumps *word (atomically: another rgpud reads
  // it, server/peer_fences.h).  Not copied with the table.
  void count_frees(uint32_t* word) {
    std::lock_guard<std::mutex> lock(mu_);
    frees_ = word;
  }

 private:
  void freed() const;
  bool erase(uint64_t base) {
    auto it = ranges_.find(base);
    if (it == ranges_.end()) return false;
    freed();
    if (it->second.freeable) freeable_bytes_ -= it->second.size;
    ranges_.erase(it);
    return true;
  }

  struct Range {
    uint64_t size;
    bool freeable;
    bool joinable;
    uint64_t stamp;
  };
  std::map<uint64_t, Range> ranges_;
  uint64_t freeable_bytes_ = 0;
  uint64_t stamp_ = 0;
  uint32_t* frees_ = nullptr;
  mutable std::mutex mu_;
};

}  // namespace rgpu::server
