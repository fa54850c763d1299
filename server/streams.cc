// Streams, events and host callbacks of a session.  Stream and event ids are the client's; the
// backend's handles stay on the server.  A host callback holds its stream at a gate until the
// client reports the callback done (CallbackDone is handled by the reader thread, so it never waits
// behind the dispatcher, and no host function waits for it).
#include <bit>

#include "backend/gate.h"
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
    Status s = check_device(dev);
    if (s.ok()) note_gpu_used(dev);
    return s;
  }
  auto it = streams_.find(id);
  if (it == streams_.end() || it->second.device != dev)
    return Status::fail(kInvalidResourceHandle, "no such stream on this GPU");
  handle = it->second.handle;
  it->second.busy = true;  // the caller may queue work on it
  note_gpu_used(dev);
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
  // The top 64 ids are the session's private streams (native graph builds).
  if (q.id == 0 || q.id >= ~0ull - 63 || streams_.count(q.id))
    return Status::fail(err::InvalidValue, "bad stream id");
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
  const int dev = static_cast<int>(q.device);
  // Its work goes on after the destroy (CUDA's rule): a private event marks it for
  // DeviceSynchronize's ready check, which no longer sees the stream.  Marks of work now over
  // go first (a program may destroy busy streams and never synchronize the device).
  prune_ended_streams(q.device);
  if (uint64_t mark = 0;
      exec_.stream_query(dev, h).code == err::NotReady && mark_stream(dev, h, mark).ok())
    ended_streams_.push_back({q.device, mark});
  streams_.erase(q.id);
  if (pools_) pools_->forget_stream(q.device, h);  // its handle may name another stream later
  if (peer_copier_) peer_copier_->stream_ending(dev, h);
  return exec_.stream_destroy(dev, h);
}

Status Session::on(StreamSynchronizeMsg, const ObjectReq& q, Empty&) {
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.id, h); !s.ok()) return s;
  if (pools_) pools_->trim_device(q.device);  // a synchronization point of stream-ordered frees
  // A private event marks the stream's work so far; a waiter synchronizes it (the stream may be
  // destroyed meanwhile, the event stays valid) and replies.
  const int dev = static_cast<int>(q.device);
  if (Status s = exec_.stream_query(dev, h); s.code != err::NotReady) return s;  // done: no wait
  uint64_t mark = 0;
  if (Status s = acquire_event(dev, mark); !s.ok()) return s;
  if (Status s = exec_.event_record(dev, mark, h); !s.ok()) {
    release_event(dev, mark);
    return s;
  }
  defer(
      [this, dev, mark](bool&) {
        Status s = exec_.event_synchronize(dev, mark);
        release_event(dev, mark);
        return s;
      },
      false, [this, dev, mark] { return exec_.event_query(dev, mark).code != err::NotReady; });
  return Status::success();
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
  revoke_ipc_event(q.id);  // its handle opens nothing any more
  // A waiter synchronizing it destroys it when done (CUDA: released once complete).
  if (destroy_when_unheld(static_cast<int>(q.device), h)) return Status::success();
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
  const int dev = static_cast<int>(q.device);
  if (Status s = exec_.event_query(dev, h); s.code != err::NotReady) return s;  // done: no wait
  hold_event(h);  // a destroy meanwhile waits for this waiter
  defer(
      [this, dev, h](bool&) {
        Status s = exec_.event_synchronize(dev, h);
        unhold_event(dev, h);
        return s;
      },
      false, [this, dev, h] { return exec_.event_query(dev, h).code != err::NotReady; });
  return Status::success();
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

Status Session::gate_for(uint32_t dev, uint64_t stream_id, Gate*& gate) {
  // Called by the dispatcher only.
  auto key = std::make_pair(dev, stream_id);
  {
    std::lock_guard<std::mutex> lock(cb_mu_);
    auto it = gates_.find(key);
    if (it != gates_.end()) {
      gate = &it->second;
      return Status::success();
    }
  }
  uint32_t* word = new_gate_word();
  if (!word) return Status::fail(err::MemoryAllocation, "cannot allocate gate memory");
  std::lock_guard<std::mutex> lock(cb_mu_);
  gate = &gates_[key];
  gate->word = word;
  return Status::success();
}

uint32_t* Session::new_gate_word() {
  // Words are handed out 1024 to a page and never reused within the session (a stream may still
  // be waiting at a destroyed stream's gate).
  constexpr size_t kWords = 1024;
  if (gate_pages_.empty() || gate_used_ == kWords) {
    uint32_t* page = exec_.alloc_gate_words(kWords);  // a backend call: no lock held
    if (!page) return nullptr;
    gate_pages_.push_back(page);
    gate_used_ = 0;
  }
  return gate_pages_.back() + gate_used_++;
}

Status Session::on(HostFuncMsg, const HostFuncReq& q, Empty&) {
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.stream, h); !s.ok()) return s;
  Gate* gate = nullptr;
  if (Status s = gate_for(q.device, q.stream, gate); !s.ok()) return s;
  uint32_t* word = gate->word;
  uint32_t seq;
  {
    std::lock_guard<std::mutex> lock(cb_mu_);
    if (callbacks_.count(q.id)) return Status::fail(err::InvalidValue, "callback id in use");
    seq = ++gate->issued;
    callbacks_[q.id] = Callback{word, seq};
    if (cancelled_) backend::open_gate(word, seq);  // the client is gone: nothing to wait for
  }
  // When the stream gets here the completion thread asks the client to run the callback (after
  // everything the stream produced before, which the outbox already holds); the stream then waits
  // at the gate until the reader sees CallbackDone.
  const uint64_t id = q.id;
  const int d = static_cast<int>(q.device);
  Status s = host_work_.on_stream(exec_, d, h, [this, id] {
    push_frame(static_cast<uint16_t>(MsgId::RunCallback), 0, id,
               encode_message(RunCallbackMsg{id}));
  });
  if (s.ok()) s = exec_.gate_wait(d, h, word, seq);
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(cb_mu_);
    callbacks_.erase(q.id);
    backend::open_gate(word, seq);  // never leave a stream waiting for a callback that failed
  }
  return s;
}

void Session::cancel_callbacks() {
  // The client is gone: open every gate so that the streams drain.
  std::lock_guard<std::mutex> lock(cb_mu_);
  cancelled_ = true;
  for (auto& [key, g] : gates_) backend::open_gate(g.word, g.issued);
  for (auto& [key, g] : xgates_) backend::open_gate(g.word, g.issued);  // waits for other servers
  xwaiting_.clear();
  callbacks_.clear();
}

void Session::free_gates() {
  for (uint32_t* page : gate_pages_) exec_.free_gate_words(page);
  gate_pages_.clear();
}

}  // namespace rgpu::server
