// Streams, events, asynchronous copies, host callbacks and peer copies on the client.  Stream and
// event ids are chosen here, so creating them costs no round trip; work on a stream is sent
// without waiting; device-to-host data of an asynchronous copy lands in its destination (on the
// link's receiver thread) before the reply of any synchronization that covers it.
#include <bit>
#include <cstring>

#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {

constexpr CudaError kInvalidResourceHandle = errc::InvalidResourceHandle;

uint64_t u64(const void* p) { return reinterpret_cast<uint64_t>(p); }

}  // namespace

// The calling thread's per-thread default stream on each device.  Reached through the Client
// (per_thread_streams_), so only the copy in the library that made the Client is used.
std::map<int, Stream*>& this_thread_streams() {
  thread_local std::map<int, Stream*> streams;
  return streams;
}

CudaError Client::resolve_stream(StreamRef ref, Stream* out) {
  Context* ctx = contexts_.current();
  const int dev = ctx ? ctx->device : 0;
  if (ref.kind == StreamRef::Kind::Legacy) {
    if (CudaError e = check_device(dev); e != err::Success) return e;
    *out = Stream{dev, 0, 0, 0, ctx ? ctx : contexts_.primary(dev)};
    return err::Success;
  }
  if (ref.kind == StreamRef::Kind::PerThread) {
    // Created on first use: a blocking stream, which like CUDA's per-thread default stream
    // synchronizes with the legacy default stream only.
    Stream*& s = per_thread_streams_()[dev];
    if (!s) {
      CudaError e;
      ServerLink* l = link(dev, &e);
      if (!l) return e;
      auto* n = new Stream{dev, l->new_id(), 0, 0, contexts_.primary(dev)};
      e = l->call<StreamCreateMsg>(StreamCreateReq{devices_[dev].spec.gpu, n->id, 0, 0});
      if (e != err::Success) {
        delete n;
        return e;
      }
      s = n;
    }
    *out = *s;
    return err::Success;
  }
  std::lock_guard<std::mutex> lock(objects_mu_);
  Stream* s = ref.object;
  if (!streams_.count(s)) return kInvalidResourceHandle;
  *out = *s;
  return err::Success;
}

bool Client::stream_flags(StreamRef ref, unsigned* flags, int* priority) {
  Stream s;
  if (resolve_stream(ref, &s) != err::Success) return false;
  if (flags) *flags = s.flags;
  if (priority) *priority = s.priority;
  return true;
}

CudaError Client::stream_create(unsigned flags, int priority, Stream** out) {
  if (!out || (flags & ~1u)) return err::InvalidValue;
  Context* ctx = nullptr;
  if (Error ce = current_context(&ctx); ce != err::Success) return ce;
  const int dev = ctx->device;
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  int least = 0, greatest = 0;
  if (priority != 0 && stream_priority_range(dev, &least, &greatest) == err::Success)
    priority = std::min(std::max(priority, greatest), least);  // CUDA clamps to the range
  auto* s = new Stream{dev, l->new_id(), flags, priority, ctx};
  e = l->call<StreamCreateMsg>(StreamCreateReq{devices_[dev].spec.gpu, s->id, flags, priority});
  if (e != err::Success) {
    delete s;
    return e;
  }
  if (Error ce = contexts_.adopt(ctx, s); ce != err::Success) {
    l->call<StreamDestroyMsg>(ObjectReq{devices_[dev].spec.gpu, s->id});
    delete s;
    return ce;
  }
  std::lock_guard<std::mutex> lock(objects_mu_);
  streams_.insert(s);
  *out = s;
  return err::Success;
}

CudaError Client::stream_destroy(Stream* s) {
  {
    std::lock_guard<std::mutex> lock(objects_mu_);
    if (!streams_.erase(s)) return kInvalidResourceHandle;
  }
  contexts_.disown(s->ctx, s);
  CudaError e;
  ServerLink* l = link(s->device, &e);
  if (l) e = l->call<StreamDestroyMsg>(ObjectReq{devices_[s->device].spec.gpu, s->id});
  delete s;
  return e;
}

CudaError Client::stream_synchronize(const Stream& s) {
  CudaError e;
  ServerLink* l = link(s.device, &e);
  if (!l) return e;
  const uint32_t gpu = devices_[s.device].spec.gpu;
  if (idle_known(l, s, MsgId::StreamSynchronize)) return err::Success;
  const uint64_t owed = s.id == 0 ? owed_mark() : 0;  // copies between servers go on stream 0
  e = l->call<StreamSynchronizeMsg>(ObjectReq{gpu, s.id});
  if (e == err::Success) {
    owed_settled_by(s.device, owed);
    l->note_idle(gpu, s.id);
  }
  return e;
}

// The stream is idle and the server would answer a synchronization (or a query) at once: since a
// synchronous call found it idle nothing was sent on the link (no work can have reached it), no
// error waits to be reported, and no copy between servers is owed (those are queued through
// other links).  Thrust synchronizes after reading a result back, for instance.
bool Client::idle_known(ServerLink* l, const Stream& s, MsgId would_be) {
  if (!local_sync_ || !l->clean() || owed_mark() != 0) return false;
  if (!l->known_idle(devices_[s.device].spec.gpu, s.id)) return false;
  l->stats().note_local(static_cast<uint16_t>(would_be));
  return true;
}

CudaError Client::stream_query(const Stream& s) {
  CudaError e;
  ServerLink* l = link(s.device, &e);
  if (!l) return e;
  if (idle_known(l, s, MsgId::StreamQuery)) return err::Success;
  return l->call<StreamQueryMsg>(ObjectReq{devices_[s.device].spec.gpu, s.id});
}

CudaError Client::stream_wait_event(const Stream& s, Event* event) {
  Event* ev = find_event(event);
  if (!ev) return kInvalidResourceHandle;
  // Events of another GPU on the same server work there too; across servers the client relays.
  if (devices_[ev->device].link != devices_[s.device].link) return cross_server_wait(s, ev);
  CudaError e;
  ServerLink* l = link(s.device, &e);
  if (!l) return e;
  return l->call<StreamWaitEventMsg>(StreamWaitEventReq{devices_[s.device].spec.gpu, s.id, ev->id});
}

CudaError Client::stream_priority_range(int dev, int* least, int* greatest) {
  StreamPriorityRangeRep rep;
  CudaError e = forward<StreamPriorityRangeMsg>(dev, {}, &rep);
  if (e == err::Success) {
    if (least) *least = rep.least;
    if (greatest) *greatest = rep.greatest;
  }
  return e;
}

Event* Client::find_event(Event* ev) {
  std::lock_guard<std::mutex> lock(objects_mu_);
  return events_.count(ev) ? ev : nullptr;
}

CudaError Client::event_create(unsigned flags, Event** out) {
  constexpr unsigned kKnown = 0x1 | 0x2 | 0x4;  // BlockingSync, DisableTiming, Interprocess
  if (!out || (flags & ~kKnown)) return err::InvalidValue;
  Context* ctx = nullptr;
  if (Error ce = current_context(&ctx); ce != err::Success) return ce;
  const int dev = ctx->device;
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  auto* ev = new Event{dev, l->new_id(), flags, ctx};
  e = l->call<EventCreateMsg>(EventCreateReq{devices_[dev].spec.gpu, ev->id, flags});
  if (e != err::Success) {
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

CudaError Client::event_destroy(Event* ev) {
  {
    std::lock_guard<std::mutex> lock(objects_mu_);
    if (!events_.erase(ev)) return kInvalidResourceHandle;
  }
  contexts_.disown(ev->ctx, ev);
  CudaError e;
  ServerLink* l = link(ev->device, &e);
  if (l) e = l->call<EventDestroyMsg>(ObjectReq{devices_[ev->device].spec.gpu, ev->id});
  delete ev;
  return e;
}

CudaError Client::event_record(Event* event, const Stream& s) {
  Event* ev = find_event(event);
  if (!ev) return kInvalidResourceHandle;
  if (ev->device != s.device) return kInvalidResourceHandle;
  CudaError e;
  ServerLink* l = link(s.device, &e);
  if (!l) return e;
  return l->call<EventRecordMsg>(EventRecordReq{devices_[s.device].spec.gpu, ev->id, s.id});
}

CudaError Client::event_query(Event* event) {
  Event* ev = find_event(event);
  if (!ev) return kInvalidResourceHandle;
  CudaError e;
  ServerLink* l = link(ev->device, &e);
  if (!l) return e;
  return l->call<EventQueryMsg>(ObjectReq{devices_[ev->device].spec.gpu, ev->id});
}

CudaError Client::event_synchronize(Event* event) {
  Event* ev = find_event(event);
  if (!ev) return kInvalidResourceHandle;
  CudaError e;
  ServerLink* l = link(ev->device, &e);
  if (!l) return e;
  return l->call<EventSynchronizeMsg>(ObjectReq{devices_[ev->device].spec.gpu, ev->id});
}

CudaError Client::event_elapsed(float* ms, Event* start, Event* end) {
  Event* a = find_event(start);
  Event* b = find_event(end);
  if (!ms) return err::InvalidValue;
  if (!a || !b || a->device != b->device) return kInvalidResourceHandle;
  CudaError e;
  ServerLink* l = link(a->device, &e);
  if (!l) return e;
  EventElapsedRep rep;
  e = l->call<EventElapsedMsg>(EventElapsedReq{devices_[a->device].spec.gpu, a->id, b->id}, &rep);
  if (e == err::Success) *ms = std::bit_cast<float>(rep.ms_bits);
  return e;
}

CudaError Client::memcpy2d_async(void* dst, size_t dpitch, const void* src, size_t spitch,
                                 size_t width, size_t height, CopyKind kind, const Stream& s) {
  CopyPlan plan;
  managed_copy_kind(dst, src, &kind);
  if (CudaError e = plan_copy(dst, dpitch, src, spitch, width, height, kind, &plan);
      e != err::Success || plan.empty)
    return e;
  if (CudaError e =
          managed_copy(dst, (height - 1) * dpitch + width, src, (height - 1) * spitch + width);
      e != err::Success)
    return e;
  kind = plan.kind;
  const bool d_ok = plan.d_ok, s_ok = plan.s_ok, d_dev = plan.d_dev, s_dev = plan.s_dev;
  const int ddev = plan.ddev, sdev = plan.sdev;
  CudaError e;
  ServerLink* l = link(s.device, &e);
  if (!l) return e;
  const uint32_t gpu = devices_[s.device].spec.gpu;
  switch (kind) {
    case CopyKind::HostToHost: {
      if (d_dev || s_dev) return err::InvalidValue;
      // While `s` is captured, a host node that copies at each launch; otherwise synchronous,
      // after the stream's earlier work (CUDA's rule for host-to-host).
      unsigned capture = 0;
      if (gmem_capture(s, &capture) || capture)
        return host_func(s, [=] { copy_rows(dst, dpitch, src, spitch, width, height); });
      if (CudaError se = stream_synchronize(s); se != err::Success) return se;
      copy_rows(dst, dpitch, src, spitch, width, height);
      return err::Success;
    }
    case CopyKind::HostToDevice: {
      if (!d_ok || s_dev || ddev != s.device) return err::InvalidValue;
      CudaError shared;
      if (height == 1 && copy_shared(src, u64(dst), width, true, ddev, &s, &shared)) return shared;
      std::vector<iovec> rows(height);
      for (size_t i = 0; i < height; ++i)
        rows[i] = {const_cast<char*>(static_cast<const char*>(src)) + i * spitch, width};
      return l->call<MemcpyHtoDAsyncMsg>(
          MemcpyHtoDAsyncReq{gpu, u64(dst), dpitch, width, height, s.id}, nullptr, rows.data(),
          static_cast<int>(height));
    }
    case CopyKind::DeviceToHost: {
      if (!s_ok || d_dev || sdev != s.device) return err::InvalidValue;
      CudaError shared;
      if (height == 1 && copy_shared(dst, u64(src), width, false, sdev, &s, &shared)) return shared;
      std::vector<iovec> rows(height);
      for (size_t i = 0; i < height; ++i) rows[i] = {static_cast<char*>(dst) + i * dpitch, width};
      // Into pageable memory CUDA's copy returns once it is done: so does this one, in one round
      // trip.  (Asynchronously, the data would come through a host function on the server, and
      // the caller synchronizes next anyway: PyTorch's .item().)  Not while a capture is on.
      if (!map_.find_host(u64(dst)) && l->knows(MsgId::MemcpyDtoHStream) && !capture_running()) {
        CudaError e = l->call<MemcpyDtoHStreamMsg>(
            MemcpyDtoHStreamReq{gpu, u64(src), spitch, width, height, s.id}, nullptr, nullptr, 0,
            rows.data(), static_cast<int>(height));
        if (e == err::Success) l->note_idle(gpu, s.id);  // done after the stream's work
        return e;
      }
      return l->call_with_async_data<MemcpyDtoHAsyncMsg>(
          MemcpyDtoHAsyncReq{gpu, u64(src), spitch, width, height, s.id}, std::move(rows), width);
    }
    case CopyKind::DeviceToDevice: {
      if (!d_ok || !s_ok) return err::InvalidValue;
      if (ddev != sdev || ddev != s.device) {
        if (height == 1) return memcpy_peer(dst, ddev, src, sdev, width, &s);
        if (devices_[ddev].link != devices_[sdev].link)
          return memcpy_across(dst, ddev, dpitch, src, sdev, spitch, width, height, &s);
        return err::NotSupported;
      }
      if (height == 1)
        return l->call<MemcpyDtoDMsg>(MemcpyDtoDReq{gpu, u64(dst), u64(src), width, s.id});
      return l->call<Memcpy2DDtoDMsg>(
          Memcpy2DDtoDReq{gpu, u64(dst), dpitch, u64(src), spitch, width, height, s.id});
    }
    case CopyKind::Default:
      break;
  }
  return err::InvalidMemcpyDirection;
}

CudaError Client::memset_async(void* ptr, int value, size_t n, const Stream& s) {
  if (n == 0) return err::Success;
  int dev = -1;
  if (!map_.device_range_ok(u64(ptr), n, &dev) || dev != s.device) {
    if (dev < 0 && page_locked_range(u64(ptr), n)) {
      const uint8_t byte = static_cast<uint8_t>(value);
      return fill_host(u64(ptr), n, n, &byte, 1, n, 1, 1, &s);
    }
    return refuse_memset(u64(ptr), n, s.device);
  }
  if (CudaError m = managed_before_access(u64(ptr), n, true); m != err::Success) return m;
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  return l->call<MemsetMsg>(
      MemsetReq{devices_[dev].spec.gpu, u64(ptr), static_cast<uint8_t>(value), n, s.id});
}

CudaError Client::host_func(const Stream& s, std::function<void()> fn) {
  CudaError e;
  ServerLink* l = link(s.device, &e);
  if (!l) return e;
  return l->host_func(devices_[s.device].spec.gpu, s.id, std::move(fn));
}

CudaError Client::memcpy_peer(void* dst, int dst_dev, const void* src, int src_dev, size_t n,
                              const Stream* s, bool wait) {
  if (CudaError e = check_device(dst_dev); e != err::Success) return err::InvalidDevice;
  if (CudaError e = check_device(src_dev); e != err::Success) return err::InvalidDevice;
  if (n == 0) return err::Success;
  int d = -1, sd = -1;
  if (!map_.device_range_ok(u64(dst), n, &d) || d != dst_dev) return err::InvalidValue;
  if (!map_.device_range_ok(u64(src), n, &sd) || sd != src_dev) return err::InvalidValue;
  if (devices_[dst_dev].link != devices_[src_dev].link)  // server to server
    return memcpy_across(dst, dst_dev, n, src, src_dev, n, n, 1, s);
  CudaError e;
  ServerLink* l = link(dst_dev, &e);
  if (!l) return e;
  // Without a stream (cudaMemcpyPeer) the copy runs on the legacy stream of the destination.
  const int stream_dev = s ? s->device : dst_dev;
  if (stream_dev != dst_dev && stream_dev != src_dev) return kInvalidResourceHandle;
  e = l->call<MemcpyPeerMsg>(MemcpyPeerReq{devices_[dst_dev].spec.gpu, u64(dst),
                                           devices_[src_dev].spec.gpu, u64(src), n,
                                           devices_[stream_dev].spec.gpu, s ? s->id : 0});
  // Without a stream (cudaMemcpyPeer, cuMemcpyPeer) the call returns once the copy is done (the
  // server's own devices; memcpy_across is host-asynchronous).
  if (e != err::Success || s || !wait) return e;
  return stream_synchronize(Stream{dst_dev, 0, 0, 0});
}

CudaError Client::can_access_peer(int* can, int dev, int peer) {
  if (!can) return err::InvalidValue;
  if (check_device(dev) != err::Success || check_device(peer) != err::Success)
    return err::InvalidDevice;
  *can = 0;
  if (dev == peer || devices_[dev].link != devices_[peer].link) return err::Success;
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  DeviceCanAccessPeerRep rep;
  e = l->call<DeviceCanAccessPeerMsg>(PeerReq{devices_[dev].spec.gpu, devices_[peer].spec.gpu},
                                      &rep);
  if (e == err::Success) *can = rep.can;
  return e;
}

CudaError Client::enable_peer_access(int peer) {
  const int dev = current_device();
  if (check_device(peer) != err::Success) return err::InvalidDevice;
  if (devices_[dev].link != devices_[peer].link) return err::NotSupported;
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  return l->call<DeviceEnablePeerMsg>(PeerReq{devices_[dev].spec.gpu, devices_[peer].spec.gpu});
}

}  // namespace rgpu::client
