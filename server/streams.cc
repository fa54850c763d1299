// Streams, events and host callbacks of a session.  Stream and event ids are the client's; the
// backend's handles stay on the server.  A host callback holds its stream on a backend thread
// until the client reports the callback done (CallbackDone is answered by the reader thread, so
// it never waits behind the dispatcher).
#include <bit>

#include "common/log.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {
constexpr CudaError kInvalidResourceHandle = 400;
}

Status Session::stream_of(uint32_t dev, uint64_t id, uint64_t& handle) const {
  if (id == 0) {
    handle = 0;
    return check_device(dev);
  }
  auto it = streams_.find(id);
  if (it == streams_.end() || it->second.device != dev)
    return Status::fail(kInvalidResourceHandle, "no such stream on this GPU");
  handle = it->second.handle;
  return Status::success();
}

Status Session::event_of(uint32_t dev, uint64_t id, uint64_t& handle) const {
  auto it = events_.find(id);
  if (it == events_.end() || it->second.device != dev)
    return Status::fail(kInvalidResourceHandle, "no such event on this GPU");
  handle = it->second.handle;
  return Status::success();
}

Status Session::on(StreamCreateMsg, const StreamCreateReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (q.id == 0 || streams_.count(q.id)) return Status::fail(err::InvalidValue, "bad stream id");
  if (config_.max_streams && streams_.size() >= config_.max_streams)
    return Status::fail(err::MemoryAllocation,
                        "this client already has " + std::to_string(streams_.size()) +
                            " streams, rgpud's per-client limit (--client-max-streams)");
  uint64_t h = 0;
  if (Status s = exec_.stream_create(static_cast<int>(q.device), q.flags, q.priority, h); !s.ok())
    return s;
  streams_[q.id] = Object{q.device, h};
  return Status::success();
}

Status Session::on(StreamDestroyMsg, const ObjectReq& q, Empty&) {
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.id, h); !s.ok() || q.id == 0)
    return s.ok() ? Status::fail(kInvalidResourceHandle, "the default stream") : s;
  streams_.erase(q.id);
  return exec_.stream_destroy(static_cast<int>(q.device), h);
}

Status Session::on(StreamSynchronizeMsg, const ObjectReq& q, Empty&) {
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.id, h); !s.ok()) return s;
  return exec_.stream_synchronize(static_cast<int>(q.device), h);
}

Status Session::on(StreamQueryMsg, const ObjectReq& q, Empty&) {
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.id, h); !s.ok()) return s;
  return exec_.stream_query(static_cast<int>(q.device), h);
}

Status Session::on(StreamWaitEventMsg, const StreamWaitEventReq& q, Empty&) {
  uint64_t s_h = 0, e_h = 0;
  if (Status s = stream_of(q.device, q.stream, s_h); !s.ok()) return s;
  auto it = events_.find(q.event);
  if (it == events_.end()) return Status::fail(kInvalidResourceHandle, "no such event");
  e_h = it->second.handle;
  return exec_.stream_wait_event(static_cast<int>(q.device), s_h, e_h);
}

Status Session::on(StreamPriorityRangeMsg, const DeviceReq& q, StreamPriorityRangeRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  return exec_.stream_priority_range(static_cast<int>(q.device), rep.least, rep.greatest);
}

Status Session::on(EventCreateMsg, const EventCreateReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (q.id == 0 || events_.count(q.id)) return Status::fail(err::InvalidValue, "bad event id");
  if (config_.max_events && events_.size() >= config_.max_events)
    return Status::fail(err::MemoryAllocation,
                        "this client already has " + std::to_string(events_.size()) +
                            " events, rgpud's per-client limit (--client-max-events)");
  uint64_t h = 0;
  if (Status s = exec_.event_create(static_cast<int>(q.device), q.flags, h); !s.ok()) return s;
  events_[q.id] = Object{q.device, h};
  return Status::success();
}

Status Session::on(EventDestroyMsg, const ObjectReq& q, Empty&) {
  uint64_t h = 0;
  if (Status s = event_of(q.device, q.id, h); !s.ok()) return s;
  events_.erase(q.id);
  return exec_.event_destroy(static_cast<int>(q.device), h);
}

Status Session::on(EventRecordMsg, const EventRecordReq& q, Empty&) {
  uint64_t s_h = 0, e_h = 0;
  if (Status s = stream_of(q.device, q.stream, s_h); !s.ok()) return s;
  if (Status s = event_of(q.device, q.event, e_h); !s.ok()) return s;
  return exec_.event_record(static_cast<int>(q.device), e_h, s_h);
}

Status Session::on(EventQueryMsg, const ObjectReq& q, Empty&) {
  uint64_t h = 0;
  if (Status s = event_of(q.device, q.id, h); !s.ok()) return s;
  return exec_.event_query(static_cast<int>(q.device), h);
}

Status Session::on(EventSynchronizeMsg, const ObjectReq& q, Empty&) {
  uint64_t h = 0;
  if (Status s = event_of(q.device, q.id, h); !s.ok()) return s;
  return exec_.event_synchronize(static_cast<int>(q.device), h);
}

Status Session::on(EventElapsedMsg, const EventElapsedReq& q, EventElapsedRep& rep) {
  uint64_t a = 0, b = 0;
  if (Status s = event_of(q.device, q.start, a); !s.ok()) return s;
  if (Status s = event_of(q.device, q.end, b); !s.ok()) return s;
  float ms = 0;
  Status s = exec_.event_elapsed(static_cast<int>(q.device), a, b, ms);
  rep.ms_bits = std::bit_cast<uint32_t>(ms);
  return s;
}

// ---- host callbacks
// -------------------------------------------------------------------------------

Status Session::on(HostFuncMsg, const HostFuncReq& q, Empty&) {
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.stream, h); !s.ok()) return s;
  Callback* cb;
  {
    std::lock_guard<std::mutex> lock(cb_mu_);
    if (callbacks_.count(q.id)) return Status::fail(err::InvalidValue, "callback id in use");
    auto owned = std::make_unique<Callback>(Callback{this, q.id, false});
    cb = owned.get();
    callbacks_[q.id] = std::move(owned);
  }
  Status s = exec_.host_func(static_cast<int>(q.device), h, &Session::run_callback, cb);
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(cb_mu_);
    callbacks_.erase(q.id);
  }
  return s;
}

void Session::run_callback(void* arg) {
  // On a backend thread, when the stream reaches the callback: ask the client to run it (after
  // everything the stream produced before, which the outbox already holds), and hold the stream
  // until the client says it is done.
  auto* cb = static_cast<Callback*>(arg);
  Session* self = cb->session;
  self->push_frame(static_cast<uint16_t>(MsgId::RunCallback), 0, cb->id,
                   encode_message(RunCallbackMsg{cb->id}));
  std::unique_lock<std::mutex> lock(self->cb_mu_);
  self->cb_cv_.wait(lock, [&] { return cb->done || self->cancelled_; });
  self->callbacks_.erase(cb->id);
}

void Session::cancel_callbacks() {
  std::lock_guard<std::mutex> lock(cb_mu_);
  cancelled_ = true;
  cb_cv_.notify_all();
}

}  // namespace rgpu::server
