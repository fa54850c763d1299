// Stream waits for an event of another server (cudaStreamWaitEvent across servers).  The client
// holds the stream here at a gate (StreamGateWait), asks the event's server to tell it when the
// event's work is done (EventNotify, answered with RunCallback), and then opens the gate
// (GateOpen, served by the reader like CallbackDone).  See proto/messages_xorder.h.
#include "backend/gate.h"
#include "common/log.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {
// GateOpens that arrived before their wait was served, at most (a client that sends others is
// broken).
constexpr size_t kMaxEarlyGates = 1u << 16;
}  // namespace

void Session::xgate_pass(XGate& g, uint32_t seq) {
  if (seq != g.opened + 1) {
    g.early.insert(seq);  // an earlier wait of this stream is still closed
    return;
  }
  g.opened = seq;
  while (g.early.erase(g.opened + 1)) ++g.opened;
  backend::open_gate(g.word, g.opened);
}

Status Session::on(StreamGateWaitMsg, const StreamGateWaitReq& q, Empty&) {
  auto forget = [this, gate = q.gate] {
    std::lock_guard<std::mutex> lock(cb_mu_);
    if (!xearly_.erase(gate)) xdropped_.insert(gate);
  };
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.stream, h); !s.ok()) {
    forget();
    return s;
  }
  const auto key = std::make_pair(q.device, q.stream);
  XGate* g = nullptr;
  {
    std::lock_guard<std::mutex> lock(cb_mu_);
    auto it = xgates_.find(key);
    if (it != xgates_.end()) g = &it->second;
  }
  if (!g) {
    uint32_t* word = new_gate_word();  // a backend call: no lock held
    if (!word) {
      forget();
      return Status::fail(err::MemoryAllocation, "cannot allocate gate memory");
    }
    std::lock_guard<std::mutex> lock(cb_mu_);
    g = &xgates_[key];
    g->word = word;
  }
  uint32_t seq;
  {
    std::lock_guard<std::mutex> lock(cb_mu_);
    seq = ++g->issued;
    if (cancelled_ || xearly_.erase(q.gate))
      xgate_pass(*g, seq);  // opened already, or the client is gone
    else
      xwaiting_[q.gate] = XWait{g, seq};
  }
  Status s = exec_.gate_wait(static_cast<int>(q.device), h, g->word, seq);
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(cb_mu_);
    if (xwaiting_.erase(q.gate)) xdropped_.insert(q.gate);
    xgate_pass(*g, seq);  // never leave later waits of the stream behind this one
  }
  return s;
}

void Session::on_gate_open(const GateOpenReq& q) {
  // The reader's: no backend call, no wait (the outbox queues without blocking).
  if (q.error) {
    LOG_INFO("a stream's wait for another server's event failed: %s", q.message.c_str());
    AsyncErrorMsg m{0, static_cast<uint16_t>(MsgId::StreamGateWait), q.error, q.message};
    push_frame(static_cast<uint16_t>(MsgId::AsyncError), 0, 0, encode_message(m));
  }
  std::lock_guard<std::mutex> lock(cb_mu_);
  if (xdropped_.erase(q.gate)) return;
  auto it = xwaiting_.find(q.gate);
  if (it == xwaiting_.end()) {
    if (xearly_.size() >= kMaxEarlyGates)
      throw ProtoError("too many gates opened before their StreamGateWait");
    xearly_.insert(q.gate);
    return;
  }
  xgate_pass(*it->second.gate, it->second.seq);
  xwaiting_.erase(it);
}

Status Session::on(GateOpenMsg, const GateOpenReq&, Empty&) {
  throw ProtoError("GateOpen reached the dispatcher");
}

Status Session::on(EventNotifyMsg, const EventNotifyReq& q, Empty&) {
  uint64_t e = 0;
  if (Status s = event_of(q.device, q.event, e); !s.ok()) return s;
  const int dev = static_cast<int>(q.device);
  const uint64_t cb = q.callback;
  // RunCallback{cb} tells the client; from the completion thread or here, never blocking.
  auto notify = [this, cb] {
    push_frame(static_cast<uint16_t>(MsgId::RunCallback), 0, cb,
               encode_message(RunCallbackMsg{cb}));
  };
  // Done, never recorded, or failed (the failure is the event's server's to report): the waiting
  // stream goes on at once.
  if (Status s = exec_.event_query(dev, e); s.code != err::NotReady) {
    notify();
    return Status::success();
  }
  // The work recorded in the event now: a private stream waits for it (a later record of the
  // event does not move this wait), then hands the notification to the completion thread.  Each
  // wait has its stream to itself, so one notification never waits behind another.
  uint64_t ps = 0;
  Status s = acquire_stream(dev, ps);
  if (s.ok()) {
    s = exec_.stream_wait_event(dev, ps, e);
    if (!s.ok()) release_stream(dev, ps);
  }
  if (!s.ok()) {
    notify();  // the waiting stream must not hang; the error goes to the client
    return s;
  }
  return host_work_.on_stream(exec_, dev, ps, [this, dev, ps, notify] {
    release_stream(dev, ps);  // no backend call: the pool's lists only
    notify();
  });
}

}  // namespace rgpu::server
