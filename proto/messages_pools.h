// Messages of stream-ordered allocation (memory pools) and mapped page-locked memory (issue 11,
// items 4 and 9).  Included from proto/messages.h; ids 0x0900-0x09FF (proto/catalogue.def).
#pragma once

#include <cstdint>

#include "proto/wire.h"

namespace rgpu::proto {

// ---- pools
// An allocation from pool `pool` of GPU `device` (0: the device's default pool), usable in the
// order of stream `stream` (the client's id; 0: the legacy stream).  The pool places it inside
// the address window `window` (its base; 0: the GPU's default window), the window the pool was
// created for.
struct MallocAsyncReq {
  uint32_t device = 0;
  uint64_t pool = 0;
  uint64_t window = 0;
  uint64_t stream = 0;
  uint64_t size = 0;
  RGPU_FIELDS(device, pool, window, stream, size)
};
struct MallocAsyncRep {
  uint64_t ptr = 0;
  RGPU_FIELDS(ptr)
};
// Returns a pool allocation to its pool once `stream` reaches this point.
struct FreeAsyncReq {
  uint32_t device = 0;
  uint64_t ptr = 0;
  uint64_t stream = 0;
  RGPU_FIELDS(device, ptr, stream)
};
using FreeAsyncRep = Empty;
// A pool named by the client (`pool` != 0, unique on the link) whose allocations land in `window`.
struct MemPoolCreateReq {
  uint32_t device = 0;
  uint64_t pool = 0;
  uint64_t window = 0;
  uint64_t max_size = 0;  // 0: no limit but the window
  RGPU_FIELDS(device, pool, window, max_size)
};
using MemPoolCreateRep = Empty;
struct MemPoolReq {
  uint32_t device = 0;
  uint64_t pool = 0;
  RGPU_FIELDS(device, pool)
};
using MemPoolDestroyReq = MemPoolReq;
using MemPoolDestroyRep = Empty;
// attr: cudaMemPoolAttr's numbers (1..8).
struct MemPoolAttrReq {
  uint32_t device = 0;
  uint64_t pool = 0;
  uint32_t attr = 0;
  uint64_t value = 0;  // for Set
  RGPU_FIELDS(device, pool, attr, value)
};
using MemPoolSetAttributeReq = MemPoolAttrReq;
using MemPoolSetAttributeRep = Empty;
using MemPoolGetAttributeReq = MemPoolAttrReq;
struct MemPoolGetAttributeRep {
  uint64_t value = 0;
  RGPU_FIELDS(value)
};
struct MemPoolTrimToReq {
  uint32_t device = 0;
  uint64_t pool = 0;
  uint64_t keep = 0;  // bytes of reserved memory to keep at least
  RGPU_FIELDS(device, pool, keep)
};
using MemPoolTrimToRep = Empty;

// ---- mapped page-locked memory
// Maps the registered shared segment `id` (HostShmRegister) in the session at `addr`, the client's
// own address of it, and registers it there with the GPU so that kernels can use that pointer.
// Fails (nothing changed) when the address is taken in the session.
struct HostShmMapReq {
  uint32_t device = 0;
  uint64_t id = 0;
  uint64_t addr = 0;
  RGPU_FIELDS(device, id, addr)
};
using HostShmMapRep = Empty;

}  // namespace rgpu::proto
