// The device allocations one session made, per GPU: every pointer a request names is checked
// against it before the backend touches memory, so a bad pointer is a clear cudaErrorInvalidValue
// on every backend, and a reset or disconnect knows what to release.
#pragma once

#include <cstdint>
#include <map>

namespace rgpu::server {

class AllocationTable {
 public:
  void add(uint64_t base, uint64_t size) { allocs_[base] = size; }
  bool remove(uint64_t base) { return allocs_.erase(base) > 0; }
  bool is_base(uint64_t p) const { return allocs_.count(p) > 0; }
  // True when [p, p + size) lies inside one allocation.
  bool contains(uint64_t p, uint64_t size) const;
  const std::map<uint64_t, uint64_t>& all() const { return allocs_; }
  void clear() { allocs_.clear(); }

 private:
  std::map<uint64_t, uint64_t> allocs_;
};

}  // namespace rgpu::server
