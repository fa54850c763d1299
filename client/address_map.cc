#include "client/address_map.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "common/log.h"

namespace rgpu::client {
namespace {

template <class Map>
auto containing(const Map& m, uint64_t p) -> decltype(m.end()) {
  auto it = m.upper_bound(p);
  if (it == m.begin()) return m.end();
  --it;
  if (p >= it->second.base && p - it->second.base < std::max<uint64_t>(it->second.size, 1))
    return it;
  return m.end();
}

// True when [base, base + size) meets a range of the map (ranges of size 0 count as one byte).
template <class Map>
bool overlaps(const Map& m, uint64_t base, uint64_t size) {
  const uint64_t end = base + std::max<uint64_t>(size, 1);
  auto it = m.lower_bound(base);
  if (it != m.end() && it->first < end) return true;
  if (it == m.begin()) return false;
  --it;
  return it->second.base + std::max<uint64_t>(it->second.size, 1) > base;
}

}  // namespace

void AddressMap::reserve_locked(uint64_t base, uint64_t size) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t a = base / page * page;
  uint64_t b = (base + size + page - 1) / page * page;
  // Reserve the gaps of [a, b) not already reserved.
  uint64_t cur = a;
  auto it = reserved_.upper_bound(a);
  if (it != reserved_.begin()) {
    auto prev = std::prev(it);
    if (prev->second > cur) cur = prev->second;
  }
  while (cur < b) {
    uint64_t gap_end = b;
    if (it != reserved_.end() && it->first < b) gap_end = it->first;
    if (cur < gap_end) {
      void* p = mmap(reinterpret_cast<void*>(cur), gap_end - cur, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
      if (p == MAP_FAILED || reinterpret_cast<uint64_t>(p) != cur) {
        if (p != MAP_FAILED) munmap(p, gap_end - cur);
        LOG_WARN(
            "device memory at 0x%llx overlaps this process's own memory; cudaMemcpyDefault "
            "treats the range as device memory",
            static_cast<unsigned long long>(cur));
      } else {
        reserved_[cur] = gap_end;
      }
    }
    if (it == reserved_.end() || it->first >= b) break;
    cur = std::max(cur, it->second);
    ++it;
  }
}

bool AddressMap::reserve_window(uint64_t base, uint64_t size, std::string* error) {
  std::unique_lock lock(mu_);
  void* p = mmap(reinterpret_cast<void*>(base), size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED || reinterpret_cast<uint64_t>(p) != base) {
    int e = errno;
    if (p != MAP_FAILED) munmap(p, size);  // a kernel that took the address as a hint
    if (error) {
      char buf[160];
      snprintf(buf, sizeof buf, "cannot reserve the address window 0x%llx..0x%llx: %s",
               static_cast<unsigned long long>(base), static_cast<unsigned long long>(base + size),
               p == MAP_FAILED ? strerror(e) : "the kernel placed it elsewhere");
      *error = buf;
    }
    return false;
  }
  reserved_[base] = base + size;
  return true;
}

bool AddressMap::add_device(const DeviceRange& r) {
  std::unique_lock lock(mu_);
  if (r.base > UINT64_MAX - r.size) return false;
  if (!r.freeable) {
    // The same module variable seen again (two virtual devices naming one GPU share a session's
    // modules): already known.
    auto same = device_.find(r.base);
    if (same != device_.end() && !same->second.freeable && same->second.size == r.size) return true;
  }
  if (overlaps(device_, r.base, r.size) || overlaps(host_, r.base, r.size)) return false;
  device_[r.base] = r;
  device_[r.base].id = next_id_++;
  reserve_locked(r.base, r.size);
  return true;
}

bool AddressMap::overlaps_known(uint64_t p, uint64_t n) const {
  std::shared_lock lock(mu_);
  if (p > UINT64_MAX - n) return true;
  return overlaps(device_, p, n) || overlaps(host_, p, n);
}

std::optional<DeviceRange> AddressMap::remove_device(uint64_t base) {
  std::unique_lock lock(mu_);
  auto it = device_.find(base);
  if (it == device_.end()) return std::nullopt;
  DeviceRange r = it->second;
  device_.erase(it);
  return r;
}

std::optional<DeviceRange> AddressMap::find_device(uint64_t p) const {
  std::shared_lock lock(mu_);
  auto it = containing(device_, p);
  if (it == device_.end()) return std::nullopt;
  return it->second;
}

bool AddressMap::device_range_ok(uint64_t p, uint64_t n, int* device) const {
  std::shared_lock lock(mu_);
  auto it = containing(device_, p);
  if (it == device_.end()) return false;
  const DeviceRange& r = it->second;
  if (n > r.size - (p - r.base)) {
    if (!r.vmm) return false;
    uint64_t left = n - (r.size - (p - r.base));
    for (auto next = std::next(it);; ++next) {
      const DeviceRange& prev = std::prev(next)->second;
      if (next == device_.end() || !next->second.vmm || next->first != prev.base + prev.size ||
          next->second.device != r.device)
        return false;
      if (left <= next->second.size) break;
      left -= next->second.size;
    }
  }
  if (device) *device = r.device;
  return true;
}

std::vector<DeviceRange> AddressMap::device_allocations(int device) const {
  std::shared_lock lock(mu_);
  std::vector<DeviceRange> out;
  for (auto& [b, r] : device_)
    if (r.device == device) out.push_back(r);
  return out;
}

bool AddressMap::add_host(const HostRange& r) {
  std::unique_lock lock(mu_);
  if (r.base > UINT64_MAX - r.size) return false;
  if (overlaps(host_, r.base, r.size) || overlaps(device_, r.base, r.size)) return false;
  host_[r.base] = r;
  host_[r.base].id = next_id_++;
  if (!r.mapped) unmapped_host_.fetch_add(1, std::memory_order_release);
  return true;
}

std::optional<HostRange> AddressMap::remove_host(uint64_t base) {
  std::unique_lock lock(mu_);
  auto it = host_.find(base);
  if (it == host_.end()) return std::nullopt;
  HostRange r = it->second;
  host_.erase(it);
  if (!r.mapped) unmapped_host_.fetch_sub(1, std::memory_order_release);
  return r;
}

std::optional<HostRange> AddressMap::find_host(uint64_t p) const {
  std::shared_lock lock(mu_);
  auto it = containing(host_, p);
  if (it == host_.end()) return std::nullopt;
  return it->second;
}

}  // namespace rgpu::client
