// Messages of the vmm group (issue 12/13): the driver's virtual memory management calls
// (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess, ...) on a session's address windows.
// Included from proto/messages.h; ids 0x1300-0x13FF (proto/catalogue.def).
//
// Physical allocations are named by the client's handle (its CUmemGenericAllocationHandle value,
// unique in the client process); reservations and mappings by their addresses.
#pragma once

#include <cstdint>
#include <vector>

#include "proto/wire.h"

namespace rgpu::proto {

// ---- vmm
// cuMemGetAllocationGranularity for pinned device memory of GPU `device`; `recommended` selects
// CU_MEM_ALLOC_GRANULARITY_RECOMMENDED.
struct VmmGranularityReq {
  uint32_t device = 0;
  uint32_t recommended = 0;
  RGPU_FIELDS(device, recommended)
};
struct VmmGranularityRep {
  uint64_t minimum = 0;
  uint64_t granularity = 0;  // what was asked for
  RGPU_FIELDS(minimum, granularity)
};
// Address space of `size` bytes (a multiple of the granularity) inside address window `window`
// of GPU `device`, at a multiple of `alignment` (0: the granularity), nothing mapped.
struct VmmReserveReq {
  uint32_t device = 0;
  uint64_t window = 0;
  uint64_t size = 0;
  uint64_t alignment = 0;
  RGPU_FIELDS(device, window, size, alignment)
};
struct VmmReserveRep {
  uint64_t addr = 0;
  RGPU_FIELDS(addr)
};
// Gives a reservation back (`size` as reserved; nothing may be mapped in it any more).
struct VmmAddressFreeReq {
  uint32_t device = 0;
  uint64_t addr = 0;
  uint64_t size = 0;
  RGPU_FIELDS(device, addr, size)
};
using VmmAddressFreeRep = Empty;
// cuMemCreate: `size` bytes of GPU `device`'s memory, named `handle` from now on.
struct VmmCreateReq {
  uint32_t device = 0;
  uint64_t handle = 0;
  uint64_t size = 0;
  uint32_t handle_types = 0;  // CUmemAllocationHandleType bits asked for
  RGPU_FIELDS(device, handle, size, handle_types)
};
using VmmCreateRep = Empty;
// Drops one reference to `handle` (cuMemRelease; cuMemRetainAllocationHandle took one more).
struct VmmReleaseReq {
  uint32_t device = 0;
  uint64_t handle = 0;
  RGPU_FIELDS(device, handle)
};
struct VmmReleaseRep {
  uint32_t gone = 0;  // 1: that was the last reference (no mapping keeps it)
  RGPU_FIELDS(gone)
};
// cuMemMap: [addr, addr + size) of a reservation onto `handle`'s memory from `offset`.
struct VmmMapReq {
  uint32_t device = 0;
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t offset = 0;
  uint64_t handle = 0;
  RGPU_FIELDS(device, addr, size, offset, handle)
};
using VmmMapRep = Empty;
// cuMemUnmap: every mapping in [addr, addr + size) (none lying partly outside it).
struct VmmUnmapReq {
  uint32_t device = 0;
  uint64_t addr = 0;
  uint64_t size = 0;
  RGPU_FIELDS(device, addr, size)
};
struct VmmUnmapRep {
  std::vector<uint64_t> unmapped;  // the mappings' start addresses
  std::vector<uint64_t> released;  // handles whose last reference went with them
  RGPU_FIELDS(unmapped, released)
};
// cuMemSetAccess for GPU `peer` (a GPU of this server) over [addr, addr + size), which must be
// mapped throughout; `flags`: CUmemAccess_flags.
struct VmmSetAccessReq {
  uint32_t device = 0;
  uint64_t addr = 0;
  uint64_t size = 0;
  uint32_t peer = 0;
  uint32_t flags = 0;
  RGPU_FIELDS(device, addr, size, peer, flags)
};
using VmmSetAccessRep = Empty;
// cuMemGetAccess of GPU `peer` at `addr` (mapped).
struct VmmGetAccessReq {
  uint32_t device = 0;
  uint64_t addr = 0;
  uint32_t peer = 0;
  RGPU_FIELDS(device, addr, peer)
};
struct VmmGetAccessRep {
  uint32_t flags = 0;
  RGPU_FIELDS(flags)
};
// cuMemRetainAllocationHandle: the handle mapped at `addr`, one more reference taken.
struct VmmRetainReq {
  uint32_t device = 0;
  uint64_t addr = 0;
  RGPU_FIELDS(device, addr)
};
struct VmmRetainRep {
  uint64_t handle = 0;
  RGPU_FIELDS(handle)
};

}  // namespace rgpu::proto
