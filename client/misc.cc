// The misc group's client core (issue 11 leftovers): peer access undone, GPUDirect RDMA flushes,
// atomic capabilities and CUDA IPC event handles (server/misc.cc).
#include <cstring>

#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {

// An event handle: a tag and the server's token (its identity and the export id); the rest zero.
constexpr char kEventTag[8] = {'r', 'g', 'p', 'u', 'I', 'P', 'E', '1'};
constexpr size_t kTokenAt = 8;
constexpr unsigned kInterprocessFlags = 0x2 | 0x4;  // DisableTiming | Interprocess

}  // namespace

CudaError Client::disable_peer_access(int peer) {
  const int dev = current_device();
  if (check_device(peer) != err::Success) return err::InvalidDevice;
  if (devices_[dev].link != devices_[peer].link) return 705;  // never enabled: other servers
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  return l->call<DeviceDisablePeerMsg>(PeerReq{devices_[dev].spec.gpu, devices_[peer].spec.gpu});
}

CudaError Client::flush_rdma_writes(uint32_t target, uint32_t scope) {
  const int dev = current_device();
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  return l->call<DeviceFlushRdmaMsg>(DeviceFlushRdmaReq{devices_[dev].spec.gpu, target, scope});
}

CudaError Client::atomic_caps(int dev, int peer, const uint32_t* ops, unsigned count,
                              uint32_t* caps) {
  if (!ops || !caps || count == 0) return err::InvalidValue;
  if (check_device(dev) != err::Success) return err::InvalidDevice;
  if (peer >= 0 && check_device(peer) != err::Success) return err::InvalidDevice;
  if (peer >= 0 && devices_[dev].link != devices_[peer].link) {
    // GPUs of two servers share no atomics.
    std::memset(caps, 0, count * sizeof *caps);
    return err::Success;
  }
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  DeviceAtomicCapsReq q{devices_[dev].spec.gpu,
                        peer < 0 ? -1 : static_cast<int32_t>(devices_[peer].spec.gpu),
                        std::vector<uint32_t>(ops, ops + count)};
  DeviceAtomicCapsRep rep;
  if (e = l->call<DeviceAtomicCapsMsg>(q, &rep); e != err::Success) return e;
  if (rep.caps.size() != count) {
    LOG_ERROR("the server answered %zu atomic capabilities for %u operations", rep.caps.size(),
              count);
    return err::Unknown;
  }
  std::memcpy(caps, rep.caps.data(), count * sizeof *caps);
  return err::Success;
}

CudaError Client::ipc_get_event_handle(Event* event, uint8_t* handle) {
  if (!handle) return err::InvalidValue;
  if (!find_event(event)) return 400;  // cudaErrorInvalidResourceHandle
  if ((event->flags & kInterprocessFlags) != kInterprocessFlags) {
    LOG_ERROR(
        "cudaIpcGetEventHandle: the event was not created with cudaEventInterprocess | "
        "cudaEventDisableTiming");
    return 400;
  }
  CudaError e;
  ServerLink* l = link(event->device, &e);
  if (!l) return e;
  IpcGetEventHandleRep rep;
  e = l->call<IpcGetEventHandleMsg>(
      IpcGetEventHandleReq{devices_[event->device].spec.gpu, event->id}, &rep);
  if (e != err::Success) return e;
  std::memset(handle, 0, kIpcHandleBytes);
  std::memcpy(handle, kEventTag, sizeof kEventTag);
  std::memcpy(handle + kTokenAt, rep.token.data(), rep.token.size());
  return err::Success;
}

CudaError Client::ipc_open_event_handle(const uint8_t* handle, Event** out) {
  if (!handle || !out) return err::InvalidValue;
  if (memcmp(handle, kEventTag, sizeof kEventTag) != 0) {
    LOG_ERROR("cudaIpcOpenEventHandle: the handle was not made by rgpu's cudaIpcGetEventHandle");
    return err::InvalidValue;
  }
  Context* ctx = nullptr;
  if (Error ce = current_context(&ctx); ce != err::Success) return ce;
  const int dev = ctx->device;
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  auto* ev = new Event{dev, l->new_id(), kInterprocessFlags, ctx};
  IpcOpenEventHandleReq q{devices_[dev].spec.gpu, ev->id, {}};
  std::memcpy(q.token.data(), handle + kTokenAt, q.token.size());
  if (e = l->call<IpcOpenEventHandleMsg>(q); e != err::Success) {
    LOG_ERROR(
        "cudaIpcOpenEventHandle on device %d failed with error %d (RGPU_LOG=info shows the "
        "server's reason)",
        dev, e);
    delete ev;
    return e;
  }
  if (Error ce = contexts_.adopt(ctx, ev); ce != err::Success) {
    l->call<EventDestroyMsg>(ObjectReq{devices_[dev].spec.gpu, ev->id});
    delete ev;
    return ce;
  }
  std::lock_guard<std::mutex> lock(objects_mu_);
  events_.insert(ev);
  *out = ev;
  return err::Success;
}

}  // namespace rgpu::client
