#include "server/session.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <type_traits>

#include "backend/gate.h"
#include "common/log.h"
#include "common/spin.h"
#include "server/handshake.h"

namespace rgpu::server {

using namespace rgpu::proto;
using backend::Rect;
using Status = backend::Status;

namespace {

Status invalid(const char* what) { return Status::fail(err::InvalidValue, what); }

OutItem make_frame(uint16_t type, uint16_t flags, uint64_t id, const std::vector<uint8_t>& body) {
  OutItem item;
  item.head = channel::Channel::encode_head(type, flags, id, body);
  return item;
}

}  // namespace

Session::Session(transport::Connection& conn, backend::Executor& exec, SessionConfig config)
    : conn_(conn),
      exec_(exec),
      config_(std::move(config)),
      channel_(conn),
      outbox_(channel_, config_.outbox_bytes),
      in_pool_(exec, config_.payload_bytes, config_.payload_limit, config_.payload_spill),
      pool_(exec, config_.staging_bytes, config_.staging_limit),
      async_pool_(exec, config_.staging_bytes, config_.staging_limit),
      allocs_(exec.device_count()),
      windows_(exec),
      quota_(config_.mem_limit, config_.user_account),
      archs_(exec.device_count()),
      modules_(exec.device_count()),
      module_ids_(exec.device_count()),
      free_events_(exec.device_count()),
      free_streams_(exec.device_count()),
      all_events_(exec.device_count()),
      all_streams_(exec.device_count()) {}

Session::~Session() {
  stop_notifications();
  stop_peers();
  cancel_callbacks();
  exec_.cancel_stream_waits();  // drvlibs: a stream waiting on a value nobody writes now
  waiter_.stop();               // waits end: the gates are open, the GPU finishes
  destroy_links();
  for (size_t d = 0; d < allocs_.size(); ++d) exec_.synchronize(static_cast<int>(d));
  free_private();
  host_work_.stop();
  host_work_.drain();  // what host functions handed over (buffers back to their pools)
  for (size_t d = 0; d < allocs_.size(); ++d) close_vmm(static_cast<uint32_t>(d));
  windows_.release_all();
  free_gates();
  for (auto& [id, seg] : shared_) {
    exec_.host_unregister(seg.base);
    munmap(seg.base, seg.size);
  }
}

void Session::run() {
  try {
    if (!handshake()) return;
  } catch (const std::exception& e) {
    LOG_WARN("handshake with %s failed: %s", conn_.peer().c_str(), e.what());
    return;
  }
  // While requests are queued or in progress, the client hears from us at least every interval,
  // from the writer (never blocked by the GPU): a long kernel is not a dead server.
  outbox_.set_heartbeat(heartbeat_interval_, [this]() -> std::optional<OutItem> {
    // Busy also while streams hold the client's asynchronous payload: it may be waiting for
    // its window.
    uint32_t n = static_cast<uint32_t>(queued_.load(std::memory_order_acquire)) +
                 (serving_.load(std::memory_order_acquire) ? 1 : 0) +
                 static_cast<uint32_t>(waiter_.pending()) +
                 (held_payload_.load(std::memory_order_acquire) ? 1 : 0);
    if (n == 0) return std::nullopt;
    return make_frame(static_cast<uint16_t>(MsgId::Heartbeat), 0, 0,
                      encode_message(HeartbeatMsg{n}));
  });
  if (!config_.client_known.empty()) channel_.set_peer_known(config_.client_known);
  outbox_.start();
  host_work_.start();
  in_pool_.top_up(4);  // the first payloads land in page-locked memory
  std::thread dispatcher([this] { dispatch_loop(); });
  read_loop();
  // The client is gone (or broke the protocol): stop holding streams for it, finish.
  cancel_callbacks();
  exec_.cancel_stream_waits();
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    reader_done_ = true;
    queue_cv_.notify_one();
  }
  dispatcher.join();
  stop_peers();    // copies to or from other servers fail now; their gates open
  waiter_.stop();  // pending waits finish (their replies are dropped if the link is gone)
  drain_or_exit();
  host_work_.stop();  // runs what the streams handed over, then stops
  outbox_.stop();
}

void Session::drain_or_exit() {
  if (config_.drain_limit_s <= 0) {
    for (size_t d = 0; d < allocs_.size(); ++d) exec_.synchronize(static_cast<int>(d));
    return;
  }
  // The synchronizations run on a thread of their own, so that work which never finishes (a
  // kernel that does not end, a stream waiting on a value nobody will write now) cannot keep
  // this process, and the GPU memory it holds, for ever.
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread([this, done] {
    for (size_t d = 0; d < allocs_.size(); ++d) exec_.synchronize(static_cast<int>(d));
    done->set_value();
  }).detach();
  if (finished.wait_for(std::chrono::seconds(config_.drain_limit_s)) == std::future_status::ready)
    return;
  LOG_WARN(
      "session of %s: its GPU work still runs %d s after the client left (a kernel that does not "
      "end, or a stream waiting on a value nobody will write); the session process ends and the "
      "driver frees what it held",
      conn_.peer().c_str(), config_.drain_limit_s);
  std::_Exit(0);
}

bool Session::handshake() {
  if (!config_.authenticated) {
    HandshakeConfig hc{config_.token,          config_.server_info, exec_.device_count(),
                       exec_.driver_version(), exec_.name(),        nullptr,
                       payload_window(config_)};
    HelloReq hello;
    if (!server_handshake(conn_, hc, &hello)) return false;
    config_.client_timeout_ms = hello.timeout_ms;
    config_.client_known = hello.known;
  }
  // Heartbeats every quarter of the client's timeout (100 ms .. 1 s).
  const uint32_t t = config_.client_timeout_ms;
  heartbeat_interval_ =
      std::chrono::milliseconds(t ? std::clamp<uint32_t>(t / 4, 100, 1000) : 1000);
  // From now on a frame that has begun must be finished, and a send must progress, within
  // --client-timeout; the wait for the next frame has no limit (recv_idle_or_eof).
  conn_.set_recv_timeout(config_.client_timeout_s);
  conn_.set_send_timeout(config_.client_timeout_s);
  return true;
}

// ---- reader
// ---------------------------------------------------------------------------------------

void Session::read_loop() {
  try {
    for (;;) {
      Request r;
      if (!channel_.read_frame(r.header, r.body, channel::Channel::Wait::Idle)) {
        LOG_INFO("client %s disconnected", conn_.peer().c_str());
        return;
      }
      if (r.header.flags & kFlagReply) throw ProtoError("client sent a reply frame");
      if (r.header.type == static_cast<uint16_t>(MsgId::CallbackDone)) {
        // Answered here, never behind the dispatcher: a stream may be waiting for it.
        if (r.header.payload_len) throw ProtoError("CallbackDone with a payload");
        auto q = decode_message<CallbackDoneReq>(r.body.data(), r.body.size());
        std::lock_guard<std::mutex> lock(cb_mu_);
        auto it = callbacks_.find(q.id);
        if (it != callbacks_.end()) {
          backend::open_gate(it->second.word, it->second.seq);  // the stream goes on
          callbacks_.erase(it);
        }
        continue;
      }
      if (r.header.type == static_cast<uint16_t>(MsgId::GateOpen)) {
        // Here too: a stream waits for it (a wait for another server's event, server/xwaits.cc).
        if (r.header.payload_len) throw ProtoError("GateOpen with a payload");
        on_gate_open(decode_message<GateOpenReq>(r.body.data(), r.body.size()));
        continue;
      }
      Mode mode;
      Payload direction;
      if (!msg_info(r.header.type, &mode, &direction)) {
        // A request this server does not know (a newer client): its bytes are skipped and the
        // dispatcher answers it cudaErrorNotSupported in turn; the connection lives on.
        channel_.skip_rest(r.header);
        r.header.payload_len = 0;
        std::lock_guard<std::mutex> lock(queue_mu_);
        queue_.push_back(std::move(r));
        queued_.store(queue_.size(), std::memory_order_release);
        queue_cv_.notify_one();
        continue;
      }
      if (direction != Payload::In && r.header.payload_len)
        throw ProtoError("payload on a message that takes none");
      std::shared_ptr<PayloadStream> payload;
      if (r.header.payload_len) {
        payload = std::make_shared<PayloadStream>(in_pool_, r.header.payload_len);
        r.payload = payload;
      }
      {
        // Queued before its payload arrives: the dispatcher starts on the first chunks.
        std::lock_guard<std::mutex> lock(queue_mu_);
        queue_.push_back(std::move(r));
        queued_.store(queue_.size(), std::memory_order_release);
        queue_cv_.notify_one();
      }
      if (payload) {
        try {
          // Straight into page-locked buffers the backend can copy from.
          for (uint64_t left = payload->total(); left;) {
            size_t n = std::min<uint64_t>(left, in_pool_.buffer_bytes());
            // Never a backend call here (see BufferPool); bounded by the pool's limits.
            char* buf =
                in_pool_.acquire_reader(std::chrono::milliseconds(config_.payload_patience_ms));
            if (!buf)
              throw std::runtime_error(
                  "the client sent more payload than this session holds (" +
                  std::to_string((config_.payload_limit + config_.payload_spill) *
                                     config_.payload_bytes >>
                                 20) +
                  " MiB) while its earlier requests could not progress");
            try {
              conn_.recv(buf, n);
            } catch (...) {
              in_pool_.release(buf);
              throw;
            }
            payload->push({buf, n});
            left -= n;
          }
        } catch (...) {
          payload->abort();
          throw;
        }
      }
    }
  } catch (const ProtoError& e) {
    LOG_WARN("closing connection from %s: malformed message: %s", conn_.peer().c_str(), e.what());
  } catch (const transport::TransportError& e) {
    if (e.timed_out)
      LOG_WARN("ending the session of %s: %s", conn_.peer().c_str(), e.what());
    else
      LOG_INFO("client %s gone: %s", conn_.peer().c_str(), e.what());
  } catch (const std::exception& e) {
    LOG_ERROR("closing connection from %s: %s", conn_.peer().c_str(), e.what());
  }
  conn_.shutdown();
}

// ---- dispatcher
// -----------------------------------------------------------------------------------

void Session::dispatch_loop() {
  for (;;) {
    Request r;
    // Requests often come back to back: spin briefly before sleeping, which saves a thread wakeup
    // from every round trip.
    if (!spin_until([&] { return queued_.load(std::memory_order_acquire) != 0; })) {
      // Out of requests: window bytes given back so far go to the client now (it may be waiting
      // for them); later ones go at once until the next request comes.
      idle_.store(true);
      flush_credit();
    }
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [&] { return !queue_.empty() || reader_done_; });
      if (queue_.empty() || reader_done_) {
        queue_.clear();  // the client is gone: drop its requests (their buffers go back)
        if (reader_done_) return;
        continue;
      }
      r = std::move(queue_.front());
      queue_.pop_front();
      idle_.store(false);
      serving_.store(true, std::memory_order_release);
      queued_.store(queue_.size(), std::memory_order_release);
    }
    try {
      serve(r);
      if (r.payload) in_pool_.top_up();  // page-locked buffers for what the reader missed
    } catch (const ProtoError& e) {
      LOG_WARN("closing connection from %s: malformed message: %s", conn_.peer().c_str(), e.what());
      conn_.shutdown();
    } catch (const std::exception& e) {
      LOG_ERROR("closing connection from %s: %s", conn_.peer().c_str(), e.what());
      conn_.shutdown();
    }
    serving_.store(false, std::memory_order_release);
  }
}

void Session::serve(Request& r) {
  switch (r.header.type) {
#define RGPU_MSG(NAME, ID, MODE, PAYLOAD) \
  case ID:                                \
    dispatch<NAME##Msg>(r);               \
    return;
#include "proto/catalogue.def"
#undef RGPU_MSG
  }
  not_supported(r.header);
}

void Session::not_supported(const FrameHeader& h) {
  char type[16];
  snprintf(type, sizeof type, "0x%04x", h.type);
  std::string what = "this server (" + config_.server_info + ") does not know request type " +
                     type + " (a newer client?)";
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true)) LOG_WARN("client %s: %s", conn_.peer().c_str(), what.c_str());
  Status s = Status::fail(err::NotSupported, what);
  if (h.flags & kFlagSync)
    push_error(h, s);
  else
    push_async_error(h.request_id, h.type, s);
}

template <class M>
void Session::dispatch(Request& r) {
  const FrameHeader& h = r.header;
  typename M::Req req = decode_message<typename M::Req>(r.body.data(), r.body.size());
  uint64_t expect = 0;
  if constexpr (M::payload == Payload::In) expect = req.payload_bytes();
  if (h.payload_len != expect)
    throw ProtoError(std::string(M::name) + ": payload length does not match its fields");
  current_ = &r;
  reply_sent_ = false;
  // An asynchronous payload is given back to the client's window as the stream lets go of it
  // (write_rows); whatever the handler did not take is given back here.
  credit_left_ = (M::payload == Payload::In && M::mode == Mode::Async) ? h.payload_len : 0;
  held_payload_.fetch_add(credit_left_);

  typename M::Rep rep{};
  Status s;
  if (CudaError e = sticky_.load();
      e != err::Success && M::id != MsgId::Ping && M::id != MsgId::DeviceReset) {
    s = Status::fail(e, "the device context is unusable after an earlier error");
  } else if (graphs_.streams.empty() || !capture_request(r, s)) {
    s = on(M{}, req, rep);
  }
  if (!s.ok() && cuda_error_is_sticky(s.code)) latch_sticky(s.code);
  if (credit_left_) payload_done(std::exchange(credit_left_, 0));
  if (deferred_) {
    // The work is enqueued; a waiter waits for it and replies (server/waits.cc).
    if constexpr (M::mode == Mode::Sync && std::is_same_v<typename M::Rep, Empty>) {
      std::function<bool()> ready = std::exchange(deferred_ready_, nullptr);
      if (s.ok() && !deferred_now_ && ready) deferred_now_ = poll_ready(ready);
      if (s.ok() && std::exchange(deferred_now_, false)) {
        Wait wait = std::exchange(deferred_, nullptr);
        finish_wait(h, wait, launched_);  // ready: no handoff
        return;
      }
      if (s.ok()) {
        waiter_.post([this, h, wait = std::exchange(deferred_, nullptr),
                      launched = launched_]() mutable { finish_wait(h, wait, launched); });
        return;
      }
    }
    deferred_ = nullptr;  // (a handler defers only on success, and only for an Empty reply)
    deferred_now_ = false;
    deferred_ready_ = nullptr;
  }
  if (M::mode == Mode::Sync) host_work_.flush();  // what finished streams handed over goes first
  if (M::mode == Mode::Sync && launched_) forward_output();
  if (reply_sent_) return;  // a payload-out handler queued its reply itself
  if (M::mode == Mode::Sync) {
    if (s.ok())
      push_frame(h.type, kFlagReply, h.request_id, encode_ok_reply(rep), Outbox::Block::IfFull);
    else
      push_error(h, s);
  } else if (!s.ok()) {
    push_async_error(h.request_id, h.type, s);
  }
}

void Session::push_frame(uint16_t type, uint16_t flags, uint64_t id,
                         const std::vector<uint8_t>& body, Outbox::Block block) {
  outbox_.push(make_frame(type, flags, id, body), block);
}

void Session::payload_done(uint64_t bytes) {
  // Any thread (the dispatcher, the completion thread).  Gathered: a frame per MiB, or at once
  // when the dispatcher is idle (the client may be waiting for exactly these bytes).
  constexpr uint64_t kCreditBatch = 1u << 20;
  held_payload_.fetch_sub(bytes);
  uint64_t total = pending_credit_.fetch_add(bytes) + bytes;
  if (total >= kCreditBatch || idle_.load()) flush_credit();
}

void Session::flush_credit() {
  uint64_t bytes = pending_credit_.exchange(0);
  if (bytes)
    push_frame(static_cast<uint16_t>(MsgId::PayloadDone), 0, 0,
               encode_message(PayloadDoneMsg{bytes}));
}

// push_error and push_async_error are called by the dispatcher and waiters (never by host
// functions or the completion thread): they may wait for room.
void Session::push_error(const FrameHeader& h, const Status& s) {
  push_frame(h.type, kFlagReply, h.request_id, encode_error_reply(s.code, s.message),
             Outbox::Block::IfFull);
}

void Session::push_async_error(uint64_t request_id, uint16_t type, const Status& s) {
  const char* name = msg_name(type);
  LOG_INFO("%s (request %llu) failed: %s", name ? name : "?",
           static_cast<unsigned long long>(request_id), s.message.c_str());
  AsyncErrorMsg m{request_id, type, s.code, s.message};
  push_frame(static_cast<uint16_t>(MsgId::AsyncError), 0, request_id, encode_message(m),
             Outbox::Block::IfFull);
}

// ---- checks
// ---------------------------------------------------------------------------------------

Status Session::check_device(uint32_t dev) const {
  if (dev >= allocs_.size()) return Status::fail(err::InvalidDevice, "no such GPU on this server");
  return Status::success();
}

Status Session::check_range(uint32_t dev, uint64_t ptr, uint64_t pitch, uint64_t width,
                            uint64_t height, uint64_t born_by) const {
  if (Status s = check_device(dev); !s.ok()) return s;
  if (height > 1 && width > pitch)
    return Status::fail(err::InvalidPitchValue, "width exceeds pitch");
  if (width == 0 || height == 0) return Status::success();
  if (height > 1 && pitch > (UINT64_MAX - width) / (height - 1)) return invalid("pitch overflow");
  uint64_t extent = (height - 1) * pitch + width;
  if (!allocs_[dev].contains(ptr, extent, born_by))
    return invalid(born_by == UINT64_MAX
                       ? "address range is not inside one device allocation"
                       : "address range is not inside one device allocation made before the "
                         "request (freed and allocated again since?)");
  return Status::success();
}

// ---- handlers
// -------------------------------------------------------------------------------------

Status Session::on(PingMsg, const PingReq&, PingRep&) { return Status::success(); }

Status Session::on(HelloMsg, const HelloReq&, HelloRep&) {
  throw ProtoError("Hello after the handshake");
}
Status Session::on(AuthMsg, const AuthReq&, Empty&) {
  throw ProtoError("Auth after the handshake");
}
Status Session::on(CallbackDoneMsg, const CallbackDoneReq&, Empty&) {
  throw ProtoError("CallbackDone reached the dispatcher");
}

Status Session::on(GetDeviceInfoMsg, const DeviceReq& q, GetDeviceInfoRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  backend::DeviceInfo info;
  if (Status s = exec_.device_info(static_cast<int>(q.device), info); !s.ok()) return s;
  rep.name = info.name;
  memcpy(rep.uuid.data(), info.uuid, 16);
  rep.total_mem = info.total_mem;
  for (auto& [id, v] : info.attrs) rep.attrs.push_back({id, v});
  return Status::success();
}

bool Session::prune_ended_streams(uint32_t device) {
  bool idle = true;
  std::erase_if(ended_streams_, [&](const auto& m) {
    const int d = static_cast<int>(m.first);
    if (exec_.event_query(d, m.second).code == err::NotReady) {
      idle = idle && m.first != device;
      return false;
    }
    release_event(d, m.second);  // that stream's work is over
    return true;
  });
  return idle;
}

bool Session::device_idle(uint32_t device, size_t limit) {
  const int dev = static_cast<int>(device);
  if (exec_.stream_query(dev, 0).code == err::NotReady) return false;
  if (!prune_ended_streams(device)) return false;
  size_t n = 0;
  for (auto& [id, o] : streams_) {
    if (o.device != device || !o.busy) continue;
    if (++n > limit) return false;
    Status s = exec_.stream_query(dev, o.handle);
    if (s.code == err::NotReady) return false;
    if (s.ok()) o.busy = false;  // until stream_of hands it out again
  }
  return true;
}

Status Session::on(DeviceSynchronizeMsg, const DeviceReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  const int dev = static_cast<int>(q.device);
  if (pools_) pools_->trim_device(q.device);  // a synchronization point of stream-ordered frees
  // Ready when every stream of the device that was given work since it was last seen idle is
  // idle (a few queries; a private stream's copy in flight is a chunk's DMA at most); otherwise
  // on a waiter.
  const uint32_t device = q.device;
  defer([this, dev](bool&) { return exec_.synchronize(dev); }, device_idle(device),
        [this, device] { return device_idle(device); });
  return Status::success();
}

bool Session::poll_ready(const std::function<bool()>& ready) {
  bool got = false;
  spin_until(
      [&] {
        if (queued_.load(std::memory_order_acquire) != 0) return true;  // others need us
        return got = ready();
      },
      kDispatcherPoll);
  return got;
}

Status Session::on(DeviceResetMsg, const DeviceReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  int dev = static_cast<int>(q.device);
  waiter_.wait_idle();  // no wait may use the device's handles while they go
  exec_.synchronize(dev);
  if (peer_copier_) {  // peers' memory mapped on the device (server/peer_ipc.h)
    settle_peer_copies("resetting a device");
    peer_copier_->forget_device(dev);
  }
  close_ipc_imports(q.device);
  revoke_ipc_exports(q.device);  // the device's memory goes: so do its handles
  close_vmm(q.device);
  windows_.release_device(q.device);
  if (pools_) pools_->forget_device(q.device);
  allocs_[dev].clear();
  quota_.release_all(Hold::Malloc, q.device);  // pools, modules, VMM and IPC: below and above
  quota_.release_all(Hold::Pool, q.device);
  for (auto& [id, x] : graphs_.execs)  // native graphs go with the context: let them go first
    if (x.device == q.device) {
      drop_native(x);
      x.cond_lost = x.cond != nullptr;
    }
  unload_modules(dev);
  for (auto* objects : {&streams_, &events_})
    for (auto it = objects->begin(); it != objects->end();)
      it = it->second.device == q.device ? objects->erase(it) : std::next(it);
  std::erase_if(ended_streams_, [&](const auto& m) { return m.first == q.device; });
  drop_reclaim_marks(q.device);
  sticky_ = err::Success;
  Status s = exec_.reset(dev);
  forget_private(dev);  // the reset destroyed them
  return s;
}

Status Session::on(MemGetInfoMsg, const DeviceReq& q, MemGetInfoRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  wait_frees();  // memory freed before this call counts as free, as after cudaFree
  {
    std::lock_guard<std::timed_mutex> lock(heap_mu_);
    windows_.trim(q.device);  // and so does what the heaps keep mapped for reuse
  }
  return exec_.mem_info(static_cast<int>(q.device), rep.free, rep.total);
}

Status Session::on(MallocMsg, const MallocReq& q, MallocRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (q.size == 0) return invalid("zero-byte allocation");
  if (Status s = charge_memory(Hold::Malloc, q.device, q.size,
                               "allocating " + std::to_string(q.size) + " bytes");
      !s.ok())
    return s;
  Status s;
  {
    std::lock_guard<std::timed_mutex> lock(heap_mu_);
    s = windows_.alloc(q.device, q.window, q.size, rep.ptr);
  }
  if (s.code == err::MemoryAllocation) {
    // Memory the client freed may still be on its way back: once it is, try again.
    bool pending;
    {
      std::lock_guard<std::mutex> lock(free_mu_);
      pending = free_draining_;
    }
    if (pending) {
      wait_frees();
      std::lock_guard<std::timed_mutex> lock(heap_mu_);
      s = windows_.alloc(q.device, q.window, q.size, rep.ptr);
    }
  }
  if (s.ok())
    allocs_[q.device].add(rep.ptr, q.size);
  else
    quota_.release(Hold::Malloc, q.device, q.size);
  return s;
}

Status Session::charge_memory(Hold why, uint32_t dev, uint64_t bytes, const std::string& action) {
  if (!quota_.fits(bytes) && pools_)
    for (size_t d = 0; d < allocs_.size(); ++d) pools_->release_cached(static_cast<uint32_t>(d));
  return quota_.charge(why, dev, bytes, action);
}

Status Session::on(FreeMsg, const FreeReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (!allocs_[q.device].is_base(q.ptr))
    return invalid("free of a pointer that is not an allocation");
  uint64_t size = 0;
  allocs_[q.device].remove(q.ptr, &size);  // later requests may not use it
  quota_.release(Hold::Malloc, q.device, size);
  revoke_ipc_export(q.device, q.ptr);            // nor may a handle of it open anything any more
  revoke_ipc_exports_in(q.device, q.ptr, size);  // nor a handle of a part (small allocations)
  defer_free(static_cast<int>(q.device), q.ptr, current_->header);
  return Status::success();
}

// Like cudaFree, the memory is released only once the GPU is past the work issued before the
// free (nothing queued still uses memory that is unmapped or handed out again) — but the wait
// happens on a waiter, so other streams' work goes on.  Frees that come while one waits are
// batched behind one synchronization.
void Session::defer_free(int device, uint64_t ptr, const FrameHeader& h) {
  bool post;
  {
    std::lock_guard<std::mutex> lock(free_mu_);
    pending_frees_.push_back({device, ptr, h.request_id, h.type, peer_host_.get()});
    post = !std::exchange(free_draining_, true);
  }
  if (post) waiter_.post([this] { drain_frees(); });
}

void Session::drain_frees() {
  for (;;) {
    std::vector<PendingFree> batch;
    {
      std::lock_guard<std::mutex> lock(free_mu_);
      if (pending_frees_.empty()) {
        free_draining_ = false;
        free_cv_.notify_all();
        return;
      }
      batch.swap(pending_frees_);
    }
    // Another server's link may be in the middle of a copy whose rows it checked before the
    // allocation left the table: that copy ends first (its GPU work then ends in the sync).
    PeerHost* peers = nullptr;
    for (const PendingFree& f : batch) peers = f.peers ? f.peers : peers;
    const auto limit = std::chrono::seconds(std::max(config_.client_timeout_s, 1) + 5);
    if (peers && !peers->wait_quiet(limit))
      LOG_WARN("a free waited %lld s for copies from other servers; freeing anyway",
               static_cast<long long>(limit.count()));
    std::map<int, Status> synced;
    for (const PendingFree& f : batch)
      if (!synced.count(f.device)) synced[f.device] = exec_.synchronize(f.device);
    for (const PendingFree& f : batch) {
      Status s;
      {
        std::lock_guard<std::timed_mutex> lock(heap_mu_);
        s = windows_.free(static_cast<uint32_t>(f.device), f.ptr);
      }
      if (const Status& sync = synced[f.device]; !sync.ok()) s = sync;
      if (!s.ok()) {
        if (cuda_error_is_sticky(s.code)) latch_sticky(s.code);
        push_async_error(f.request_id, f.type, s);
      }
    }
  }
}

void Session::wait_frees() {
  std::unique_lock<std::mutex> lock(free_mu_);
  free_cv_.wait(lock, [&] { return !free_draining_; });
}

Status Session::on(AddressWindowMsg, const AddressWindowReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  std::lock_guard<std::timed_mutex> lock(heap_mu_);
  return windows_.add(q.device, q.base, q.size);
}

Status Session::on(MemcpyDtoDMsg, const MemcpyDtoDReq& q, Empty&) {
  if (Status s = check_range(q.device, q.dst, q.size, q.size, 1); !s.ok()) return s;
  if (Status s = check_range(q.device, q.src, q.size, q.size, 1); !s.ok()) return s;
  uint64_t stream = 0;
  if (Status s = stream_of(q.device, q.stream, stream); !s.ok()) return s;
  if (q.size == 0) return Status::success();
  return exec_.copy_on_device(static_cast<int>(q.device), q.dst, q.size, q.src, q.size,
                              Rect{q.size, 1}, stream);
}

Status Session::on(Memcpy2DDtoDMsg, const Memcpy2DDtoDReq& q, Empty&) {
  if (Status s = check_range(q.device, q.dst, q.dpitch, q.width, q.height); !s.ok()) return s;
  if (Status s = check_range(q.device, q.src, q.spitch, q.width, q.height); !s.ok()) return s;
  uint64_t stream = 0;
  if (Status s = stream_of(q.device, q.stream, stream); !s.ok()) return s;
  if (q.width == 0 || q.height == 0) return Status::success();
  return exec_.copy_on_device(static_cast<int>(q.device), q.dst, q.dpitch, q.src, q.spitch,
                              Rect{q.width, q.height}, stream);
}

Status Session::on(MemsetMsg, const MemsetReq& q, Empty&) {
  if (Status s = check_range(q.device, q.ptr, q.size, q.size, 1); !s.ok()) return s;
  uint64_t stream = 0;
  if (Status s = stream_of(q.device, q.stream, stream); !s.ok()) return s;
  if (q.size == 0) return Status::success();
  return exec_.memset(static_cast<int>(q.device), q.ptr, q.value, q.size, stream);
}

}  // namespace rgpu::server
