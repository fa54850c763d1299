// Messages of stream waits across servers (issue 14, item 3).  Included from proto/messages.h;
// ids 0x1200-0x12FF (proto/catalogue.def).
//
// cudaStreamWaitEvent(s, e) with s on server B and e on server A: the client sends B a
// StreamGateWait (s waits at a gate of its own until the client opens it) and A an EventNotify
// (when the work recorded in e at that moment is done, A sends RunCallback{callback}, as for a host
// function); the client then sends B GateOpen{gate}.  Gate ids are the client's, unique per
// process.
#pragma once

#include <cstdint>
#include <string>

#include "proto/wire.h"

namespace rgpu::proto {

// Holds stream `stream` of GPU `device` (0: the legacy stream) until GateOpen{gate} arrives.
struct StreamGateWaitReq {
  uint32_t device = 0;
  uint64_t stream = 0;
  uint64_t gate = 0;
  RGPU_FIELDS(device, stream, gate)
};
using StreamGateWaitRep = Empty;

// When the work recorded in `event` so far is done (at once for an event never recorded), the
// server sends RunCallback{callback}; the client answers CallbackDone as for any callback.
struct EventNotifyReq {
  uint32_t device = 0;
  uint64_t event = 0;
  uint64_t callback = 0;
  RGPU_FIELDS(device, event, callback)
};
using EventNotifyRep = Empty;

// Opens gate `gate` (served by the reader, never behind the dispatcher).  `error` != 0: the event
// could not be waited for (its server was lost); the stream goes on and the session reports
// `error` with `message` as an asynchronous error of the wait.
struct GateOpenReq {
  uint64_t gate = 0;
  int32_t error = 0;
  std::string message;
  RGPU_FIELDS(gate, error, message)
};
using GateOpenRep = Empty;

}  // namespace rgpu::proto
