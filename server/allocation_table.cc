#include "server/allocation_table.h"

#include "server/peer_fences.h"

namespace rgpu::server {

void AllocationTable::freed() const {
  if (frees_) peer_fence_bump(*frees_);
}

bool AllocationTable::contains(uint64_t p, uint64_t size, uint64_t born_by) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ranges_.upper_bound(p);
  if (it == ranges_.begin()) return false;
  --it;
  uint64_t base = it->first, len = it->second.size;
  if (p < base || it->second.stamp > born_by) return false;
  uint64_t off = p - base;
  if (off > len) return false;
  if (size <= len - off) return true;
  // Joinable ranges (mapped virtual memory) continue into the next one that starts at their end.
  uint64_t left = size - (len - off);
  while (it->second.joinable) {
    uint64_t end = it->first + it->second.size;
    if (++it == ranges_.end() || it->first != end || !it->second.joinable ||
        it->second.stamp > born_by)
      return false;
    if (left <= it->second.size) return true;
    left -= it->second.size;
  }
  return false;
}

uint64_t AllocationTable::stamp_at(uint64_t p) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ranges_.upper_bound(p);
  if (it == ranges_.begin()) return 0;
  --it;
  return p - it->first < it->second.size ? it->second.stamp : 0;
}

bool AllocationTable::range_at(uint64_t p, uint64_t& base, uint64_t& size) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ranges_.upper_bound(p);
  if (it == ranges_.begin()) return false;
  --it;
  if (p - it->first >= it->second.size) return false;
  base = it->first;
  size = it->second.size;
  return true;
}

std::vector<uint64_t> AllocationTable::allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> out;
  for (auto& [base, r] : ranges_)
    if (r.freeable) out.push_back(base);
  return out;
}

}  // namespace rgpu::server
