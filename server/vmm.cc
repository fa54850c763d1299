// The driver's virtual memory management for the program (cuMemAddressReserve, cuMemCreate,
// cuMemMap, cuMemSetAccess, ...): the handlers of the vmm group.  Reservations are address space of
// the client's window (AddressWindows::reserve, nothing mapped, as for IPC imports); physical
// allocations and mappings are the backend's (Executor::vmm_*).  A mapped range is device memory
// for requests once a GPU has access to it (allocs_ of that GPU, joinable with the mappings beside
// it); unmapping takes it out again.
#include <cstdio>
#include <string>

#include "common/log.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {

constexpr uint32_t kHandleTypePosixFd = 1;  // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR

std::string hex(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

Status invalid(const std::string& what) { return Status::fail(err::InvalidValue, what); }

}  // namespace

Status Session::on(VmmGranularityMsg, const VmmGranularityReq& q, VmmGranularityRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  int dev = static_cast<int>(q.device);
  if (Status s = exec_.vmm_granularity(dev, false, rep.minimum); !s.ok()) return s;
  if (!q.recommended) {
    rep.granularity = rep.minimum;
    return Status::success();
  }
  return exec_.vmm_granularity(dev, true, rep.granularity);
}

Status Session::on(VmmReserveMsg, const VmmReserveReq& q, VmmReserveRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  uint64_t granule = 0;
  if (Status s = exec_.mem_granularity(static_cast<int>(q.device), granule); !s.ok()) return s;
  if (q.size == 0 || q.size % granule)
    return invalid("cuMemAddressReserve of " + std::to_string(q.size) +
                   " bytes: not a non-zero multiple of the granularity (" +
                   std::to_string(granule) + ")");
  if (q.alignment & (q.alignment - 1))
    return invalid("cuMemAddressReserve: alignment " + std::to_string(q.alignment) +
                   " is not a power of two");
  const uint64_t align = q.alignment > granule ? q.alignment : granule;
  if (q.size > (1ull << 46) || align > (1ull << 40))
    return Status::fail(err::MemoryAllocation, "cuMemAddressReserve of " + std::to_string(q.size) +
                                                   " bytes aligned to " + std::to_string(align) +
                                                   ": more than a device's address window holds");
  VmmReservation r;
  r.device = q.device;
  r.size = q.size;
  r.taken_size = q.size + (align - granule);
  {
    std::lock_guard<std::timed_mutex> lock(heap_mu_);
    if (Status s = windows_.reserve(q.device, q.window, r.taken_size, r.taken); !s.ok()) {
      if (s.code == err::InvalidValue) s.code = err::MemoryAllocation;  // the window is full
      return s;
    }
  }
  rep.addr = (r.taken + align - 1) / align * align;
  vmm_reserved_[rep.addr] = r;
  return Status::success();
}

Status Session::on(VmmAddressFreeMsg, const VmmAddressFreeReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  auto it = vmm_reserved_.find(q.addr);
  if (it == vmm_reserved_.end() || it->second.device != q.device || it->second.size != q.size)
    return invalid("cuMemAddressFree of " + std::to_string(q.size) + " bytes at " + hex(q.addr) +
                   ": no such reservation");
  // As NVIDIA's driver: a reservation with mappings left is not freed.
  auto m = vmm_mapped_.lower_bound(q.addr);
  if (m != vmm_mapped_.end() && m->first < q.addr + q.size)
    return invalid("cuMemAddressFree at " + hex(q.addr) + ": the range still has mappings " +
                   "(cuMemUnmap them first)");
  {
    std::lock_guard<std::timed_mutex> lock(heap_mu_);
    windows_.unreserve(q.device, it->second.taken, it->second.taken_size);
  }
  vmm_reserved_.erase(it);
  return Status::success();
}

Status Session::on(VmmCreateMsg, const VmmCreateReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  uint64_t granule = 0;
  if (Status s = exec_.mem_granularity(static_cast<int>(q.device), granule); !s.ok()) return s;
  if (q.size == 0 || q.size % granule)
    return invalid("cuMemCreate of " + std::to_string(q.size) +
                   " bytes: not a non-zero multiple of the granularity (" +
                   std::to_string(granule) + ")");
  if (q.handle == 0 || vmm_handles_.count(q.handle))
    return invalid("cuMemCreate: handle " + hex(q.handle) + " is in use");
  if (Status s = charge_memory(Hold::Vmm, q.device, q.size,
                               "cuMemCreate of " + std::to_string(q.size) + " bytes");
      !s.ok())
    return s;
  VmmHandle h;
  h.device = q.device;
  h.size = q.size;
  if (Status s = exec_.vmm_create(static_cast<int>(q.device), q.size,
                                  (q.handle_types & kHandleTypePosixFd) != 0, h.backend);
      !s.ok()) {
    quota_.release(Hold::Vmm, q.device, q.size);
    return s;
  }
  vmm_handles_[q.handle] = h;
  return Status::success();
}

void Session::vmm_unref(uint64_t handle, std::vector<uint64_t>* released) {
  auto it = vmm_handles_.find(handle);
  if (it == vmm_handles_.end() || --it->second.refs > 0) return;
  if (Status s = exec_.vmm_release(static_cast<int>(it->second.device), it->second.backend);
      !s.ok())
    LOG_WARN("releasing a physical allocation failed: %s", s.message.c_str());
  quota_.release(Hold::Vmm, it->second.device, it->second.size);
  if (released) released->push_back(handle);
  vmm_handles_.erase(it);
}

Status Session::on(VmmReleaseMsg, const VmmReleaseReq& q, VmmReleaseRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  auto it = vmm_handles_.find(q.handle);
  if (it == vmm_handles_.end() || it->second.device != q.device)
    return invalid("cuMemRelease of " + hex(q.handle) + ", which is no allocation handle");
  std::vector<uint64_t> released;
  vmm_unref(q.handle, &released);
  rep.gone = released.empty() ? 0 : 1;
  return Status::success();
}

Status Session::on(VmmMapMsg, const VmmMapReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  auto h = vmm_handles_.find(q.handle);
  if (h == vmm_handles_.end())
    return invalid("cuMemMap of " + hex(q.handle) + ", which is no allocation handle");
  if (q.offset != 0 || q.size != h->second.size)  // as NVIDIA's driver answers (CUDA 13)
    return Status::fail(err::NotSupported,
                        "cuMemMap of " + std::to_string(q.size) + " bytes from offset " +
                            std::to_string(q.offset) + " of an allocation of " +
                            std::to_string(h->second.size) +
                            " bytes: a mapping is the whole allocation from offset 0");
  uint64_t granule = 0;
  if (Status s = exec_.mem_granularity(static_cast<int>(q.device), granule); !s.ok()) return s;
  if (q.size == 0 || q.addr % granule || q.size % granule || q.offset % granule)
    return invalid("cuMemMap of " + std::to_string(q.size) + " bytes at " + hex(q.addr) +
                   " (offset " + std::to_string(q.offset) +
                   "): address, size and offset must be multiples of the granularity (" +
                   std::to_string(granule) + ")");
  auto r = vmm_reserved_.upper_bound(q.addr);
  if (r == vmm_reserved_.begin() || (--r, q.addr - r->first >= r->second.size) ||
      q.size > r->second.size - (q.addr - r->first))
    return invalid("cuMemMap at " + hex(q.addr) + " of " + std::to_string(q.size) +
                   " bytes: not inside a reservation (cuMemAddressReserve)");
  if (r->second.device != q.device || h->second.device != q.device)
    return Status::fail(err::NotSupported,
                        "cuMemMap: rgpu maps an allocation only into a reservation made for its "
                        "own device (the current context's when it was reserved)");
  auto next = vmm_mapped_.lower_bound(q.addr);
  if ((next != vmm_mapped_.end() && next->first < q.addr + q.size) ||
      (next != vmm_mapped_.begin() &&
       std::prev(next)->first + std::prev(next)->second.size > q.addr))
    return invalid("cuMemMap at " + hex(q.addr) + ": the range is already mapped (in part)");
  if (Status s =
          exec_.vmm_map(static_cast<int>(q.device), q.addr, q.size, q.offset, h->second.backend);
      !s.ok())
    return s;
  ++h->second.refs;
  vmm_mapped_[q.addr] = VmmMapping{q.device, q.size, q.handle, {}};
  return Status::success();
}

Status Session::vmm_unmap_one(uint64_t addr, std::vector<uint64_t>& released) {
  auto it = vmm_mapped_.find(addr);
  if (it == vmm_mapped_.end()) return invalid("no mapping at " + hex(addr));
  VmmMapping& m = it->second;
  for (auto& [gpu, flags] : m.access) allocs_[gpu].remove(addr);
  Status s = exec_.vmm_unmap(static_cast<int>(m.device), addr, m.size);
  if (!s.ok()) LOG_WARN("unmapping %s failed: %s", hex(addr).c_str(), s.message.c_str());
  uint64_t handle = m.handle;
  vmm_mapped_.erase(it);
  vmm_unref(handle, &released);
  return s;
}

Status Session::on(VmmUnmapMsg, const VmmUnmapReq& q, VmmUnmapRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  // Every mapping the range meets must lie in it whole; a range without mappings is no error
  // (NVIDIA's driver answers success too).
  std::vector<uint64_t> starts;
  if (q.size == 0 || q.addr > UINT64_MAX - q.size) return invalid("cuMemUnmap: bad range");
  auto it = vmm_mapped_.lower_bound(q.addr);
  if (it != vmm_mapped_.begin() && std::prev(it)->first + std::prev(it)->second.size > q.addr) --it;
  for (; it != vmm_mapped_.end() && it->first < q.addr + q.size; ++it) {
    if (it->first < q.addr || it->second.size > q.addr + q.size - it->first ||
        it->second.device != q.device)
      return invalid("cuMemUnmap of " + std::to_string(q.size) + " bytes at " + hex(q.addr) +
                     ": the mapping at " + hex(it->first) + " lies partly outside it");
    starts.push_back(it->first);
  }
  Status result = Status::success();
  for (uint64_t a : starts) {
    Status s = vmm_unmap_one(a, rep.released);
    if (s.ok()) rep.unmapped.push_back(a);
    if (!s.ok() && result.ok()) result = s;
  }
  return result;
}

Status Session::on(VmmSetAccessMsg, const VmmSetAccessReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (Status s = check_device(q.peer); !s.ok()) return s;
  if (q.flags != 0 && q.flags != 1 && q.flags != 3)
    return invalid("cuMemSetAccess: unknown access flags " + std::to_string(q.flags));
  // Whole mappings, one after the other.
  std::vector<uint64_t> starts;
  uint64_t at = q.addr;
  for (auto it = vmm_mapped_.find(q.addr);
       q.size && it != vmm_mapped_.end() && it->first == at && at - q.addr < q.size; ++it) {
    if (it->second.device != q.device) break;
    starts.push_back(at);
    at += it->second.size;
  }
  if (starts.empty() || at - q.addr != q.size)
    return invalid("cuMemSetAccess of " + std::to_string(q.size) + " bytes at " + hex(q.addr) +
                   ": rgpu sets access on whole mappings (cuMemMap) without gaps");
  for (uint64_t a : starts) {
    VmmMapping& m = vmm_mapped_[a];
    if (Status s = exec_.vmm_set_access(static_cast<int>(q.device), a, m.size,
                                        static_cast<int>(q.peer), q.flags);
        !s.ok())
      return s;
    if (q.flags == 0) {
      if (m.access.erase(q.peer)) allocs_[q.peer].remove(a);
    } else {
      m.access[q.peer] = q.flags;
      allocs_[q.peer].add(a, m.size, /*freeable=*/false, /*joinable=*/true);
    }
  }
  return Status::success();
}

Status Session::on(VmmGetAccessMsg, const VmmGetAccessReq& q, VmmGetAccessRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  auto it = vmm_mapped_.upper_bound(q.addr);
  if (it == vmm_mapped_.begin() || (--it, q.addr - it->first >= it->second.size) ||
      it->second.device != q.device)
    return invalid("cuMemGetAccess at " + hex(q.addr) + ", which is not mapped");
  auto a = it->second.access.find(q.peer);
  rep.flags = a == it->second.access.end() ? 0 : a->second;
  return Status::success();
}

Status Session::on(VmmRetainMsg, const VmmRetainReq& q, VmmRetainRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  auto it = vmm_mapped_.upper_bound(q.addr);
  if (it == vmm_mapped_.begin() || (--it, q.addr - it->first >= it->second.size) ||
      it->second.device != q.device)
    return invalid("cuMemRetainAllocationHandle at " + hex(q.addr) + ", which is not mapped");
  ++vmm_handles_[it->second.handle].refs;
  rep.handle = it->second.handle;
  return Status::success();
}

void Session::close_vmm(uint32_t dev) {
  std::vector<uint64_t> released;
  for (auto it = vmm_mapped_.begin(); it != vmm_mapped_.end();) {
    uint64_t at = (it++)->first;
    if (vmm_mapped_[at].device == dev) vmm_unmap_one(at, released);
  }
  for (auto it = vmm_handles_.begin(); it != vmm_handles_.end();) {
    if (it->second.device != dev) {
      ++it;
      continue;
    }
    exec_.vmm_release(static_cast<int>(dev), it->second.backend);
    quota_.release(Hold::Vmm, dev, it->second.size);
    it = vmm_handles_.erase(it);
  }
  std::lock_guard<std::timed_mutex> lock(heap_mu_);
  for (auto it = vmm_reserved_.begin(); it != vmm_reserved_.end();) {
    if (it->second.device != dev) {
      ++it;
      continue;
    }
    windows_.unreserve(dev, it->second.taken, it->second.taken_size);
    it = vmm_reserved_.erase(it);
  }
}

}  // namespace rgpu::server
