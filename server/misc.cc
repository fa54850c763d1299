// The misc group's handlers (issue 11 leftovers): peer access undone, GPUDirect RDMA flushes,
// atomic capabilities, and CUDA IPC event handles.  An event is exported through rgpud like memory
// (server/ipc_exports.h): the backend gives a descriptor that stands for the event (the cuda
// backend: a memfd holding the driver's IPC event handle; the host backend: the shared fence page),
// and an importing session of the same rgpud opens it as an event of its own.
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "common/log.h"
#include "server/ipc_exports.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {

constexpr CudaError kInvalidResourceHandle = 400;  // cudaErrorInvalidResourceHandle
constexpr uint32_t kMaxAtomicOps = 64;             // cudaAtomicOperation has 13 values

}  // namespace

Status Session::on(DeviceDisablePeerMsg, const PeerReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (Status s = check_device(q.peer); !s.ok()) return s;
  // Natively (H100/H200, driver 580) a GPU's own number answers "peer access not enabled".
  if (q.device == q.peer)
    return Status::fail(705 /* cudaErrorPeerAccessNotEnabled */,
                        "GPU " + std::to_string(q.device) + " has no peer access to itself");
  return exec_.disable_peer_access(static_cast<int>(q.device), static_cast<int>(q.peer));
}

Status Session::on(DeviceFlushRdmaMsg, const DeviceFlushRdmaReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  // cudaFlushGPUDirectRDMAWritesTargetCurrentDevice = 0; scopes: to owner 100, to all devices 200.
  if (q.target != 0 || (q.scope != 100 && q.scope != 200))
    return Status::fail(err::InvalidValue, "cudaDeviceFlushGPUDirectRDMAWrites: target " +
                                               std::to_string(q.target) + " / scope " +
                                               std::to_string(q.scope) + " is not a valid pair");
  return exec_.flush_rdma_writes(static_cast<int>(q.device), q.target, q.scope);
}

Status Session::on(DeviceAtomicCapsMsg, const DeviceAtomicCapsReq& q, DeviceAtomicCapsRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (q.peer >= 0) {
    if (Status s = check_device(static_cast<uint32_t>(q.peer)); !s.ok()) return s;
    if (static_cast<uint32_t>(q.peer) == q.device)
      return Status::fail(err::InvalidDevice,
                          "cudaDeviceGetP2PAtomicCapabilities: source and destination are the "
                          "same GPU");
  }
  if (q.ops.empty() || q.ops.size() > kMaxAtomicOps)
    return Status::fail(
        err::InvalidValue,
        "atomic capabilities of " + std::to_string(q.ops.size()) + " operations asked (1 to 64)");
  return exec_.atomic_caps(static_cast<int>(q.device), q.peer, q.ops, rep.caps);
}

Status Session::on(IpcGetEventHandleMsg, const IpcGetEventHandleReq& q, IpcGetEventHandleRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (config_.control < 0)
    return Status::fail(err::NotSupported,
                        "CUDA IPC needs rgpud's session processes (this server has no daemon)");
  uint64_t h = 0;
  if (Status s = event_of(q.device, q.event, h); !s.ok()) return s;
  // An export belongs to its event: exported again, the same handle; destroyed, withdrawn.
  if (auto it = ipc_event_tokens_.find(q.event); it != ipc_event_tokens_.end()) {
    rep.token = it->second.second;
    return Status::success();
  }
  int fd = -1;
  uint32_t kind = 0;
  if (Status s = exec_.ipc_event_export(static_cast<int>(q.device), h, fd, kind); !s.ok()) return s;
  // rgpud's export registry refuses an empty range: the event's descriptor is exported whole.
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    close(fd);
    return Status::fail(err::Unknown, "the backend's IPC event descriptor is empty");
  }
  std::string why = ipc_export(
      config_.control, fd,
      IpcMeta{0, static_cast<uint64_t>(st.st_size), static_cast<int32_t>(q.device), kind},
      rep.token);
  close(fd);
  if (!why.empty())
    return Status::fail(err::MemoryAllocation, "cannot export an event through rgpud: " + why);
  ipc_event_tokens_[q.event] = {q.device, rep.token};
  return Status::success();
}

Status Session::on(IpcOpenEventHandleMsg, const IpcOpenEventHandleReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (config_.control < 0)
    return Status::fail(err::NotSupported,
                        "CUDA IPC needs rgpud's session processes (this server has no daemon)");
  if (q.event == 0 || events_.count(q.event))
    return Status::fail(err::InvalidValue, "bad event id");
  if (config_.max_events && events_.size() >= config_.max_events)
    return Status::fail(err::MemoryAllocation,
                        "this client already has " + std::to_string(events_.size()) +
                            " events, rgpud's per-client limit (--client-max-events)");
  IpcMeta meta;
  int fd = -1;
  std::string why = ipc_import(config_.control, q.token, meta, fd);
  if (!why.empty()) {
    LOG_WARN("cudaIpcOpenEventHandle refused: %s", why.c_str());
    return Status::fail(kInvalidResourceHandle, why);
  }
  uint64_t h = 0;
  Status s = exec_.ipc_event_import(static_cast<int>(q.device), fd, meta.kind, h);
  close(fd);
  if (!s.ok()) return s;
  events_[q.event] = Object{q.device, h};
  return Status::success();
}

}  // namespace rgpu::server
