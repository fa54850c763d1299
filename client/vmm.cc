// The driver's virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap, ...) on the
// client: reservations and handles are remembered here (which device's server holds them), mapped
// ranges enter the address map as device memory; the server does the rest (server/vmm.cc).
#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

bool Client::vmm_reservation_of(uint64_t addr, uint64_t size, VmmReservation* out) {
  std::lock_guard<std::mutex> lock(vmm_mu_);
  auto it = vmm_reserved_.upper_bound(addr);
  if (it == vmm_reserved_.begin()) return false;
  --it;
  uint64_t off = addr - it->first;
  if (off >= it->second.size || size > it->second.size - off) return false;
  *out = it->second;
  return true;
}

void Client::vmm_forget(const std::vector<uint64_t>& unmapped,
                        const std::vector<uint64_t>& released) {
  for (uint64_t a : unmapped) map_.remove_device(a);
  std::lock_guard<std::mutex> lock(vmm_mu_);
  for (uint64_t h : released) vmm_handles_.erase(h);
}

void Client::vmm_forget_device(int dev) {
  std::lock_guard<std::mutex> lock(vmm_mu_);
  for (auto it = vmm_handles_.begin(); it != vmm_handles_.end();)
    it = it->second.device == dev ? vmm_handles_.erase(it) : std::next(it);
  for (auto it = vmm_reserved_.begin(); it != vmm_reserved_.end();)
    it = it->second.device == dev ? vmm_reserved_.erase(it) : std::next(it);
}

CudaError Client::vmm_granularity(int dev, bool recommended, uint64_t* granularity) {
  if (CudaError e = check_device(dev); e != err::Success) return e;
  VmmGranularityRep rep;
  CudaError e = forward<VmmGranularityMsg>(dev, {0, recommended ? 1u : 0u}, &rep);
  if (e == err::Success) *granularity = rep.granularity;
  return e;
}

CudaError Client::vmm_reserve(int dev, uint64_t size, uint64_t alignment, uint64_t* addr) {
  if (CudaError e = check_device(dev); e != err::Success) return e;
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  if (e = name_window(dev, l); e != err::Success) return e;
  const DeviceSpec& spec = devices_[dev].spec;
  VmmReserveRep rep;
  e = l->call<VmmReserveMsg>(VmmReserveReq{spec.gpu, spec.window_base, size, alignment}, &rep);
  if (e != err::Success) return e;
  // Nothing from a server is trusted: the range must lie in the device's window.
  if (rep.addr < spec.window_base || rep.addr - spec.window_base >= spec.window_size ||
      size > spec.window_size - (rep.addr - spec.window_base)) {
    LOG_ERROR(
        "device %d ('%s'): the server reserved %llu bytes at 0x%llx, outside the device's "
        "address window; refused",
        dev, spec.text.c_str(), static_cast<unsigned long long>(size),
        static_cast<unsigned long long>(rep.addr));
    l->call<VmmAddressFreeMsg>(VmmAddressFreeReq{spec.gpu, rep.addr, size});
    return err::Unknown;
  }
  {
    std::lock_guard<std::mutex> lock(vmm_mu_);
    vmm_reserved_[rep.addr] = VmmReservation{dev, size};
  }
  *addr = rep.addr;
  return err::Success;
}

CudaError Client::vmm_address_free(uint64_t addr, uint64_t size) {
  VmmReservation r;
  {
    std::lock_guard<std::mutex> lock(vmm_mu_);
    auto it = vmm_reserved_.find(addr);
    if (it == vmm_reserved_.end() || it->second.size != size) return err::InvalidValue;
    r = it->second;
  }
  CudaError e = forward<VmmAddressFreeMsg>(r.device, {0, addr, size});
  if (e != err::Success) return e;
  std::lock_guard<std::mutex> lock(vmm_mu_);
  vmm_reserved_.erase(addr);
  return err::Success;
}

CudaError Client::vmm_create(int dev, uint64_t size, uint32_t handle_types, uint64_t* handle) {
  if (CudaError e = check_device(dev); e != err::Success) return e;
  uint64_t h;
  {
    std::lock_guard<std::mutex> lock(vmm_mu_);
    h = vmm_next_handle_++;
  }
  CudaError e = forward<VmmCreateMsg>(dev, {0, h, size, handle_types});
  if (e != err::Success) return e;
  {
    std::lock_guard<std::mutex> lock(vmm_mu_);
    vmm_handles_[h] = VmmProperties{dev, size, handle_types};
  }
  *handle = h;
  return err::Success;
}

CudaError Client::vmm_properties(uint64_t handle, VmmProperties* out) {
  std::lock_guard<std::mutex> lock(vmm_mu_);
  auto it = vmm_handles_.find(handle);
  if (it == vmm_handles_.end()) return err::InvalidValue;
  *out = it->second;
  return err::Success;
}

CudaError Client::vmm_release(uint64_t handle) {
  VmmProperties p;
  if (CudaError e = vmm_properties(handle, &p); e != err::Success) return e;
  VmmReleaseRep rep;
  CudaError e = forward<VmmReleaseMsg>(p.device, {0, handle}, &rep);
  if (e == err::Success && rep.gone) vmm_forget({}, {handle});
  return e;
}

CudaError Client::vmm_map(uint64_t addr, uint64_t size, uint64_t offset, uint64_t handle) {
  VmmProperties p;
  if (CudaError e = vmm_properties(handle, &p); e != err::Success) return e;
  VmmReservation r;
  if (!vmm_reservation_of(addr, size, &r)) return err::InvalidValue;
  if (r.device != p.device) {
    if (first_time("vmm-map-device"))
      LOG_ERROR(
          "cuMemMap: rgpu maps an allocation only into a reservation made while its device "
          "was current (reservation: device %d, allocation: device %d)",
          r.device, p.device);
    return err::NotSupported;
  }
  CudaError e = forward<VmmMapMsg>(p.device, {0, addr, size, offset, handle});
  if (e != err::Success) return e;
  DeviceRange d{addr, size, p.device, /*freeable=*/false};
  d.vmm = true;
  if (!map_.add_device(d)) {
    LOG_ERROR("cuMemMap at 0x%llx: the range overlaps memory this process already knows",
              static_cast<unsigned long long>(addr));
    VmmUnmapRep rep;
    forward<VmmUnmapMsg>(p.device, {0, addr, size}, &rep);
    return err::Unknown;
  }
  return err::Success;
}

CudaError Client::vmm_unmap(uint64_t addr, uint64_t size) {
  VmmReservation r;
  if (!vmm_reservation_of(addr, size, &r)) return err::InvalidValue;
  VmmUnmapRep rep;
  CudaError e = forward<VmmUnmapMsg>(r.device, {0, addr, size}, &rep);
  vmm_forget(rep.unmapped, rep.released);
  return e;
}

CudaError Client::vmm_set_access(uint64_t addr, uint64_t size, int peer, uint32_t flags) {
  VmmReservation r;
  if (!vmm_reservation_of(addr, size, &r)) return err::InvalidValue;
  if (CudaError e = check_device(peer); e != err::Success) return e;
  CudaError e;
  ServerLink* l = link(r.device, &e);
  if (!l) return e;
  if (link(peer, &e) != l) {
    if (first_time("vmm-access-server"))
      LOG_ERROR("cuMemSetAccess: device %d is on another server than the memory (device %d)", peer,
                r.device);
    return e != err::Success ? e : err::InvalidDevice;
  }
  return forward<VmmSetAccessMsg>(r.device, {0, addr, size, devices_[peer].spec.gpu, flags});
}

CudaError Client::vmm_get_access(uint64_t addr, int peer, uint32_t* flags) {
  VmmReservation r;
  if (!vmm_reservation_of(addr, 0, &r)) return err::InvalidValue;
  if (CudaError e = check_device(peer); e != err::Success) return e;
  CudaError e;
  ServerLink* l = link(r.device, &e);
  if (!l) return e;
  if (link(peer, &e) != l) {  // another server's GPU cannot reach it
    *flags = 0;
    return err::Success;
  }
  VmmGetAccessRep rep;
  e = forward<VmmGetAccessMsg>(r.device, {0, addr, devices_[peer].spec.gpu}, &rep);
  if (e == err::Success) *flags = rep.flags;
  return e;
}

CudaError Client::vmm_retain(uint64_t addr, uint64_t* handle) {
  VmmReservation r;
  if (!vmm_reservation_of(addr, 0, &r)) return err::InvalidValue;
  VmmRetainRep rep;
  CudaError e = forward<VmmRetainMsg>(r.device, {0, addr}, &rep);
  if (e == err::Success) *handle = rep.handle;
  return e;
}

}  // namespace rgpu::client
