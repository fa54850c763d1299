#include "server/allocation_table.h"

namespace rgpu::server {

bool AllocationTable::contains(uint64_t p, uint64_t size) const {
  auto it = ranges_.upper_bound(p);
  if (it == ranges_.begin()) return false;
  --it;
  uint64_t base = it->first, len = it->second.size;
  if (p < base) return false;
  uint64_t off = p - base;
  return off <= len && size <= len - off;
}

std::vector<uint64_t> AllocationTable::allocations() const {
  std::vector<uint64_t> out;
  for (auto& [base, r] : ranges_)
    if (r.freeable) out.push_back(base);
  return out;
}

}  // namespace rgpu::server
