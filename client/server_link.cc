#include "client/server_link.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "channel/handshake.h"
#include "client/link_stats.h"
#include "client/tls_link.h"
#include "common/log.h"
#include "common/spin.h"
#include "common/strings.h"
#include "transport/registry.h"
#include "transport/tcp/net_emu.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {

std::string client_arch() {
  utsname u{};
  uname(&u);
  return std::string(u.machine) + "-le-lp64";
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Payloads are received in pieces of this size, each one proof of life (at RGPU_TIMEOUT=10 a link
// slower than 0.4 MB/s would be taken for silence).
constexpr uint64_t kLifeChunk = 4u << 20;

std::string client_info() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string prog;
  std::ifstream("/proc/self/comm") >> prog;
  // The tag announces RGPU_NET_EMU: rgpud then emulates its direction too (net_emu.h).
  return std::string(host) + " pid " + std::to_string(getpid()) + " " + prog +
         transport::net_emu_tag();
}

}  // namespace

ServerLink::ServerLink(std::string host, uint16_t port, std::optional<std::string> token,
                       int timeout_s, proto::LinkPurpose purpose)
    : host_(std::move(host)),
      port_(port),
      token_(std::move(token)),
      timeout_s_(timeout_s),
      purpose_(purpose),
      stats_(&LinkStats::of_this_library()) {}

ServerLink::~ServerLink() {
  // Links live as long as the process (the client core is never destroyed); if one is destroyed,
  // its threads are stopped by closing the connection (a close of ours, not a lost link: the
  // receiver's failure is not logged).
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == err::Success) state_ = err::DevicesUnavailable;
    failed_.store(true, std::memory_order_release);
  }
  if (conn_) conn_->shutdown();
  if (receiver_.joinable()) receiver_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
    cb_cv_.notify_all();
  }
  if (callback_thread_.joinable()) callback_thread_.join();
}

CudaError ServerLink::ensure_connected() {
  if (connected_.load(std::memory_order_acquire)) return err::Success;
  std::lock_guard<std::mutex> lock(connect_mu_);
  return connect_locked();
}

bool ServerLink::read_frame(FrameHeader& h, std::vector<uint8_t>& body, bool idle) {
  if (!chan_->read_frame(h, body,
                         idle ? channel::Channel::Wait::Idle : channel::Channel::Wait::Timed))
    return false;
  note_life();
  return true;
}

void ServerLink::note_life() { last_rx_ns_.store(now_ns(), std::memory_order_relaxed); }

void ServerLink::recv_noting_life(const iovec* iov, int count) {
  std::vector<iovec> piece;
  uint64_t in_piece = 0;
  auto flush = [&] {
    for (size_t i = 0; i < piece.size(); i += IOV_MAX) {
      int n = static_cast<int>(std::min<size_t>(IOV_MAX, piece.size() - i));
      chan_->read_payload(piece.data() + i, n);
    }
    note_life();
    piece.clear();
    in_piece = 0;
  };
  for (int k = 0; k < count; ++k) {
    char* p = static_cast<char*>(iov[k].iov_base);
    uint64_t left = iov[k].iov_len;
    while (left) {
      uint64_t n = std::min(left, kLifeChunk - in_piece);
      piece.push_back({p, n});
      p += n, left -= n, in_piece += n;
      if (in_piece == kLifeChunk) flush();
    }
  }
  if (!piece.empty()) flush();
}

CudaError ServerLink::connect_locked() {
  if (tried_) {
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
  }
  tried_ = true;
  auto fail = [&](CudaError e) {
    chan_.reset();
    conn_.reset();
    std::lock_guard<std::mutex> lock(mu_);
    return state_ = e;
  };
  // RGPU_TRANSPORT: auto (the registry's best transport for this server), or a provider's name.
  const char* t = getenv("RGPU_TRANSPORT");
  const std::string mode = t && *t ? t : "auto";
  std::string tls_text;
  const int tls = tls_setting(tls_text);  // RGPU_TLS (client/tls_link.h)
  if (tls < 0) {
    LOG_ERROR("RGPU_TLS=%s: use 1 (TLS on TCP links) or 0", tls_text.c_str());
    return fail(err::InvalidValue);
  }
  // RGPU_TIMEOUT bounds connecting and the whole handshake.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s_);
  auto left_s = [&]() -> int {
    if (timeout_s_ <= 0) return 0;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
    return static_cast<int>(std::max<int64_t>(1, (ms + 999) / 1000));
  };
  const transport::Provider* provider = nullptr;
  try {
    auto c = transport::Registry::builtin().connect({host_, port_}, mode, tls != 0, left_s());
    conn_ = std::move(c.conn);
    provider = c.provider;
  } catch (const transport::ConnectError& e) {
    LOG_ERROR("%s", e.what());
    return fail(e.bad_setting ? err::InvalidValue : err::DevicesUnavailable);
  }
  if (tls && provider->capabilities().tls_wraps) {
    try {
      conn_ = secure_link(std::move(conn_), host_);
    } catch (const transport::TransportError& e) {
      LOG_ERROR("TLS with rgpud at %s failed: %s", address().c_str(), e.what());
      return fail(err::DevicesUnavailable);
    }
  }
  try {
    chan_ = std::make_unique<channel::Channel>(*conn_);
    HelloReq hello;
    hello.arch = client_arch();
    hello.client_info = client_info();
    hello.timeout_ms = static_cast<uint32_t>(timeout_s_) * 1000u;
    hello.purpose = static_cast<uint32_t>(purpose_);
    channel::HandshakeResult hs = channel::request_handshake(*chan_, hello, token_, left_s);
    if (hs.error != err::Success) {
      LOG_ERROR("rgpud at %s refused the connection: %s", address().c_str(), hs.message.c_str());
      return fail(hs.error);
    }
    const HelloRep& rep = hs.hello;
    hello_ = ServerHello{rep.gpu_count,   rep.driver_version, rep.backend,
                         rep.server_info, conn_->kind(),      conn_->capabilities()};
    window_ = rep.payload_window;
    LOG_INFO("connected to %s at %s (%u GPU(s), %s backend)", rep.server_info.c_str(),
             address().c_str(), rep.gpu_count, rep.backend.c_str());
  } catch (const transport::TransportError& ex) {
    if (ex.timed_out)
      LOG_ERROR("rgpud at %s did not complete the handshake within %d s (RGPU_TIMEOUT): %s",
                address().c_str(), timeout_s_, ex.what());
    else
      LOG_ERROR("handshake with rgpud at %s failed: %s", address().c_str(), ex.what());
    return fail(err::DevicesUnavailable);
  } catch (const std::exception& ex) {
    LOG_ERROR("handshake with rgpud at %s failed: %s", address().c_str(), ex.what());
    return fail(err::DevicesUnavailable);
  }
  // From now on: a frame that has begun must finish, and a send must progress, within
  // RGPU_TIMEOUT; silence between frames is judged by waiting callers (wait_alive).
  conn_->set_recv_timeout(timeout_s_);
  conn_->set_send_timeout(timeout_s_);
  note_life();
  receiver_ = std::thread([this] { receive_loop(); });
  callback_thread_ = std::thread([this] { callback_loop(); });
  connected_.store(true, std::memory_order_release);
  return err::Success;
}

void ServerLink::fail_link(const std::string& why) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool first = state_ == err::Success;
  if (first) LOG_ERROR("lost the connection to rgpud at %s: %s", address().c_str(), why.c_str());
  state_ = err::DevicesUnavailable;
  failed_.store(true, std::memory_order_release);
  // Every waiter is woken, except one whose buffers the receiver may still be writing: the
  // receiver finishes it (with its reply, or with this failure once its receive fails).
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->second == receiving_) {
      ++it;
      continue;
    }
    it->second->result = err::DevicesUnavailable;
    it->second->done = true;
    it = waiting_.erase(it);
  }
  async_dst_.clear();
  callbacks_.clear();
  cv_.notify_all();
  cb_cv_.notify_all();
  window_cv_.notify_all();
  // After the reason is recorded (the receiver's own failure, which this causes, is not the
  // story); a receiver blocked in a waiter's buffers returns from them.
  if (conn_) conn_->shutdown();
  lock.unlock();
  if (first && on_failure_) on_failure_(why);  // e.g. streams of other servers waiting for us
}

void ServerLink::wait_alive(std::unique_lock<std::mutex>& lock, Pending& p) {
  wait_alive(
      lock, cv_, [&] { return p.done.load(); }, "a call");
}

void ServerLink::wait_alive(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                            const std::function<bool()>& done, const char* who) {
  const int64_t limit_ns = int64_t{timeout_s_} * 1000000000;
  const auto tick = std::chrono::milliseconds(std::min(250, timeout_s_ * 250));
  int64_t started = now_ns(), last_look = started;
  while (!done()) {
    if (cv.wait_for(lock, tick, done)) return;
    int64_t now = now_ns();
    // This process itself was stopped or starved (the look came far too late): what the server
    // sent meanwhile may still be unread, so silence is measured afresh.
    if (now - last_look > limit_ns / 2) started = now;
    last_look = now;
    int64_t silent = now - std::max(started, last_rx_ns_.load(std::memory_order_relaxed));
    if (silent < limit_ns || state_ != err::Success) continue;
    char why[200];
    snprintf(why, sizeof why,
             "nothing arrived from it for %.1f s while %s waited (RGPU_TIMEOUT=%d): the "
             "server is stopped, hung or unreachable",
             static_cast<double>(silent) / 1e9, who, timeout_s_);
    lock.unlock();
    fail_link(why);
    lock.lock();
  }
}

namespace {
// The place of the last synchronous request this thread sent (on whichever link): note_idle's.
thread_local uint64_t t_last_sync_frame = 0;
}  // namespace

CudaError ServerLink::send_frame(uint16_t type, uint16_t flags, uint64_t id,
                                 const std::vector<uint8_t>& body, const iovec* out, int n_out) {
  const uint64_t place = chan_->send(type, flags, id, body, out, n_out);
  if (flags & kFlagSync) t_last_sync_frame = place;
  return err::Success;
}

void ServerLink::note_idle(uint32_t gpu, uint64_t stream) {
  std::lock_guard<std::mutex> lock(idle_mu_);
  if (idle_at_.size() > 256) idle_at_.clear();  // (streams come and go)
  idle_at_[{gpu, stream}] = t_last_sync_frame;
}

bool ServerLink::known_idle(uint32_t gpu, uint64_t stream) {
  if (!chan_) return false;
  const uint64_t now = chan_->frames_sent();
  std::lock_guard<std::mutex> lock(idle_mu_);
  for (uint64_t s : {stream, kAllStreams})
    if (auto it = idle_at_.find({gpu, s}); it != idle_at_.end() && it->second == now) return true;
  return false;
}

bool ServerLink::server_knows(uint16_t type, const char* name) {
  if (chan_->peer_knows(type)) return true;
  // An older server: the call is refused here, once logged by name.
  std::lock_guard<std::mutex> lock(mu_);
  if (unknown_logged_.insert(type).second)
    LOG_WARN("rgpud at %s (%s) does not support %s: update the server", address().c_str(),
             hello_.info.c_str(), name ? name : "this request");
  return false;
}

CudaError ServerLink::transact(uint16_t type, const char* name, bool sync,
                               std::vector<uint8_t> body, const iovec* out, int n_out,
                               const iovec* in, int n_in, Decoder decode, void* rep,
                               std::string* why) {
  if (CudaError e = ensure_connected(); e != err::Success) return e;
  if (failed_.load(std::memory_order_acquire)) {  // asynchronous requests too: fail at once
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
  }
  if (!server_knows(type, name)) return err::NotSupported;
  const uint64_t id = chan_->next_request_id();
  Pending p;
  p.decode = decode;
  p.rep = rep;
  p.in = in;
  p.n_in = n_in;
  p.expect_in = 0;
  for (int i = 0; i < n_in; ++i) p.expect_in += in[i].iov_len;
  if (sync) {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != err::Success) return state_;
    waiting_[id] = &p;
    // A device-to-host copy's data comes as AsyncData frames (rows of equal width) before the
    // reply.
    if (n_in) async_dst_[id] = AsyncDst{std::vector<iovec>(in, in + n_in), in[0].iov_len, &p};
  } else if (n_out) {
    // Flow control: asynchronous payload waits while the server holds a window's worth of it (the
    // server gives bytes back with PayloadDone as its streams get past them).  One larger than the
    // window goes alone.
    uint64_t bytes = 0;
    for (int i = 0; i < n_out; ++i) bytes += out[i].iov_len;
    std::unique_lock<std::mutex> lock(mu_);
    auto room = [&] {
      return state_ != err::Success || window_ == 0 || async_out_ == 0 ||
             async_out_ + bytes <= window_;
    };
    // The server holding our bytes sends heartbeats: silence means it is gone.
    if (timeout_s_ > 0)
      wait_alive(lock, window_cv_, room, "an asynchronous copy");
    else
      window_cv_.wait(lock, room);
    if (state_ != err::Success) return state_;
    async_out_ += bytes;
  }
  try {
    send_frame(type, sync ? kFlagSync : 0, id, body, out, n_out);
    uint64_t bytes = 0;
    for (int i = 0; i < n_out; ++i) bytes += out[i].iov_len;
    stats_->note_request(type, sync, bytes, p.expect_in);
  } catch (const std::exception& ex) {
    fail_link(ex.what());
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
  }
  if (!sync) return err::Success;
  // A reply on a fast link comes within microseconds: spin briefly before sleeping, which saves
  // the receiver's wakeup of this thread from the round trip.
  // Once done is seen the receiver no longer touches `p`, and it wakes us only if we sleep.
  if (!spin_until([&] { return p.done.load(std::memory_order_acquire); })) {
    std::unique_lock<std::mutex> lock(mu_);
    p.sleeping = true;
    if (timeout_s_ > 0)
      wait_alive(lock, p);
    else
      cv_.wait(lock, [&] { return p.done.load(); });
  }
  if (n_in) {  // a failed copy may not have sent every piece
    std::lock_guard<std::mutex> lock(mu_);
    if (async_dst_.erase(id)) cv_.notify_all();  // wait_async_data_outside
  }
  if (p.result != err::Success) {
    if (why) *why = p.message;
    if (!p.message.empty()) LOG_INFO("%s failed: %s", name, p.message.c_str());
    if (!p.message.empty() && p.result != err::NotReady)  // the logs API (client/logs.h)
      note_server_error(std::string("rgpud: ") + name + " failed: " + p.message);
    if (cuda_error_is_sticky(p.result)) sticky_.store(p.result, std::memory_order_release);
    return p.result;
  }
  if (has_pending_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mu_);
    CudaError e = pending_;
    pending_ = err::Success;
    has_pending_ = false;
    if (cuda_error_is_sticky(e)) sticky_.store(e, std::memory_order_release);
    if (e != err::Success) return e;
  }
  return err::Success;
}

CudaError ServerLink::error_to_report() {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.load(std::memory_order_acquire)) return state_;
  if (has_pending_.load(std::memory_order_acquire)) {
    const CudaError e = pending_;
    pending_ = err::Success;
    has_pending_ = false;
    if (cuda_error_is_sticky(e)) sticky_.store(e, std::memory_order_release);
    if (e != err::Success) return e;
  }
  return sticky_.load(std::memory_order_acquire);
}

void ServerLink::defer_error(CudaError e) {
  if (e == err::Success) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_ == err::Success) pending_ = e;
  has_pending_ = true;
}

namespace {
// The addresses [*lo, *hi) that `rows` cover ([0, 0) for none).
void span_of(const std::vector<iovec>& rows, uint64_t* lo, uint64_t* hi) {
  *lo = rows.empty() ? 0 : UINT64_MAX, *hi = 0;
  for (const iovec& r : rows) {
    const auto a = reinterpret_cast<uint64_t>(r.iov_base);
    *lo = std::min(*lo, a);
    *hi = std::max(*hi, a + r.iov_len);
  }
}
}  // namespace

CudaError ServerLink::transact_async_data(uint16_t type, std::vector<uint8_t> body,
                                          std::vector<iovec> rows, uint64_t width) {
  if (CudaError e = ensure_connected(); e != err::Success) return e;
  if (!server_knows(type, msg_name(type))) return err::NotSupported;
  const uint64_t id = chan_->next_request_id();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != err::Success) return state_;
    uint64_t bytes = 0;
    for (const iovec& r : rows) bytes += r.iov_len;
    stats_->note_request(type, false, 0, bytes);
    AsyncDst d{std::move(rows), width};
    span_of(d.rows, &d.lo, &d.hi);
    async_dst_[id] = std::move(d);
  }
  try {
    send_frame(type, 0, id, body, nullptr, 0);
  } catch (const std::exception& ex) {
    fail_link(ex.what());
    return err::DevicesUnavailable;
  }
  return err::Success;
}

CudaError ServerLink::register_memory(uint32_t gpu, const transport::MemoryRegion& r,
                                      uint64_t& key) {
  if (CudaError e = ensure_connected(); e != err::Success) return e;
  std::lock_guard<std::mutex> lock(fd_mu_);
  try {
    key = conn_->register_memory(r);
  } catch (const std::exception& ex) {
    LOG_INFO("cannot share page-locked memory: %s", ex.what());
    return err::NotSupported;
  }
  CudaError e = call<HostShmRegisterMsg>(HostShmRegisterReq{gpu, key, r.size});
  if (e != err::Success) conn_->unregister_memory(key);
  return e;
}

uint64_t ServerLink::keep_callback(std::function<void()> fn) {
  const uint64_t id = new_id();
  std::lock_guard<std::mutex> lock(mu_);
  callbacks_[id] = std::move(fn);
  return id;
}

CudaError ServerLink::host_func(uint32_t gpu, uint64_t stream, std::function<void()> fn) {
  return callback_request(static_cast<uint16_t>(MsgId::HostFunc), std::move(fn), [&](uint64_t id) {
    return encode_message(HostFuncReq{gpu, stream, id});
  });
}

CudaError ServerLink::callback_request(uint16_t type, std::function<void()> fn,
                                       const std::function<std::vector<uint8_t>(uint64_t)>& body) {
  if (CudaError e = ensure_connected(); e != err::Success) return e;
  const uint64_t id = new_id();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != err::Success) return state_;
    callbacks_[id] = std::move(fn);
  }
  stats_->note_request(static_cast<uint16_t>(MsgId::HostFunc), false, 0, 0);
  try {
    send_frame(type, 0, chan_->next_request_id(), body(id), nullptr, 0);
  } catch (const std::exception& ex) {
    fail_link(ex.what());
    return err::DevicesUnavailable;
  }
  return err::Success;
}

// ---- the receiver thread
// --------------------------------------------------------------------------

void ServerLink::receive_loop() {
  std::vector<uint8_t> body;
  try {
    for (;;) {
      FrameHeader h;
      if (!read_frame(h, body, true))
        throw transport::TransportError("rgpud closed the connection");
      if (h.flags & kFlagReply) {
        Pending* p = nullptr;
        {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = waiting_.find(h.request_id);
          if (it == waiting_.end()) throw ProtoError("a reply nobody waits for");
          p = it->second;
          receiving_ = p;
        }
        CudaError e = p->decode(p->rep, body, p->message);
        if (h.payload_len) {
          if (e != err::Success || h.payload_len != p->expect_in)
            throw ProtoError("reply payload does not match the request");
          recv_noting_life(p->in, p->n_in);
        }
        if (h.flags & kFlagTrailer) e = chan_->read_trailer();
        bool wake;
        {
          std::lock_guard<std::mutex> lock(mu_);
          waiting_.erase(h.request_id);
          receiving_ = nullptr;
          p->result = e;
          wake = p->sleeping;
          p->done.store(true, std::memory_order_release);  // `p` may be gone after this
        }
        if (wake) cv_.notify_all();
        continue;
      }
      switch (static_cast<MsgId>(h.type)) {
        case MsgId::AsyncError: {
          AsyncErrorMsg m = decode_message<AsyncErrorMsg>(body.data(), body.size());
          const char* what = msg_name(m.msg_type);
          // A failure just like the one before is counted, not logged again (a link that fails
          // under thousands of queued copies fails each of them the same way).
          if (m.msg_type == last_async_type_ && m.message == last_async_message_) {
            ++async_repeats_;
          } else {
            if (async_repeats_)
              LOG_WARN("(the failure before this one came %llu more time(s))",
                       static_cast<unsigned long long>(async_repeats_));
            LOG_WARN("asynchronous %s failed: %s", what ? what : "request", m.message.c_str());
            last_async_type_ = m.msg_type;
            last_async_message_ = m.message;
            async_repeats_ = 0;
          }
          if (m.msg_type == static_cast<uint16_t>(MsgId::PeerCopy)) ++peer_copy_failures_;
          std::lock_guard<std::mutex> lock(mu_);
          if (pending_ == err::Success) pending_ = m.error;
          has_pending_ = true;
          if (async_dst_.erase(m.request_id)) cv_.notify_all();  // wait_async_data_outside
          break;
        }
        case MsgId::DeviceOutput: {
          // What kernels printed: onto this process's stdout, before the call returns.
          DeviceOutputMsg m = decode_message<DeviceOutputMsg>(body.data(), body.size());
          fwrite(m.bytes.data(), 1, m.bytes.size(), stdout);
          fflush(stdout);
          break;
        }
        case MsgId::DeviceStderr: {
          // What kernels wrote to stderr (a failed device assert): onto this process's stderr.
          DeviceStderrMsg m = decode_message<DeviceStderrMsg>(body.data(), body.size());
          fwrite(m.bytes.data(), 1, m.bytes.size(), stderr);
          fflush(stderr);
          break;
        }
        case MsgId::AsyncData:
          receive_async_data(h, body);
          break;
        case MsgId::PayloadDone: {
          PayloadDoneMsg m = decode_message<PayloadDoneMsg>(body.data(), body.size());
          std::lock_guard<std::mutex> lock(mu_);
          async_out_ -= std::min(async_out_, m.bytes);
          window_cv_.notify_all();
          break;
        }
        case MsgId::Heartbeat:  // the server is busy, not gone (read_frame noted the life)
          decode_message<HeartbeatMsg>(body.data(), body.size());
          break;
        case MsgId::AsyncNotify: {
          AsyncNotifyMsg m = decode_message<AsyncNotifyMsg>(body.data(), body.size());
          NotifySink sink;
          {
            std::lock_guard<std::mutex> lock(mu_);
            sink = notify_sink_;
          }
          if (sink) sink(this, m.device, m.type, m.value);
          break;
        }
        case MsgId::RunCallback: {
          RunCallbackMsg m = decode_message<RunCallbackMsg>(body.data(), body.size());
          std::lock_guard<std::mutex> lock(mu_);
          // A graph's host node (bit 63): its function stays for the next replay.
          const bool graph = m.id >> 63;
          auto it = callbacks_.find(graph ? m.id & ((1ull << 40) - 1) : m.id);
          if (it == callbacks_.end()) throw ProtoError("a callback nobody queued");
          to_run_.emplace_back(m.id, graph ? it->second : std::move(it->second));
          if (!graph) callbacks_.erase(it);
          cb_cv_.notify_one();
          break;
        }
        default: {
          // A frame this library does not know (a newer server): skipped, logged once.
          Direction d;
          Mode m;
          Payload pl;
          if (!push_info(h.type, &d) && !msg_info(h.type, &m, &pl)) {
            chan_->skip_rest(h);
            std::lock_guard<std::mutex> lock(mu_);
            if (unknown_logged_.insert(h.type).second)
              LOG_INFO(
                  "rgpud at %s sent a frame of type 0x%04x this library does not know; "
                  "skipped",
                  address().c_str(), h.type);
            break;
          }
          throw ProtoError("unexpected frame from the server (type " + std::to_string(h.type) +
                           ')');
        }
      }
    }
  } catch (const std::exception& ex) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      receiving_ = nullptr;
      delivering_lo_ = delivering_hi_ = 0;  // this thread writes no more
    }
    fail_link(ex.what());
    cv_.notify_all();
  }
}

void ServerLink::receive_async_data(const FrameHeader& h, const std::vector<uint8_t>& body) {
  AsyncDataMsg m = decode_message<AsyncDataMsg>(body.data(), body.size());
  std::vector<iovec> pieces;
  Pending* waiter = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = async_dst_.find(h.request_id);
    if (it != async_dst_.end()) {
      // A synchronous copy's caller is not released while its buffers are written (fail_link).
      waiter = it->second.waiter;
      if (waiter) receiving_ = waiter;
      // Scatter [offset, offset + len) of the packed rows into the destination rows.
      const AsyncDst& d = it->second;
      uint64_t off = m.offset, left = h.payload_len;
      while (left) {
        uint64_t row = off / d.width, col = off % d.width;
        if (row >= d.rows.size()) throw ProtoError("asynchronous data past its destination");
        uint64_t n = std::min(d.width - col, left);
        pieces.push_back({static_cast<char*>(d.rows[row].iov_base) + col, n});
        off += n;
        left -= n;
      }
      if (m.last) async_dst_.erase(it);
      // Known until written, for wait_async_data_outside.
      span_of(pieces, &delivering_lo_, &delivering_hi_);
    }
  }
  if (pieces.empty() && h.payload_len) {  // the copy failed and was reported: drop its bytes
    std::vector<char> sink(std::min<uint64_t>(h.payload_len, 1 << 20));
    for (uint64_t left = h.payload_len; left;) {
      uint64_t n = std::min<uint64_t>(left, sink.size());
      chan_->skip(n);
      note_life();
      left -= n;
    }
    return;
  }
  recv_noting_life(pieces.data(), static_cast<int>(pieces.size()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (waiter) receiving_ = nullptr;
    delivering_lo_ = delivering_hi_ = 0;
  }
  cv_.notify_all();
}

bool ServerLink::async_data_into(uint64_t base, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, d] : async_dst_)
    if (d.lo < base + size && base < d.hi) return true;
  return false;
}

void ServerLink::wait_async_data_outside(uint64_t base, uint64_t size) {
  auto overlaps = [&](uint64_t lo, uint64_t hi) { return lo < base + size && base < hi; };
  auto done = [&] {
    // Bytes being written now are written first, even on a failing link (the receiver stops
    // after its current write and clears the span).
    if (delivering_hi_ && overlaps(delivering_lo_, delivering_hi_)) return false;
    if (state_ != err::Success) return true;  // the link is gone: nothing more is written
    for (const auto& [id, d] : async_dst_)
      if (overlaps(d.lo, d.hi)) return false;
    return true;
  };
  std::unique_lock<std::mutex> lock(mu_);
  if (timeout_s_ > 0)
    wait_alive(lock, cv_, done, "freeing page-locked memory");
  else
    cv_.wait(lock, done);
}

namespace {
thread_local bool t_on_callback_thread = false;
}  // namespace

bool on_callback_thread() { return t_on_callback_thread; }

void ServerLink::callback_loop() {
  t_on_callback_thread = true;
  for (;;) {
    std::pair<uint64_t, std::function<void()>> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cb_cv_.wait(lock, [&] { return !to_run_.empty() || state_ != err::Success; });
      if (to_run_.empty()) return;
      job = std::move(to_run_.front());
      to_run_.pop_front();
    }
    job.second();
    try {
      send_frame(static_cast<uint16_t>(MsgId::CallbackDone), 0, chan_->next_request_id(),
                 encode_message(CallbackDoneReq{job.first}), nullptr, 0);
    } catch (const std::exception& ex) {
      fail_link(ex.what());
    }
  }
}

void ServerLink::set_notify_sink(NotifySink sink) {
  std::lock_guard<std::mutex> lock(mu_);
  notify_sink_ = std::move(sink);
}

}  // namespace rgpu::client
