// A session's address windows: one per virtual device of the client (AddressWindow requests), each
// with its sub-allocator (server/device_heap.h).  Two virtual devices naming the same GPU have two
// windows.  A window's address range is reserved in the backend at its first allocation, and given
// back at a device reset or the end of the session.
//
// A client that never named a window (an older or a raw one) gets a default window per GPU:
// kDefaultBase + GPU index x kDefaultSize, the layout rgpu's client uses for one server.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "backend/executor.h"
#include "server/device_heap.h"

namespace rgpu::server {

class AddressWindows {
 public:
  static constexpr uint64_t kDefaultBase = 0x500000000000ull;
  static constexpr uint64_t kDefaultSize = 1ull << 40;     // 1 TiB
  static constexpr uint64_t kUserTop = 0x800000000000ull;  // end of user address space (x86-64)
  static constexpr size_t kMaxWindows = 256;

  explicit AddressWindows(backend::Executor& exec) : exec_(exec) {}
  ~AddressWindows() { release_all(); }
  AddressWindows(const AddressWindows&) = delete;
  AddressWindows& operator=(const AddressWindows&) = delete;

  // Names a window; the same window named again is fine, an overlapping one is refused.
  backend::Status add(uint32_t dev, uint64_t base, uint64_t size);
  // An allocation of `size` (> 0) bytes on GPU `dev` inside `window` (its base; 0: the default).
  backend::Status alloc(uint32_t dev, uint64_t window, uint64_t size, uint64_t& ptr);
  // Address space of `size` bytes inside `window` (as alloc) with nothing mapped, for memory the
  // caller maps itself (an IPC import); unreserve gives it back.
  backend::Status reserve(uint32_t dev, uint64_t window, uint64_t size, uint64_t& addr);
  void unreserve(uint32_t dev, uint64_t addr, uint64_t size);
  // The base of GPU `dev`'s window that holds `ptr` (0, the default window, when none does).
  uint64_t window_at(uint32_t dev, uint64_t ptr) const;
  // Frees the allocation starting at `ptr` on GPU `dev` (the caller synchronized the GPU).
  backend::Status free(uint32_t dev, uint64_t ptr);
  // The allocation starting at `ptr` on GPU `dev` is shared with other processes: its mapping
  // (`mapping`, `length`) is never handed out again (DeviceHeap::share).
  backend::Status share(uint32_t dev, uint64_t ptr, uint64_t& mapping, uint64_t& length);
  // Whether the allocation starting at `ptr` lies in a shared mapping (DeviceHeap::shared).
  bool shared(uint32_t dev, uint64_t ptr) const;
  // Unmaps every allocation of GPU `dev` and releases its windows' reservations (cudaDeviceReset);
  // the windows stay named and are reserved again at their next allocation.
  void release_device(uint32_t dev);
  void release_all();
  // Gives back the memory GPU `dev`'s heaps keep mapped for reuse (DeviceHeap::trim).
  void trim(uint32_t dev);

 private:
  struct Window;
  class WindowMapper : public Mapper {
   public:
    WindowMapper(backend::Executor& exec, int dev) : exec_(exec), dev_(dev) {}
    backend::Status map(uint64_t addr, uint64_t size) override;
    backend::Status unmap(uint64_t addr, uint64_t size) override;

   private:
    backend::Executor& exec_;
    int dev_;
  };
  struct Window {
    uint32_t dev = 0;
    uint64_t size = 0;
    std::unique_ptr<WindowMapper> mapper;
    std::unique_ptr<DeviceHeap> heap;  // null until the range is reserved
  };
  void release(uint64_t base, Window& w);
  // The heap of `window` (0: GPU `dev`'s default), its range reserved at first use.
  backend::Status heap_of(uint32_t dev, uint64_t window, DeviceHeap*& heap);
  // The heap of GPU `dev` whose window holds `ptr` (null: none, or not reserved).
  DeviceHeap* heap_at(uint32_t dev, uint64_t ptr) const;

  backend::Executor& exec_;
  std::map<uint64_t, Window> windows_;  // by base
};

}  // namespace rgpu::server
