// Messages of the misc group (issue 11 leftovers): peer access undone, GPUDirect RDMA flushes,
// atomic capabilities, and CUDA IPC event handles between client processes of one rgpud.
// Included from proto/messages.h; ids 0x0D00-0x0DFF (proto/catalogue.def).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "proto/wire.h"

namespace rgpu::proto {

// ---- misc
// cudaDeviceDisablePeerAccess: GPU `device` stops mapping `peer`'s memory.
using DeviceDisablePeerReq = PeerReq;
using DeviceDisablePeerRep = Empty;

// cudaDeviceFlushGPUDirectRDMAWrites on GPU `device` (target and scope as the runtime's enums).
struct DeviceFlushRdmaReq {
  uint32_t device = 0;
  uint32_t target = 0;
  uint32_t scope = 0;
  RGPU_FIELDS(device, target, scope)
};
using DeviceFlushRdmaRep = Empty;

// The capabilities (cudaAtomicOperationCapability bits) of each atomic operation in `ops`
// (cudaAtomicOperation values) between GPU `device` and the host (`peer` < 0) or GPU `peer`.
struct DeviceAtomicCapsReq {
  uint32_t device = 0;
  int32_t peer = -1;
  std::vector<uint32_t> ops;
  RGPU_FIELDS(device, peer, ops)
};
struct DeviceAtomicCapsRep {
  std::vector<uint32_t> caps;
  RGPU_FIELDS(caps)
};

// Exports event `event` of GPU `device` (created interprocess) through rgpud: the token (rgpud's
// identity and the export id).  The same event exported again gives the same token.
struct IpcGetEventHandleReq {
  uint32_t device = 0;
  uint64_t event = 0;
  RGPU_FIELDS(device, event)
};
struct IpcGetEventHandleRep {
  std::array<uint8_t, 32> token{};
  RGPU_FIELDS(token)
};
// Opens another session's exported event as this session's event `event` (an id the client chose,
// as for EventCreate) on GPU `device`.  It is destroyed with EventDestroy.
struct IpcOpenEventHandleReq {
  uint32_t device = 0;
  uint64_t event = 0;
  std::array<uint8_t, 32> token{};
  RGPU_FIELDS(device, event, token)
};
using IpcOpenEventHandleRep = Empty;

}  // namespace rgpu::proto
