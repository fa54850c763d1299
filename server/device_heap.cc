#include "server/device_heap.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace rgpu::server {

using backend::Status;

namespace {

constexpr uint64_t kMinSlab = 2ull << 20;

std::string hex(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

DeviceHeap::DeviceHeap(uint64_t base, uint64_t size, uint64_t granule, Mapper& mapper)
    : base_(base),
      size_(size),
      granule_(granule),
      slab_(std::max(granule, kMinSlab)),
      mapper_(mapper),
      partial_(class_of(kSmallMax) + 1) {
  if (size_) free_ranges_[base_] = size_;
}

DeviceHeap::~DeviceHeap() { release_all(); }

int DeviceHeap::class_of(uint64_t size) {
  int cls = 0;
  while ((kAlign << cls) < size) ++cls;
  return cls;
}

bool DeviceHeap::take_range(uint64_t len, uint64_t& addr) {
  for (auto it = free_ranges_.begin(); it != free_ranges_.end(); ++it) {
    if (it->second < len) continue;
    addr = it->first;
    uint64_t rest = it->second - len;
    free_ranges_.erase(it);
    if (rest) free_ranges_[addr + len] = rest;
    return true;
  }
  return false;
}

void DeviceHeap::return_range(uint64_t addr, uint64_t len) {
  auto next = free_ranges_.lower_bound(addr);
  if (next != free_ranges_.end() && next->first == addr + len) {
    len += next->second;
    next = free_ranges_.erase(next);
  }
  if (next != free_ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == addr) {
      prev->second += len;
      return;
    }
  }
  free_ranges_[addr] = len;
}

Status DeviceHeap::get_mapping(uint64_t len, uint64_t& addr) {
  if (auto it = spares_.find(len); it != spares_.end()) {
    addr = it->second;
    spares_.erase(it);
    spare_bytes_ -= len;
    return Status::success();
  }
  bool found = take_range(len, addr);
  if (!found && !spares_.empty()) {
    // The spares may be what stands in the way of a large mapping: give them back and retry.
    trim();
    found = take_range(len, addr);
  }
  if (!found)
    return Status::fail(err::MemoryAllocation, "the device's address window (" +
                                                   std::to_string(size_ >> 20) + " MiB at " +
                                                   hex(base_) + ") has no free range of " +
                                                   std::to_string(len) + " bytes");
  Status s = mapper_.map(addr, len);
  if (!s.ok() && s.code == err::MemoryAllocation && !spares_.empty()) {
    trim();  // the GPU's memory the spares hold may be what is missing
    s = mapper_.map(addr, len);
  }
  if (!s.ok()) {
    return_range(addr, len);
    return s;
  }
  mapped_ += len;
  return Status::success();
}

void DeviceHeap::unmap_range(uint64_t addr, uint64_t len) {
  mapper_.unmap(addr, len);
  mapped_ -= len;
  return_range(addr, len);
}

void DeviceHeap::drop_mapping(uint64_t addr, uint64_t len) {
  if (len > kSpareMax) {
    unmap_range(addr, len);
    return;
  }
  while (spare_bytes_ + len > kSpareMax) {
    auto largest = std::prev(spares_.end());
    spare_bytes_ -= largest->first;
    unmap_range(largest->second, largest->first);
    spares_.erase(largest);
  }
  spares_.emplace(len, addr);
  spare_bytes_ += len;
}

void DeviceHeap::trim() {
  for (auto& [len, addr] : spares_) unmap_range(addr, len);
  spares_.clear();
  spare_bytes_ = 0;
}

Status DeviceHeap::alloc_small(uint64_t size, uint64_t& ptr) {
  const int cls = class_of(size);
  auto& partial = partial_[cls];
  if (partial.empty()) {
    uint64_t addr = 0;
    if (Status s = get_mapping(slab_, addr); !s.ok()) return s;
    Slab slab;
    slab.cls = cls;
    const uint32_t blocks = static_cast<uint32_t>(slab_ / block_size(cls));
    slab.free_.reserve(blocks);
    for (uint32_t i = blocks; i-- > 0;) slab.free_.push_back(i);  // lowest address first
    slabs_.emplace(addr, std::move(slab));
    partial.insert(addr);
  }
  const uint64_t slab_base = *partial.begin();
  Slab& slab = slabs_.at(slab_base);
  const uint32_t index = slab.free_.back();
  slab.free_.pop_back();
  ++slab.used;
  if (slab.free_.empty()) partial.erase(slab_base);
  ptr = slab_base + index * block_size(cls);
  live_[ptr] = Live{0, slab_base};
  return Status::success();
}

Status DeviceHeap::reserve(uint64_t size, uint64_t& addr) {
  if (size == 0 || size > size_)
    return Status::fail(err::InvalidValue, "cannot reserve " + std::to_string(size) +
                                               " bytes of the device's address window");
  const uint64_t len = (size + granule_ - 1) / granule_ * granule_;
  if (!take_range(len, addr))
    return Status::fail(err::MemoryAllocation, "the device's address window has no free range of " +
                                                   std::to_string(len) + " bytes");
  return Status::success();
}

void DeviceHeap::unreserve(uint64_t addr, uint64_t size) {
  return_range(addr, (size + granule_ - 1) / granule_ * granule_);
}

Status DeviceHeap::alloc(uint64_t size, uint64_t& ptr) {
  if (size == 0) return Status::fail(err::InvalidValue, "zero-byte allocation");
  if (size > size_)
    return Status::fail(err::MemoryAllocation,
                        "allocation of " + std::to_string(size) +
                            " bytes is larger than the device's address window (" +
                            std::to_string(size_ >> 20) + " MiB)");
  if (size <= kSmallMax) return alloc_small(size, ptr);
  const uint64_t len = (size + granule_ - 1) / granule_ * granule_;  // size <= size_: no overflow
  uint64_t addr = 0;
  if (Status s = get_mapping(len, addr); !s.ok()) return s;
  live_[addr] = Live{len, 0};
  ptr = addr;
  return Status::success();
}

Status DeviceHeap::free(uint64_t ptr) {
  auto it = live_.find(ptr);
  if (it == live_.end())
    return Status::fail(err::InvalidValue,
                        "free of " + hex(ptr) + ", which is not the start of a live allocation");
  Live l = it->second;
  live_.erase(it);
  if (l.mapped) {
    if (l.shared)
      unmap_range(ptr, l.mapped);
    else
      drop_mapping(ptr, l.mapped);
    return Status::success();
  }
  Slab& slab = slabs_.at(l.slab);
  if (slab.shared) {  // its blocks are not handed out again
    if (--slab.used == 0) {
      slabs_.erase(l.slab);
      unmap_range(l.slab, slab_);
    }
    return Status::success();
  }
  const uint64_t bs = block_size(slab.cls);
  if (slab.free_.empty()) partial_[slab.cls].insert(l.slab);
  slab.free_.push_back(static_cast<uint32_t>((ptr - l.slab) / bs));
  if (--slab.used == 0) {
    partial_[slab.cls].erase(l.slab);
    slabs_.erase(l.slab);
    drop_mapping(l.slab, slab_);
  }
  return Status::success();
}

Status DeviceHeap::share(uint64_t ptr, uint64_t& mapping, uint64_t& length) {
  auto it = live_.find(ptr);
  if (it == live_.end())
    return Status::fail(err::InvalidValue,
                        hex(ptr) + " is not the start of a live allocation of this window");
  Live& l = it->second;
  if (l.mapped) {
    l.shared = true;
    mapping = ptr;
    length = l.mapped;
    return Status::success();
  }
  Slab& slab = slabs_.at(l.slab);
  if (!slab.shared) {
    slab.shared = true;
    partial_[slab.cls].erase(l.slab);
    slab.free_.clear();
    slab.free_.shrink_to_fit();
  }
  mapping = l.slab;
  length = slab_;
  return Status::success();
}

bool DeviceHeap::shared(uint64_t ptr) const {
  auto it = live_.find(ptr);
  if (it == live_.end()) return false;
  if (it->second.mapped) return it->second.shared;
  auto s = slabs_.find(it->second.slab);
  return s != slabs_.end() && s->second.shared;
}

void DeviceHeap::release_all() {
  for (auto& [addr, l] : live_)
    if (l.mapped) mapper_.unmap(addr, l.mapped);
  for (auto& [addr, slab] : slabs_) mapper_.unmap(addr, slab_);
  for (auto& [len, addr] : spares_) mapper_.unmap(addr, len);
  spares_.clear();
  spare_bytes_ = 0;
  live_.clear();
  slabs_.clear();
  for (auto& p : partial_) p.clear();
  mapped_ = 0;
  free_ranges_.clear();
  if (size_) free_ranges_[base_] = size_;
}

}  // namespace rgpu::server
