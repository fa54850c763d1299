// Messages of CUDA IPC between client processes of one rgpud (issue 11, item 8).  Included from
// proto/messages.h; ids 0x0A00-0x0AFF (proto/catalogue.def).
#pragma once

#include <array>
#include <cstdint>

#include "proto/wire.h"

namespace rgpu::proto {

// ---- ipc
// Exports the allocation that holds `ptr` on GPU `device` through rgpud (server/ipc_exports.h):
// the token (rgpud's identity and the export id) and an offset, 0: a handle names the whole
// allocation, as CUDA's do (cudaIpcOpenMemHandle returns its start).  The same allocation exported
// again gives the same token while it lives; freeing it withdraws the export.
struct IpcGetMemHandleReq {
  uint32_t device = 0;
  uint64_t ptr = 0;
  RGPU_FIELDS(device, ptr)
};
struct IpcGetMemHandleRep {
  std::array<uint8_t, 32> token{};
  uint64_t offset = 0;
  RGPU_FIELDS(token, offset)
};
// A handle of [ptr, ptr + size), a part of one allocation: a small allocation of the client lies
// in a slab (client/small_allocs.h), and its importers may reach that allocation only.  The
// handle's offset is 0 (opening it gives `ptr`).
struct IpcGetRangeHandleReq {
  uint32_t device = 0;
  uint64_t ptr = 0;
  uint64_t size = 0;
  RGPU_FIELDS(device, ptr, size)
};
using IpcGetRangeHandleRep = IpcGetMemHandleRep;
// Withdraws the handle IpcGetRangeHandle made of the range at `ptr` (its small allocation was
// freed): it opens nothing any more.
struct IpcRevokeRangeReq {
  uint32_t device = 0;
  uint64_t ptr = 0;
  RGPU_FIELDS(device, ptr)
};
using IpcRevokeRangeRep = Empty;
// Maps another session's export inside address window `window` (its base; 0: the GPU's default
// window) of GPU `device`.  [base, base + size) is the exported allocation, the only memory of
// the import that requests may name; `ptr` = `base` + the handle's offset.
struct IpcOpenMemHandleReq {
  uint32_t device = 0;
  uint64_t window = 0;
  std::array<uint8_t, 32> token{};
  uint64_t offset = 0;
  RGPU_FIELDS(device, window, token, offset)
};
struct IpcOpenMemHandleRep {
  uint64_t ptr = 0;
  uint64_t base = 0;
  uint64_t size = 0;
  RGPU_FIELDS(ptr, base, size)
};
// Unmaps the import whose allocation starts at `base` (IpcOpenMemHandleRep::base).
struct IpcCloseMemHandleReq {
  uint32_t device = 0;
  uint64_t base = 0;
  RGPU_FIELDS(device, base)
};
using IpcCloseMemHandleRep = Empty;

}  // namespace rgpu::proto
