// cudaStreamWaitEvent with the stream and the event on two different servers.  The stream's server
// holds the stream at a gate (StreamGateWait); the event's server tells us, as a callback, when
// the work recorded in the event at the time of the call is done (EventNotify); our callback
// thread then opens the gate (GateOpen).  If the event's server is lost first, the gate opens with
// an error that the stream's server reports as an asynchronous error naming the lost server, so
// nothing waits for ever.  See proto/messages_xorder.h.
#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

CudaError ServerLink::event_notify(uint32_t gpu, uint64_t event, std::function<void()> fn) {
  if (CudaError e = ensure_connected(); e != err::Success) return e;
  if (!server_knows(static_cast<uint16_t>(MsgId::EventNotify), "EventNotify"))
    return err::NotSupported;
  return callback_request(static_cast<uint16_t>(MsgId::EventNotify), std::move(fn),
                          [&](uint64_t id) {
                            return encode_message(EventNotifyReq{gpu, event, id});
                          });
}

CudaError Client::cross_server_wait(const Stream& s, Event* ev) {
  unsigned capture = 0;
  if (gmem_capture(s, &capture) || capture) {
    if (first_time("capture wait across servers"))
      LOG_ERROR(
          "a capturing stream cannot wait for an event of another server "
          "(cudaErrorNotSupported)");
    return err::NotSupported;
  }
  CudaError e;
  ServerLink* sl = link(s.device, &e);
  if (!sl) return e;
  ServerLink* el = link(ev->device, &e);
  if (!el) return e;
  uint64_t gate;
  {
    std::lock_guard<std::mutex> lock(xwait_mu_);
    gate = next_gate_++;
    xwaits_[gate] = CrossWait{el, sl};
  }
  // The stream is held first, so that nothing enqueued on it after this call can run before the
  // event's work; then the event's server is asked.
  e = sl->call<StreamGateWaitMsg>(StreamGateWaitReq{devices_[s.device].spec.gpu, s.id, gate});
  if (e != err::Success) {
    std::lock_guard<std::mutex> lock(xwait_mu_);
    xwaits_.erase(gate);
    return e;
  }
  e = el->event_notify(devices_[ev->device].spec.gpu, ev->id,
                       [this, gate] { open_cross_gate(gate, err::Success, ""); });
  if (e != err::Success)  // the stream must not stay held
    open_cross_gate(gate, e,
                    "cudaStreamWaitEvent: cannot ask rgpud at " + el->address() +
                        " (the event's server) about the event");
  return e;
}

void Client::open_cross_gate(uint64_t gate, CudaError error, const std::string& why) {
  ServerLink* sl = nullptr;
  {
    std::lock_guard<std::mutex> lock(xwait_mu_);
    auto it = xwaits_.find(gate);
    if (it == xwaits_.end()) return;  // opened already
    sl = it->second.stream_link;
    xwaits_.erase(it);
  }
  // Asynchronous: if the stream's own server is gone, there is nothing left to open.
  sl->call<GateOpenMsg>(GateOpenReq{gate, error, why});
}

void Client::event_link_lost(ServerLink* l, const std::string& why) {
  std::vector<uint64_t> gates;
  {
    std::lock_guard<std::mutex> lock(xwait_mu_);
    for (auto& [gate, w] : xwaits_)
      if (w.event_link == l) gates.push_back(gate);
  }
  for (uint64_t g : gates)
    open_cross_gate(g, err::DevicesUnavailable,
                    "cudaStreamWaitEvent: lost rgpud at " + l->address() +
                        " (the server of the event this stream waits for): " + why);
}

}  // namespace rgpu::client
