#include "server/address_windows.h"

#include <cstdio>
#include <string>

#include "common/log.h"

namespace rgpu::server {

using backend::Status;

namespace {

std::string hex(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

Status invalid(std::string what) { return Status::fail(err::InvalidValue, std::move(what)); }

}  // namespace

Status AddressWindows::WindowMapper::map(uint64_t addr, uint64_t size) {
  return exec_.mem_map(dev_, addr, size);
}

Status AddressWindows::WindowMapper::unmap(uint64_t addr, uint64_t size) {
  Status s = exec_.mem_unmap(dev_, addr, size);
  if (!s.ok())
    LOG_WARN("unmapping %llu bytes at %s failed: %s", static_cast<unsigned long long>(size),
             hex(addr).c_str(), s.message.c_str());
  return s;
}

Status AddressWindows::add(uint32_t dev, uint64_t base, uint64_t size) {
  if (dev >= static_cast<uint32_t>(exec_.device_count()))
    return Status::fail(err::InvalidDevice, "address window for GPU " + std::to_string(dev) +
                                                ", which this server does not have");
  uint64_t granule = 0;
  if (Status s = exec_.mem_granularity(static_cast<int>(dev), granule); !s.ok()) return s;
  if (size == 0 || base == 0 || base % granule || size % granule)
    return invalid("address window " + hex(base) + " of " + std::to_string(size) +
                   " bytes: base and size must be non-zero multiples of the GPU's granularity (" +
                   std::to_string(granule) + " bytes)");
  if (base >= kUserTop || size > kUserTop - base)
    return invalid("address window " + hex(base) + " of " + std::to_string(size) +
                   " bytes ends beyond the user address space (" + hex(kUserTop) + ")");
  auto next = windows_.lower_bound(base);
  if (next != windows_.end() && next->first == base && next->second.size == size &&
      next->second.dev == dev)
    return Status::success();  // named again
  if (next != windows_.end() && next->first < base + size)
    return invalid("address window " + hex(base) + " overlaps the window at " + hex(next->first));
  if (next != windows_.begin() && std::prev(next)->first + std::prev(next)->second.size > base)
    return invalid("address window " + hex(base) + " overlaps the window at " +
                   hex(std::prev(next)->first));
  if (windows_.size() >= kMaxWindows)
    return invalid("more than " + std::to_string(kMaxWindows) + " address windows");
  Window w;
  w.dev = dev;
  w.size = size;
  w.mapper = std::make_unique<WindowMapper>(exec_, static_cast<int>(dev));
  windows_.emplace(base, std::move(w));
  return Status::success();
}

Status AddressWindows::heap_of(uint32_t dev, uint64_t window, DeviceHeap*& heap) {
  if (window == 0) {
    if (dev >= (kUserTop - kDefaultBase) / kDefaultSize)
      return invalid("GPU " + std::to_string(dev) + " has no default address window");
    window = kDefaultBase + dev * kDefaultSize;
    if (!windows_.count(window))
      if (Status s = add(dev, window, kDefaultSize); !s.ok()) return s;
  }
  auto it = windows_.find(window);
  if (it == windows_.end())
    return invalid("allocation in address window " + hex(window) + ", which was never named");
  Window& w = it->second;
  if (w.dev != dev)
    return invalid("address window " + hex(window) + " belongs to GPU " + std::to_string(w.dev) +
                   ", not GPU " + std::to_string(dev));
  if (!w.heap) {
    uint64_t granule = 0;
    if (Status s = exec_.mem_granularity(static_cast<int>(dev), granule); !s.ok()) return s;
    if (Status s = exec_.va_reserve(static_cast<int>(dev), window, w.size); !s.ok()) return s;
    w.heap = std::make_unique<DeviceHeap>(window, w.size, granule, *w.mapper);
  }
  heap = w.heap.get();
  return Status::success();
}

Status AddressWindows::alloc(uint32_t dev, uint64_t window, uint64_t size, uint64_t& ptr) {
  DeviceHeap* heap = nullptr;
  if (Status s = heap_of(dev, window, heap); !s.ok()) return s;
  return heap->alloc(size, ptr);
}

Status AddressWindows::reserve(uint32_t dev, uint64_t window, uint64_t size, uint64_t& addr) {
  DeviceHeap* heap = nullptr;
  if (Status s = heap_of(dev, window, heap); !s.ok()) return s;
  return heap->reserve(size, addr);
}

uint64_t AddressWindows::window_at(uint32_t dev, uint64_t ptr) const {
  auto it = windows_.upper_bound(ptr);
  if (it == windows_.begin()) return 0;
  --it;
  return it->second.dev == dev && ptr - it->first < it->second.size ? it->first : 0;
}

void AddressWindows::unreserve(uint32_t dev, uint64_t addr, uint64_t size) {
  auto it = windows_.upper_bound(addr);
  if (it == windows_.begin()) return;
  --it;
  Window& w = it->second;
  if (w.dev == dev && w.heap && w.heap->contains(addr)) w.heap->unreserve(addr, size);
}

DeviceHeap* AddressWindows::heap_at(uint32_t dev, uint64_t ptr) const {
  auto it = windows_.upper_bound(ptr);
  if (it == windows_.begin()) return nullptr;
  --it;
  const Window& w = it->second;
  return w.dev == dev && w.heap && w.heap->contains(ptr) ? w.heap.get() : nullptr;
}

Status AddressWindows::free(uint32_t dev, uint64_t ptr) {
  if (DeviceHeap* heap = heap_at(dev, ptr)) return heap->free(ptr);
  return invalid("free of " + hex(ptr) + ", which is not in an address window of GPU " +
                 std::to_string(dev));
}

Status AddressWindows::share(uint32_t dev, uint64_t ptr, uint64_t& mapping, uint64_t& length) {
  if (DeviceHeap* heap = heap_at(dev, ptr)) return heap->share(ptr, mapping, length);
  return invalid(hex(ptr) + " is not in an address window of GPU " + std::to_string(dev));
}

bool AddressWindows::shared(uint32_t dev, uint64_t ptr) const {
  const DeviceHeap* heap = heap_at(dev, ptr);
  return heap && heap->shared(ptr);
}

void AddressWindows::release(uint64_t base, Window& w) {
  if (!w.heap) return;
  w.heap->release_all();
  w.heap.reset();
  if (Status s = exec_.va_release(static_cast<int>(w.dev), base, w.size); !s.ok())
    LOG_WARN("releasing the address window at %s failed: %s", hex(base).c_str(), s.message.c_str());
}

void AddressWindows::release_device(uint32_t dev) {
  for (auto& [base, w] : windows_)
    if (w.dev == dev) release(base, w);
}

void AddressWindows::trim(uint32_t dev) {
  for (auto& [base, w] : windows_)
    if (w.dev == dev && w.heap) w.heap->trim();
}

void AddressWindows::release_all() {
  for (auto& [base, w] : windows_) release(base, w);
}

}  // namespace rgpu::server
