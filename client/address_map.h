// Where a pointer lives, as far as this process knows: device allocations (per virtual device) and
// page-locked host memory (cudaMallocHost / cudaHostAlloc / cudaHostRegister).  Anything else is
// ordinary pageable host memory.
//
// Every virtual device's address window (where its server places its allocations) is reserved
// PROT_NONE in this process when the configuration is loaded, and device ranges outside the windows
// (module variables, placed by the driver) are reserved as they appear, so the client's own memory
// can never appear at an address that names device memory (cudaMemcpyDefault and
// cudaPointerGetAttributes stay unambiguous).  Reservations are kept for the life of the process:
// they cost address space only.  No two ranges overlap: one that would is refused.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

namespace rgpu::client {

struct DeviceRange {
  uint64_t base = 0;
  uint64_t size = 0;
  int device = 0;
  bool freeable = true;  // false for module variables (__device__, __constant__)
  uint64_t id = 0;       // set by add_device: unique in the process, never reused
  bool vmm = false;      // a cuMemMap mapping: a range may run on into the mapping after it
};

struct HostRange {
  uint64_t base = 0;
  uint64_t size = 0;
  unsigned flags = 0;
  bool registered = false;     // cudaHostRegister (else allocated by us)
  int device = 0;              // current device when it was made page-locked
  uint64_t segment = 0;        // shared with a co-located server (shm transport), else 0
  const void* link = nullptr;  // the ServerLink that maps the segment
  bool mapped = false;         // the session maps it at this address for its GPUs (kernels)
  uint64_t id = 0;             // set by add_host: unique in the process, never reused
};

class AddressMap {
 public:
  // Reserves [base, base + size) PROT_NONE (fixed, never replacing a mapping of this process);
  // false with `error` set when the range is not free.
  bool reserve_window(uint64_t base, uint64_t size, std::string* error);
  // False (nothing added) when the range is empty or overlaps a device or page-locked host range.
  bool add_device(const DeviceRange& r);
  std::optional<DeviceRange> remove_device(uint64_t base);
  // Whether [p, p + n) overlaps a device or page-locked host range (a slab the server placed
  // for small allocations must not).
  bool overlaps_known(uint64_t p, uint64_t n) const;
  // The allocation containing p, if any.
  std::optional<DeviceRange> find_device(uint64_t p) const;
  // True when [p, p+n) lies in one allocation of `device` (any device when device < 0), or in
  // cuMemMap mappings of one device that follow each other without a gap.
  bool device_range_ok(uint64_t p, uint64_t n, int* device) const;
  std::vector<DeviceRange> device_allocations(int device) const;

  // False when it overlaps a page-locked host range or a device range.
  bool add_host(const HostRange& r);
  std::optional<HostRange> remove_host(uint64_t base);
  std::optional<HostRange> find_host(uint64_t p) const;
  // Whether any page-locked host range is not mapped for the GPU (kernels cannot use it): a
  // lock-free test that keeps the per-launch argument check (Client::unreachable_host_argument)
  // free when there is none.
  bool has_unmapped_host() const { return unmapped_host_.load(std::memory_order_acquire) > 0; }

 private:
  void reserve_locked(uint64_t base, uint64_t size);
  mutable std::shared_mutex mu_;
  std::map<uint64_t, DeviceRange> device_;
  std::map<uint64_t, HostRange> host_;
  std::atomic<int> unmapped_host_{0};
  uint64_t next_id_ = 1;                   // the next range's id (CU_POINTER_ATTRIBUTE_BUFFER_ID)
  std::map<uint64_t, uint64_t> reserved_;  // page ranges held PROT_NONE: base -> end
};

}  // namespace rgpu::client
