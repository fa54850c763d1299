#include "server/allocation_table.h"

namespace rgpu::server {

bool AllocationTable::contains(uint64_t p, uint64_t size) const {
  auto it = allocs_.upper_bound(p);
  if (it == allocs_.begin()) return false;
  --it;
  uint64_t base = it->first, len = it->second;
  if (p < base) return false;
  uint64_t off = p - base;
  return off <= len && size <= len - off;
}

}  // namespace rgpu::server
