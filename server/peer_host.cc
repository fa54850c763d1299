#include "server/peer_host.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "channel/channel.h"
#include "common/cuda_errors.h"
#include "common/log.h"
#include "server/ipc_exports.h"
#include "server/peer_ipc.h"
#include "server/peer_routes.h"
#include "server/peer_vouch.h"
#include "transport/tcp/tcp.h"

namespace rgpu::server {

using namespace rgpu::proto;
using backend::Status;

PeerHost::PeerHost(backend::Executor& exec, StagingPool& pool, int control, int timeout_s,
                   Hooks hooks, const PeerKey* key, const transport::TlsContext* tls)
    : exec_(exec),
      pool_(pool),
      control_(control),
      timeout_s_(timeout_s > 0 ? timeout_s : 30),
      hooks_(std::move(hooks)),
      key_(key),
      tls_(tls) {
  if (tls_) pin_ = tls_->fingerprint();
}

void PeerHost::fence(const std::vector<uint64_t>& ids, int dev, uint64_t event, uint64_t stamp) {
  constexpr size_t kMaxUnclaimed = 1024;  // copies refused before their PeerBegin leave theirs
  std::shared_ptr<uint64_t> shared(new uint64_t(event), [this, dev](uint64_t* e) {
    hooks_.release_event(dev, *e);
    delete e;
  });
  std::vector<Fence> drop;  // released once the lock is let go
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint64_t id : ids) {
      if (stopping_ || fences_.count(id)) continue;
      fences_[id] = Fence{dev, shared, stamp};
      while (fences_.size() > kMaxUnclaimed) {
        drop.push_back(std::move(fences_.begin()->second));
        fences_.erase(fences_.begin());
      }
    }
  }
  fence_cv_.notify_all();
}

Status PeerHost::await_fence(uint64_t id, int& dev, uint64_t& stamp) {
  Fence f;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!fence_cv_.wait_for(lock, std::chrono::seconds(timeout_s_),
                            [&] { return stopping_ || fences_.count(id); }) ||
        stopping_)
      return Status::fail(err::DevicesUnavailable,
                          stopping_ ? "the session is ending"
                                    : "the client's order for this copy (PeerFence) never came");
    f = std::move(fences_[id]);
    fences_.erase(id);
  }
  dev = f.dev;
  stamp = f.stamp;
  return exec_.event_synchronize(f.dev, *f.event);  // the event goes with its last fence
}

Status PeerHost::issue(PeerTicketRep& rep, const std::string& endpoint) {
  if (control_ < 0)
    return Status::fail(err::NotSupported,
                        "server-to-server copies need rgpud (this session has no control socket)");
  if (!key_) return Status::fail(err::NotSupported, "this rgpud has no peer key");
  int give = -1;  // the inbox's other end, for rgpud, at the first ticket
  if (inbox_ < 0) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
      return Status::fail(err::Unknown, std::string("socketpair: ") + strerror(errno));
    inbox_ = sv[0];
    give = sv[1];
    inbox_thread_ = std::thread([this] { inbox_loop(); });
  }
  PeerVoucher& t = rep.ticket;
  random_bytes(t.id.data(), t.id.size());
  random_bytes(t.secret.data(), t.secret.size());
  t.tls_pin = pin_;
  t.endpoint = endpoint;
  t.machine = peer_machine_id();
  t.not_after_ms = peer_wall_ms() + kTicketMs;
  t.mac = peer_voucher_mac(*key_, t);
  rep.expires_ms = kTicketMs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto now = Clock::now();
    for (auto it = tickets_.begin(); it != tickets_.end();)
      it = it->second.expires <= now ? tickets_.erase(it) : std::next(it);
    tickets_[t.id] = Ticket{t.secret, now + std::chrono::milliseconds(kTicketMs)};
  }
  std::string why = peer_register(control_, t.id, kTicketMs, give);
  if (give >= 0) close(give);
  if (!why.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    tickets_.erase(t.id);
    return Status::fail(err::Unknown, "cannot issue a peer copy ticket: " + why);
  }
  return Status::success();
}

void PeerHost::inbox_loop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    pollfd p{inbox_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char msg[kPeerHandoffBytes + 1];
    int fd = -1;
    ssize_t n = recv_control(inbox_, msg, sizeof msg, fd, MSG_DONTWAIT);
    if (n == 0) return;  // rgpud is gone
    if (n != static_cast<ssize_t>(kPeerHandoffBytes) || fd < 0) {
      if (fd >= 0) close(fd);
      continue;
    }
    accept(msg, fd);
  }
}

std::string PeerHost::redeem(const PeerTicketId& id, PeerSecret& secret) {
  if (stopping_) return "the session is ending";
  auto it = tickets_.find(id);
  if (it == tickets_.end() || it->second.expires <= Clock::now())
    return "unknown, used or expired peer ticket";
  secret = it->second.secret;
  tickets_.erase(it);  // one use, whatever the peer proves
  return "";
}

void PeerHost::refuse(transport::Connection& conn, uint16_t type, uint64_t request_id,
                      const std::string& why) {
  LOG_WARN("peer link from %s refused: %s", conn.peer().c_str(), why.c_str());
  try {
    conn.set_send_timeout(2);
    channel::Channel ch(conn);
    ch.send(type, kFlagReply, request_id, encode_error_reply(err::NotPermitted, why));
  } catch (const std::exception&) {
  }
}

bool PeerHost::prove(transport::Connection& conn, const PeerTicketId& id, const PeerSecret& secret,
                     const Nonce& theirs, uint64_t attach_id) {
  constexpr int kProveSec = 10;
  const uint16_t prove_type = static_cast<uint16_t>(MsgId::PeerProve);
  if (!key_) {
    refuse(conn, static_cast<uint16_t>(MsgId::PeerAttach), attach_id, "this rgpud has no peer key");
    return false;
  }
  try {
    conn.set_recv_timeout(kProveSec);
    conn.set_send_timeout(kProveSec);
    channel::Channel ch(conn);
    // This end's proof covers the peer's nonce and a fresh one of its own: nothing the peer chose
    // alone, and under a key of the peer key and the ticket's secret, never the clients' token.
    PeerAttachRep rep;
    rep.nonce = random_nonce();
    rep.proof = peer_link_proof(*key_, PeerRole::Passive, id, secret, theirs, rep.nonce);
    ch.send(static_cast<uint16_t>(MsgId::PeerAttach), kFlagReply, attach_id, encode_ok_reply(rep));
    FrameHeader h;
    std::vector<uint8_t> body;
    if (!ch.read_frame(h, body, channel::Channel::Wait::TimedOrEof)) return false;
    if (h.type != prove_type || h.payload_len) {
      LOG_WARN("peer link from %s: it sent no PeerProve", conn.peer().c_str());
      return false;
    }
    auto q = decode_message<PeerProveReq>(body.data(), body.size());
    if (!peer_link_verify(*key_, PeerRole::Active, id, secret, theirs, rep.nonce, q.proof)) {
      refuse(conn, prove_type, h.request_id,
             "the peer did not prove it holds this rgpud's peer key and the ticket (the two "
             "rgpuds were given different --peer-key-file?)");
      return false;
    }
    ch.send(prove_type, kFlagReply, h.request_id, encode_ok_reply(Empty{}));
    return true;
  } catch (const std::exception& e) {
    LOG_WARN("peer link from %s: %s", conn.peer().c_str(), e.what());
    return false;
  }
}

void PeerHost::accept(const char* msg, int fd) {
  PeerTicketId id;
  Nonce theirs;
  uint64_t attach_id;
  memcpy(id.data(), msg + 1, id.size());
  memcpy(theirs.data(), msg + 1 + id.size(), theirs.size());
  memcpy(&attach_id, msg + 1 + id.size() + theirs.size(), sizeof attach_id);
  const bool tls = msg[kPeerHandoffBytes - 1] != 0;  // routed before TLS: no nonce yet
  auto conn = transport::tcp_adopt(fd, "peer rgpud");
  std::lock_guard<std::mutex> lock(mu_);
  reap_done();
  std::string why = stopping_ ? "the session is ending" : "";
  if (why.empty() && tls != (tls_ != nullptr))
    why = tls ? "a TLS peer link to a session without TLS" : "this rgpud requires TLS";
  PeerSecret secret{};
  if (why.empty() && !tls) why = redeem(id, secret);
  if (!why.empty()) {
    if (tls)  // its peer waits for a TLS handshake: closing is the answer
      LOG_WARN("peer link from %s refused: %s", conn->peer().c_str(), why.c_str());
    else
      refuse(*conn, static_cast<uint16_t>(MsgId::PeerAttach), attach_id, why);
    return;
  }
  auto link = std::make_unique<Link>();
  link->conn = std::move(conn);
  Link* l = link.get();
  links_.push_back(std::move(link));
  l->thread = std::thread([this, l, attach_id, tls, id, secret, theirs] {
    if (tls)
      attach_tls(*l, id);
    else if (prove(*l->conn, id, secret, theirs, attach_id))
      serve(*l);
    l->done = true;
  });
}

void PeerHost::attach_tls(Link& link, const PeerTicketId& routed) {
  constexpr int kHandshakeSec = 10;
  std::unique_ptr<transport::Connection> conn;
  uint64_t attach_id = 0;
  std::string why;
  PeerSecret secret{};
  Nonce theirs{};
  try {
    // The link keeps the socket's first descriptor meanwhile, so stop() can shut it down.
    int fd = ::dup(link.conn->fd());
    if (fd < 0) throw transport::TransportError(std::string("dup: ") + strerror(errno));
    conn = transport::tls_accept(transport::tcp_adopt(fd, link.conn->peer()), *tls_, kHandshakeSec);
    conn->set_recv_timeout(kHandshakeSec);
    channel::Channel ch(*conn);
    FrameHeader h;
    std::vector<uint8_t> body;
    ch.read_frame(h, body, channel::Channel::Wait::Timed);
    attach_id = h.request_id;
    if (h.type != static_cast<uint16_t>(MsgId::PeerAttach) || h.payload_len) {
      why = "its first request over TLS is not PeerAttach";
    } else {
      auto q = decode_message<PeerAttachReq>(body.data(), body.size());
      theirs = q.nonce;
      std::lock_guard<std::mutex> lock(mu_);
      why = q.ticket != routed ? "PeerAttach names another ticket than its route"
                               : redeem(q.ticket, secret);
    }
  } catch (const std::exception& e) {
    LOG_WARN("peer link from %s: %s", link.conn->peer().c_str(), e.what());
    return;
  }
  if (!why.empty()) {
    refuse(*conn, static_cast<uint16_t>(MsgId::PeerAttach), attach_id, why);
    return;
  }
  LOG_INFO("peer link from %s: %s", conn->peer().c_str(), transport::tls_summary(*conn).c_str());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    link.conn = std::move(conn);  // the plain descriptor closes; the TLS one carries the link
  }
  if (prove(*link.conn, routed, secret, theirs, attach_id)) serve(link);
}

void PeerHost::reap_done() {
  for (auto it = links_.begin(); it != links_.end();) {
    if ((*it)->done) {
      (*it)->thread.join();
      it = links_.erase(it);
    } else {
      ++it;
    }
  }
}

namespace {

// A copy's rows as PeerBegin named them.
PeerRows rows_of(const PeerBeginReq& q) {
  return PeerRows{static_cast<int>(q.device), q.ptr, q.height > 1 ? q.pitch : q.width, q.width,
                  q.height};
}

}  // namespace

void PeerHost::serve(Link& link) {
  transport::Connection& conn = *link.conn;
  channel::Channel ch(conn);
  PrivateStreams streams;  // per GPU the link has copied on
  int ipc_sock = -1;       // PeerIpcOpen's socket (server/peer_ipc.h)
  uint64_t begun_stamp = 0;
  PeerExports exports(hooks_.stamp_at);
  auto reply = [&](uint16_t type, uint64_t id, const Status& r) {
    ch.send(type, kFlagReply, id,
            r.ok() ? encode_ok_reply(Empty{}) : encode_error_reply(r.code, r.message));
  };
  try {
    conn.set_recv_timeout(timeout_s_);
    conn.set_send_timeout(timeout_s_);
    // A copy is counted from before its rows are checked until its reply (wait_quiet).
    auto copying = [&](bool on) {
      std::lock_guard<std::mutex> lock(mu_);
      copying_ += on ? 1 : -1;
      if (!on) quiet_cv_.notify_all();
    };
    struct Counted {
      std::function<void(bool)> set;
      bool on = false;
      void operator()(bool v) {
        if (v != on) set(on = v);
      }
      ~Counted() { (*this)(false); }
    } counted{copying};
    // The current copy: its rows and stream once PeerBegin was accepted, else why not.
    PeerRows rows;
    uint64_t stream = 0;
    Status begun = Status::fail(err::InvalidValue, "a peer copy without PeerBegin");
    FrameHeader h;
    std::vector<uint8_t> body;
    // Between copies the link may stay silent; within one, the receive timeout holds.
    while (ch.read_frame(
        h, body, counted.on ? channel::Channel::Wait::Timed : channel::Channel::Wait::Idle)) {
      if (h.type == static_cast<uint16_t>(MsgId::PeerBegin)) {
        auto q = decode_message<PeerBeginReq>(body.data(), body.size());
        counted(true);  // from here on a free of these rows waits for this copy
        // The client's earlier work on this server first (its PeerFence); the rows must lie in
        // memory allocated by then, not in memory freed and handed out again since.
        Status fenced;
        uint64_t born_by = UINT64_MAX;
        static const bool trace = getenv("RGPU_PEER_TRACE") && *getenv("RGPU_PEER_TRACE") == '1';
        auto t0 = std::chrono::steady_clock::now();
        if (q.fence) {
          int fence_dev = -1;
          uint64_t stamp = 0;
          fenced = await_fence(q.fence, fence_dev, stamp);
          if (trace)
            LOG_NOTICE("peer link: fence after %lld us",
                       static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                  std::chrono::steady_clock::now() - t0)
                                                  .count()));
          if (fence_dev == static_cast<int>(q.device)) born_by = stamp;
        }
        begun = q.width == 0 || q.height == 0
                    ? Status::fail(err::InvalidValue, "an empty peer copy")
                    : hooks_.check(q, born_by);
        rows = rows_of(q);
        // The rows' allocation as checked (a free takes it out of the table first, then waits
        // for this copy): what keeps an export valid (PeerExports).
        begun_stamp = begun.ok() ? hooks_.stamp_at(rows.dev, rows.base) : 0;
        if (begun.ok()) begun = streams.get(exec_, rows.dev, stream);
        if (begun.ok()) begun = fenced;
      } else if (h.type == static_cast<uint16_t>(MsgId::PeerRead)) {
        auto q = decode_message<PeerReadReq>(body.data(), body.size());
        Status r = begun;
        const uint64_t total = rows.bytes();
        if (r.ok() && (q.offset != 0 || q.size != total))
          r = Status::fail(err::InvalidValue, "a peer read must cover its copy's rows");
        if (r.ok())
          r = peer_send_rows(exec_, pool_, rows, stream,
                             [&](uint64_t off, const char* data, uint64_t n) {
                               iovec v{const_cast<char*>(data), n};
                               ch.send(static_cast<uint16_t>(MsgId::AsyncData), 0, h.request_id,
                                       encode_message(AsyncDataMsg{off, off + n == total}), &v, 1);
                             });
        reply(h.type, h.request_id, r);
        counted(false);
        begun = Status::fail(err::InvalidValue, "a peer copy without PeerBegin");
      } else if (h.type == static_cast<uint16_t>(MsgId::PeerWrite) ||
                 h.type == static_cast<uint16_t>(MsgId::PeerFinish)) {
        // Writes until PeerFinish, whose reply carries their outcome.
        bool have = true;
        uint64_t finish_id = 0;
        Status refused = begun;
        auto next = [&](char* buf, uint64_t cap, uint64_t& off, uint64_t& n) {
          if (!have && !ch.read_frame(h, body, channel::Channel::Wait::Timed)) return false;
          have = false;
          if (h.type == static_cast<uint16_t>(MsgId::PeerFinish)) {
            finish_id = h.request_id;
            return false;
          }
          if (h.type != static_cast<uint16_t>(MsgId::PeerWrite))
            throw ProtoError("a peer link sent an unexpected request among its writes");
          auto q = decode_message<PeerWriteReq>(body.data(), body.size());
          if (q.size != h.payload_len) throw ProtoError("PeerWrite: payload length mismatch");
          off = n = 0;
          if (!refused.ok() || q.size > cap) {
            if (refused.ok())
              refused = Status::fail(err::InvalidValue, "a peer write chunk is too large");
            ch.skip_rest(h);
            return true;
          }
          iovec v{buf, q.size};
          ch.read_payload(&v, 1);
          off = q.offset;
          n = q.size;
          return true;
        };
        Status r;
        if (refused.ok()) {
          r = peer_recv_rows(exec_, pool_, rows, stream, next);
        } else {
          uint64_t off, n;  // drained, so that the link stays in step
          while (next(nullptr, 0, off, n)) {
          }
        }
        reply(static_cast<uint16_t>(MsgId::PeerFinish), finish_id, refused.ok() ? r : refused);
        counted(false);
        begun = Status::fail(err::InvalidValue, "a peer copy without PeerBegin");
      } else if (h.type == static_cast<uint16_t>(MsgId::PeerIpcOpen)) {
        if (ipc_sock < 0)
          ipc_sock = open_ipc(ch, h, body);
        else
          reply(h.type, h.request_id,
                Status::fail(err::InvalidValue, "this link shares memory already"));
      } else if (h.type == static_cast<uint16_t>(MsgId::PeerIpcMap)) {
        // The begun copy as memory the peer maps; a refusal of its PeerBegin ends it here.
        auto q = decode_message<PeerIpcMapReq>(body.data(), body.size());
        exports.forget(q.forget);
        PeerIpcMapRep rep;
        if (!begun.ok()) {
          reply(h.type, h.request_id, begun);
          counted(false);
          begun = Status::fail(err::InvalidValue, "a peer copy without PeerBegin");
          continue;
        }
        if (ipc_sock >= 0) exports.map(exec_, rows, begun_stamp, q.importer, ipc_sock, rep);
        ch.send(h.type, kFlagReply, h.request_id, encode_ok_reply(rep));
      } else if (h.type == static_cast<uint16_t>(MsgId::PeerFencePage)) {
        // The session's fence page and a slot of this link's own in it, over the unix socket.
        PeerFencePageRep rep;
        int fd = -1;
        Status s = ipc_sock < 0 ? Status::fail(err::NotSupported, "no unix socket on this link")
                   : !hooks_.fence_page ? Status::fail(err::NotSupported, "no fence page")
                                        : hooks_.fence_page(fd, rep.slot);
        if (!s.ok()) {
          reply(h.type, h.request_id, s);
        } else {
          ch.send(h.type, kFlagReply, h.request_id, encode_ok_reply(rep));
          peer_ipc_send_fd(ipc_sock, fd);  // the session's descriptor: it stays open there
        }
      } else if (h.type == static_cast<uint16_t>(MsgId::PeerFenceQuery)) {
        auto q = decode_message<PeerFenceQueryReq>(body.data(), body.size());
        reply(h.type, h.request_id,
              hooks_.fence_query ? hooks_.fence_query(q.device)
                                 : Status::fail(err::NotSupported, "no fence page"));
      } else if (h.type == static_cast<uint16_t>(MsgId::PeerIpcDone)) {
        counted(false);  // the peer's DMA is over
        begun = Status::fail(err::InvalidValue, "a peer copy without PeerBegin");
      } else {
        LOG_WARN("peer link from %s: unexpected request %u", conn.peer().c_str(), h.type);
        break;
      }
    }
  } catch (const std::exception& e) {
    LOG_WARN("peer link from %s ended: %s", conn.peer().c_str(), e.what());
  }
  conn.shutdown();
  if (ipc_sock >= 0) ::close(ipc_sock);
  streams.destroy(exec_);
}

int PeerHost::open_ipc(channel::Channel& ch, const FrameHeader& h,
                       const std::vector<uint8_t>& body) {
  constexpr int kConnectSec = 5;
  auto q = decode_message<PeerIpcOpenReq>(body.data(), body.size());
  std::string why;
  if (!peer_ipc_enabled())
    why = "RGPU_PEER_IPC=0";
  else if (q.host.empty() || q.host != peer_machine_id())
    why = "the peer runs on another machine";
  PeerIpcOpenRep rep;
  int listener = why.empty() ? peer_ipc_listen(rep.socket, why) : -1;
  if (listener < 0) {
    ch.send(h.type, kFlagReply, h.request_id, encode_error_reply(err::NotSupported, why));
    return -1;
  }
  random_bytes(rep.nonce.data(), rep.nonce.size());
  try {
    ch.send(h.type, kFlagReply, h.request_id, encode_ok_reply(rep));
  } catch (...) {
    ::close(listener);
    throw;
  }
  int sock = peer_ipc_accept(listener, rep.nonce, kConnectSec, why);
  ::close(listener);
  if (sock < 0) LOG_INFO("peer link: no memory sharing with the peer: %s", why.c_str());
  return sock;
}

bool PeerHost::wait_quiet(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mu_);
  return quiet_cv_.wait_for(lock, limit, [&] { return copying_ == 0; });
}

void PeerHost::stop() {
  std::vector<std::unique_ptr<Link>> links;
  std::vector<Fence> unclaimed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && inbox_ < 0) return;
    stopping_ = true;
    tickets_.clear();
    for (auto& [id, f] : fences_) unclaimed.push_back(f);
    fences_.clear();
    for (auto& l : links_) l->conn->shutdown();  // wakes a thread in recv/send
    links.swap(links_);
  }
  fence_cv_.notify_all();
  if (inbox_thread_.joinable()) inbox_thread_.join();
  for (auto& l : links) l->thread.join();
  unclaimed.clear();  // their events go back
  if (inbox_ >= 0) close(inbox_);
  inbox_ = -1;
}

}  // namespace rgpu::server
