// The host backend's virtual memory management (Executor::vmm_*): a physical allocation is a memfd,
// a mapping is that memfd mapped MAP_SHARED|MAP_FIXED_NOREPLACE at the address (so one allocation
// mapped twice shows the same bytes at both), PROT_NONE until cuMemSetAccess gives the owning GPU
// access (then mprotect).  The window itself is bookkeeping only (HostExecutor::va_reserve), so a
// mapping never replaces anything of this process.  Charging the capacity ledger is the caller's.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "backend/executor.h"

namespace rgpu::backend {

class HostVmm {
 public:
  ~HostVmm();
  Status create(uint64_t size, uint64_t& handle);
  // The handle's size (0: no such handle).
  uint64_t size_of(uint64_t handle) const;
  Status release(uint64_t handle);
  Status map(uint64_t addr, uint64_t size, uint64_t offset, uint64_t handle);
  Status unmap(uint64_t addr, uint64_t size);
  Status protect(uint64_t addr, uint64_t size, uint32_t flags);  // CUmemAccess_flags

 private:
  struct Alloc {
    int fd = -1;
    uint64_t size = 0;
  };
  mutable std::mutex mu_;
  std::map<uint64_t, Alloc> allocs_;     // by handle
  std::map<uint64_t, uint64_t> mapped_;  // address -> bytes
  uint64_t next_ = 1;
};

}  // namespace rgpu::backend
