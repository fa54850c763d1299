#include "server/peer_copy.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "channel/handshake.h"
#include "common/cuda_errors.h"
#include "common/log.h"
#include "common/strings.h"
#include "server/peer_vouch.h"
#include "transport/tcp/net_emu.h"
#include "transport/tcp/tcp.h"
#include "transport/tls/tls.h"

namespace rgpu::server {

using namespace rgpu::proto;
using backend::Status;
using transport::CertFingerprint;

namespace {

// The reply to request `id` of type `type` (into `rep` when given).
template <typename Rep = Empty>
Status await_reply(channel::Channel& ch, uint16_t type, uint64_t id, Rep* rep = nullptr) {
  FrameHeader h;
  std::vector<uint8_t> body;
  ch.read_frame(h, body, channel::Channel::Wait::Timed);
  if (!(h.flags & kFlagReply) || h.type != type || h.request_id != id)
    throw ProtoError("the peer sent an unexpected frame");
  Rep ok;
  std::string message;
  int32_t e = decode_reply(body, rep ? *rep : ok, message);
  return e ? Status::fail(e, message) : Status::success();
}

// The link cannot be used any more (the peer is gone, or a copy stopped midway).
struct LinkBroken : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The TLS client side of peer links: trusts no CA, compares the certificate with the ticket's pin.
const transport::TlsContext& pinned_context() {
  static std::once_flag once;
  static std::unique_ptr<transport::TlsContext> ctx;
  static std::string error;
  std::call_once(once, [] {
    try {
      ctx = transport::TlsContext::pinned_client();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  if (!ctx) throw LinkBroken("the peer requires TLS: " + error);
  return *ctx;
}

}  // namespace

bool PeerJob::has_ticket() const {
  for (uint8_t b : ticket.id)
    if (b) return true;
  return false;
}

PeerCopier::PeerCopier(backend::Executor& exec, StagingPool& pool, const PeerKey* key,
                       std::string no_key, int timeout_s, PeerImports::Hooks imports, Done failed)
    : exec_(exec),
      pool_(pool),
      key_(key),
      no_key_(std::move(no_key)),
      timeout_s_(timeout_s > 0 ? timeout_s : 10),
      import_hooks_(std::move(imports)),
      failed_(std::move(failed)) {}

void PeerCopier::start(PeerJob job, Done done) {
  std::string refused;
  std::vector<std::shared_ptr<Link>> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = all_.begin(); it != all_.end();) {  // links whose threads have ended
      bool d;
      {
        std::lock_guard<std::mutex> ll((*it)->mu);
        d = (*it)->done;
      }
      if (d) {
        ended.push_back(*it);
        retired_.push_back((*it)->imports);  // unmapped by flush_unmaps() once unused
        it = all_.erase(it);
      } else {
        ++it;
      }
    }
    auto it = links_.find(job.endpoint);
    std::shared_ptr<Link> l = it == links_.end() ? nullptr : it->second;
    if (stopping_) {
      refused = "the session is ending";
    } else if (job.has_ticket()) {
      if (l) {  // a new link replaces it; it ends once its copies have run
        std::lock_guard<std::mutex> ll(l->mu);
        l->closing = true;
        l->cv.notify_all();
      }
      l = std::make_shared<Link>();
      l->imports = std::make_shared<PeerImports>(exec_, import_hooks_);
      links_[job.endpoint] = l;
      all_.push_back(l);
      Link* raw = l.get();
      l->thread = std::thread([this, raw] { work(*raw); });
    } else if (!l) {
      refused = "no link to it (an earlier copy over it failed)";
    }
    if (refused.empty()) {
      std::lock_guard<std::mutex> ll(l->mu);
      if (l->done || l->closing) {
        refused = "no link to it (an earlier copy over it failed)";
      } else {
        ++busy_;
        l->queue.push_back(Job{std::move(job),
                               [this, d = std::move(done)](const Status& s) {
                                 d(s);
                                 std::lock_guard<std::mutex> lock(mu_);
                                 --busy_;
                                 idle_cv_.notify_all();
                               },
                               std::chrono::steady_clock::now()});
        l->cv.notify_all();
        done = nullptr;
      }
    }
  }
  for (auto& l : ended) l->thread.join();
  if (done) {
    exec_.event_destroy(job.local.dev, job.after_event);
    done(Status::fail(err::DevicesUnavailable, "copy " + std::string(job.push ? "to " : "from ") +
                                                   job.remote_name + " (" + job.endpoint +
                                                   "): " + refused));
  }
}

void PeerCopier::work(Link& l) {
  for (;;) {
    Job j;
    {
      std::unique_lock<std::mutex> lock(l.mu);
      while (l.queue.empty() && !l.closing && !l.cancelled) {
        if (!watching(l)) {
          l.cv.wait(lock);
          continue;
        }
        // Direct copies wait for the peer: look at them now and then.
        l.cv.wait_for(lock, std::chrono::milliseconds(200));
        lock.unlock();
        watch(l);
        lock.lock();
      }
      if (l.queue.empty()) break;
      j = std::move(l.queue.front());
      l.queue.pop_front();
    }
    static const bool trace = getenv("RGPU_PEER_TRACE") && *getenv("RGPU_PEER_TRACE") == '1';
    l.trace.on = trace;
    l.trace.t0 = j.queued;
    l.trace.phases.clear();
    l.trace.mark("wake");
    Status s = run(l, j.job);
    if (!s.ok())
      s.message = std::string("copy ") + (j.job.push ? "to " : "from ") + j.job.remote_name + " (" +
                  j.job.endpoint + "): " + s.message;
    j.done(s);
    l.trace.mark("done");
    if (l.trace.on)
      LOG_NOTICE("peer copy of %llu bytes: %s",
                 static_cast<unsigned long long>(j.job.local.bytes()), l.trace.phases.c_str());
    if (watching(l)) watch(l);
  }
  // Replaced by a newer link (the client brought a ticket after some failure): this link's direct
  // copies still wait for the peer, and this thread watches them until they are over.
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(l.mu);
      if (l.cancelled || !l.failed.empty() || !watching(l)) break;
      l.cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return l.cancelled; });
      if (l.cancelled) break;
    }
    watch(l);
  }
  end_direct(l, l.failed.empty() ? "the session is ending" : "peer link failed: " + l.failed);
  l.ch.reset();
  std::unique_ptr<transport::Connection> conn;
  {
    std::lock_guard<std::mutex> lock(l.mu);
    conn = std::move(l.conn);
  }
  conn.reset();         // the peer's link thread ends
  l.imports->retire();  // unmapped by the dispatcher once no stream uses them (flush_unmaps)
  if (l.ipc >= 0) ::close(l.ipc);
  l.ipc = -1;
  if (l.fences) {
    std::lock_guard<std::mutex> lock(mu_);
    old_fences_.push_back(std::move(l.fences));
  }
  l.streams.destroy(exec_);
  std::lock_guard<std::mutex> lock(l.mu);
  l.done = true;
  // A link that ends before being replaced leaves nothing queued behind it: start() refuses.
  l.closing = true;
}

Status PeerCopier::run(Link& l, const PeerJob& job) {
  // The stream's earlier work first (the stream itself waits at its gate meanwhile).  That may
  // include a direct copy of this link's waiting for the peer: then this thread keeps watching
  // it (else nothing would, should the peer go).
  Status s = exec_.event_query(job.local.dev, job.after_event);
  if (s.code == err::NotReady && !watching(l)) {
    s = exec_.event_synchronize(job.local.dev, job.after_event);
  } else {
    for (auto nap = std::chrono::microseconds(20); s.code == err::NotReady;
         nap = std::min(nap * 2, std::chrono::microseconds(5000))) {
      {
        std::lock_guard<std::mutex> lock(l.mu);
        if (l.cancelled) break;
      }
      std::this_thread::sleep_for(nap);
      if (watching(l)) watch(l);
      s = exec_.event_query(job.local.dev, job.after_event);
    }
  }
  exec_.event_destroy(job.local.dev, job.after_event);
  l.trace.mark("after");
  if (!s.ok()) return s;
  {
    std::lock_guard<std::mutex> lock(l.mu);
    if (l.cancelled) return Status::fail(err::DevicesUnavailable, "the session is ending");
  }
  if (!l.failed.empty())
    return Status::fail(err::DevicesUnavailable, "peer link failed: " + l.failed);
  uint64_t stream = 0;
  if (Status c = l.streams.get(exec_, job.local.dev, stream); !c.ok()) return c;
  try {
    if (!l.ch) {
      l.name = job.remote_name + " (" + job.endpoint + ")";
      connect(l, job);
    }
    return transfer(l, job, stream);
  } catch (const std::exception& e) {
    l.failed = e.what();
    std::lock_guard<std::mutex> lock(l.mu);
    l.closing = true;  // later copies fail; the client's next one brings a new ticket
    if (l.conn) l.conn->shutdown();
    return Status::fail(err::DevicesUnavailable, "peer link failed: " + l.failed);
  }
}

void PeerCopier::connect(Link& l, const PeerJob& job) {
  if (!job.has_ticket()) throw LinkBroken("no ticket to make a link with");
  // Where an rgpud with this peer key vouched for itself, and nowhere else (the dispatcher
  // checked it already: Session::on(PeerCopyMsg)).
  if (std::string why = peer_check_voucher(key_, no_key_, job.ticket); !why.empty())
    throw LinkBroken("refused, nothing was connected: " + why);
  auto hp = parse_host_port(job.ticket.endpoint);
  if (!hp) throw LinkBroken("bad peer endpoint");
  auto conn = transport::tcp_connect(hp->host, hp->port, timeout_s_);
  conn->set_recv_timeout(timeout_s_);
  conn->set_send_timeout(timeout_s_);
  {
    std::lock_guard<std::mutex> lock(l.mu);
    if (l.cancelled) throw LinkBroken("the session is ending");
    l.conn = std::move(conn);
  }
  l.ch = std::make_unique<channel::Channel>(*l.conn);
  if (job.ticket.tls_pin != CertFingerprint{}) {
    connect_tls(l, job);
    return;
  }
  channel::Channel& ch = *l.ch;
  HelloReq hello;
  hello.client_info =
      "rgpud peer link (pid " + std::to_string(getpid()) + ")" + transport::net_emu_tag();
  hello.timeout_ms = static_cast<uint32_t>(timeout_s_) * 1000;
  hello.purpose = static_cast<uint32_t>(LinkPurpose::PeerLink);
  // No token: a peer link never answers a token challenge (the answer would be a client's
  // credential for whoever sent the challenge); it proves itself with the peer key below.
  channel::HandshakeResult hr = channel::request_handshake(ch, hello, std::nullopt);
  if (hr.error && hr.hello.auth_required)
    throw LinkBroken(
        "peer link refused: the peer asks for a client token; an rgpud proves itself to a peer "
        "with the peer key, never with the token (an rgpud of another version?)");
  if (hr.error) throw LinkBroken("peer link refused: " + hr.message);
  attach(l, job);
  open_ipc(l);
}

void PeerCopier::attach(Link& l, const PeerJob& job) {
  channel::Channel& ch = *l.ch;
  const PeerVoucher& t = job.ticket;
  const Nonce mine = random_nonce();
  uint64_t id = ch.next_request_id();
  ch.send(static_cast<uint16_t>(MsgId::PeerAttach), kFlagSync, id,
          encode_message(PeerAttachReq{t.id, mine}));
  PeerAttachRep rep;
  if (Status s = await_reply(ch, static_cast<uint16_t>(MsgId::PeerAttach), id, &rep); !s.ok())
    throw LinkBroken("peer link refused: " + s.message);
  // The peer first: nothing more goes to it unless it holds the peer key and the ticket.
  if (!peer_link_verify(*key_, PeerRole::Passive, t.id, t.secret, mine, rep.nonce, rep.proof))
    throw LinkBroken(
        "the peer did not prove it holds this rgpud's peer key and the ticket (the two rgpuds "
        "were given different --peer-key-file?)");
  id = ch.next_request_id();
  ch.send(static_cast<uint16_t>(MsgId::PeerProve), kFlagSync, id,
          encode_message(PeerProveReq{
              peer_link_proof(*key_, PeerRole::Active, t.id, t.secret, mine, rep.nonce)}));
  if (Status s = await_reply(ch, static_cast<uint16_t>(MsgId::PeerProve), id); !s.ok())
    throw LinkBroken("peer link refused: " + s.message);
}

// A peer on this machine shares its memory over a unix socket beside the link (server/peer_ipc.h).
// Plain links only: over TLS the passive's Hello is not seen, so whether it knows PeerIpcOpen is
// not known.
void PeerCopier::open_ipc(Link& l) {
  channel::Channel& ch = *l.ch;
  const uint16_t type = static_cast<uint16_t>(MsgId::PeerIpcOpen);
  if (!peer_ipc_enabled() || !ch.peer_knows(type)) return;
  uint64_t id = ch.next_request_id();
  ch.send(type, kFlagSync, id, encode_message(PeerIpcOpenReq{peer_machine_id()}));
  PeerIpcOpenRep rep;
  Status s = await_reply(ch, type, id, &rep);
  std::string why = s.message;
  if (s.ok()) l.ipc = peer_ipc_connect(rep.socket, rep.nonce, timeout_s_, why);
  if (l.ipc < 0) {
    LOG_DEBUG("peer link: copies go through staging buffers: %s", why.c_str());
    return;
  }
  LOG_INFO("peer link: the peer runs on this machine; copies map its memory (CUDA IPC)");
  // Its fence page, for direct copies (server/peer_fences.h).
  const uint16_t page_type = static_cast<uint16_t>(MsgId::PeerFencePage);
  if (!ch.peer_knows(page_type)) return;
  id = ch.next_request_id();
  ch.send(page_type, kFlagSync, id, encode_message(Empty{}));
  PeerFencePageRep page;
  if (Status p = await_reply(ch, page_type, id, &page); !p.ok()) {
    LOG_DEBUG("peer link: every copy asks the peer (%s)", p.message.c_str());
    return;
  }
  if (page.slot >= kPeerFenceSlots) throw ProtoError("the peer named a fence slot out of range");
  int fd = peer_ipc_recv_fd(l.ipc);  // throws: the link is broken
  l.fences = PeerFenceMap::attach(exec_, fd, why);
  if (!l.fences) {
    LOG_INFO("peer link: every copy asks the peer (%s)", why.c_str());
    return;
  }
  l.slot = page.slot;
  l.page.store(l.fences->page(), std::memory_order_release);
}

// The passive rgpud runs TLS: the link is routed to its session in plain (PeerRoute, the
// ticket's id only), then TLS with the certificate the ticket named, then PeerAttach.
void PeerCopier::connect_tls(Link& l, const PeerJob& job) {
  uint64_t id = l.ch->next_request_id();
  l.ch->send(static_cast<uint16_t>(MsgId::PeerRoute), kFlagSync, id,
             encode_message(PeerRouteReq{job.ticket.id}));
  if (Status s = await_reply(*l.ch, static_cast<uint16_t>(MsgId::PeerRoute), id); !s.ok())
    throw LinkBroken("peer link refused: " + s.message);
  // The link keeps the plain descriptor meanwhile, so stop() can shut the socket down.
  int fd = ::dup(l.conn->fd());
  if (fd < 0) throw LinkBroken(std::string("dup: ") + strerror(errno));
  auto tls = transport::tls_connect_pinned(transport::tcp_adopt(fd, l.conn->peer()),
                                           pinned_context(), job.ticket.tls_pin, timeout_s_);
  tls->set_recv_timeout(timeout_s_);
  tls->set_send_timeout(timeout_s_);
  {
    std::lock_guard<std::mutex> lock(l.mu);
    if (l.cancelled) throw LinkBroken("the session is ending");
    l.ch.reset();
    l.conn = std::move(tls);
  }
  l.ch = std::make_unique<channel::Channel>(*l.conn);
  attach(l, job);
  // The ticket's endpoint, where the link went (job.endpoint is only the client's name for it).
  LOG_INFO("peer link to %s (the client's %s): %s", job.ticket.endpoint.c_str(),
           job.endpoint.c_str(), transport::tls_summary(*l.conn).c_str());
}

Status PeerCopier::transfer(Link& l, const PeerJob& job, uint64_t stream) {
  channel::Channel& ch = *l.ch;
  const uint64_t total = job.local.bytes();
  if (total != job.remote.width * job.remote.height)
    return Status::fail(err::InvalidValue, "peer copy sizes differ");
  ch.send(static_cast<uint16_t>(MsgId::PeerBegin), 0, ch.next_request_id(),
          encode_message(job.remote));
  if (Status s; l.ipc >= 0 && transfer_mapped(l, job, stream, s)) return s;
  if (job.push) {
    const uint16_t write = static_cast<uint16_t>(MsgId::PeerWrite);
    Status s = peer_send_rows(
        exec_, pool_, job.local, stream, [&](uint64_t off, const char* data, uint64_t n) {
          iovec v{const_cast<char*>(data), n};
          ch.send(write, 0, ch.next_request_id(), encode_message(PeerWriteReq{off, n}), &v, 1);
        });
    // Stopped midway: the peer waits for the rest; only closing the link tells it.
    if (!s.ok()) throw LinkBroken("a copy to it stopped midway: " + s.message);
    uint64_t id = ch.next_request_id();
    ch.send(static_cast<uint16_t>(MsgId::PeerFinish), kFlagSync, id, encode_message(Empty{}));
    return await_reply(ch, static_cast<uint16_t>(MsgId::PeerFinish), id);
  }
  // Pull: the peer streams AsyncData chunks, each copied to the GPU while the next arrives.
  uint64_t id = ch.next_request_id();
  ch.send(static_cast<uint16_t>(MsgId::PeerRead), kFlagSync, id,
          encode_message(PeerReadReq{0, total}));
  Status reply;
  bool replied = false;
  Status s = peer_recv_rows(
      exec_, pool_, job.local, stream, [&](char* buf, uint64_t cap, uint64_t& off, uint64_t& n) {
        if (replied) return false;
        FrameHeader h;
        std::vector<uint8_t> body;
        ch.read_frame(h, body, channel::Channel::Wait::Timed);
        if (h.type == static_cast<uint16_t>(MsgId::AsyncData) && h.request_id == id) {
          auto d = decode_message<AsyncDataMsg>(body.data(), body.size());
          if (h.payload_len > cap) throw ProtoError("a peer read chunk is too large");
          iovec v{buf, h.payload_len};
          ch.read_payload(&v, 1);
          off = d.offset;
          n = h.payload_len;
          return true;
        }
        if (!(h.flags & kFlagReply) || h.type != static_cast<uint16_t>(MsgId::PeerRead) ||
            h.request_id != id)
          throw ProtoError("the peer sent an unexpected frame");
        Empty ok;
        std::string message;
        if (int32_t e = decode_reply(body, ok, message)) reply = Status::fail(e, message);
        replied = true;
        return false;
      });
  if (!reply.ok()) return reply;
  return s;
}

bool PeerCopier::transfer_mapped(Link& l, const PeerJob& job, uint64_t stream, Status& out) {
  channel::Channel& ch = *l.ch;
  const uint16_t type = static_cast<uint16_t>(MsgId::PeerIpcMap);
  const int dev = job.local.dev;
  // The frees the passive session had made by now: its answer accounts for every one of them.
  const uint32_t frees = l.fences ? peer_fence_load(l.fences->page()->frees) : 0;
  uint64_t id = ch.next_request_id();
  ch.send(type, kFlagSync, id,
          encode_message(PeerIpcMapReq{static_cast<uint32_t>(dev), l.imports->take_forgotten()}));
  PeerIpcMapRep rep;
  if (out = await_reply(ch, type, id, &rep); !out.ok()) return true;  // PeerBegin refused
  l.trace.mark("map");
  uint64_t remote = 0;
  std::string why;
  const uint64_t rpitch = job.remote.height > 1 ? job.remote.pitch : job.remote.width;
  const uint64_t extent = (job.remote.height - 1) * rpitch + job.remote.width;
  if (!l.imports->apply(dev, job.remote.device, job.local.base, extent, rep, l.ipc, remote, why)) {
    LOG_DEBUG("peer copy through staging buffers: %s", why.c_str());
    // Memory that cannot be mapped here (no access between the GPUs, a full window) costs every
    // copy an export and a failed import: after a few, the link stops trying.
    if (why.rfind("cannot map", 0) == 0 && ++l.ipc_failures >= 3) {
      LOG_INFO(
          "peer link: the peer's memory cannot be mapped here (%s); copies go through "
          "staging buffers",
          why.c_str());
      ::close(l.ipc);
      l.ipc = -1;
    }
    return false;
  }
  l.ipc_failures = 0;
  l.checked_frees.store((uint64_t{1} << 32) | frees, std::memory_order_release);
  const backend::Rect r{job.local.width, job.local.height};
  out = job.push
            ? exec_.copy_on_device(dev, remote, rpitch, job.local.base, job.local.pitch, r, stream)
            : exec_.copy_on_device(dev, job.local.base, job.local.pitch, remote, rpitch, r, stream);
  l.trace.mark("enqueue");
  if (Status s = exec_.stream_synchronize(dev, stream); out.ok()) out = s;
  l.trace.mark("dma");
  ch.send(static_cast<uint16_t>(MsgId::PeerIpcDone), 0, ch.next_request_id(),
          encode_message(Empty{}));
  return true;
}

// Unmapping may wait for streams whose copies take mu_ as they end: never under mu_.
void PeerCopier::flush_unmaps() {
  std::vector<std::shared_ptr<PeerImports>> live, retired, done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& l : all_) live.push_back(l->imports);
    retired = retired_;
  }
  for (auto& im : live) im->flush();
  for (auto& im : retired) {  // ended links' imports go once all are unmapped
    im->flush();
    if (im->empty()) done.push_back(im);
  }
  if (done.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);  // (not across PeerImports' own lock)
  std::erase_if(retired_, [&](const std::shared_ptr<PeerImports>& im) {
    return std::find(done.begin(), done.end(), im) != done.end();
  });
}

std::vector<std::shared_ptr<PeerImports>> PeerCopier::every_import() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<PeerImports>> all;
  for (auto& l : all_) all.push_back(l->imports);
  all.insert(all.end(), retired_.begin(), retired_.end());
  return all;
}

void PeerCopier::stream_ending(int dev, uint64_t stream) {
  for (auto& im : every_import()) im->stream_ending(dev, stream);
}

void PeerCopier::forget_device(int dev) {
  for (auto& im : every_import()) im->forget_device(dev);
}

void PeerCopier::Trace::mark(const char* what) {
  if (!on) return;
  auto now = std::chrono::steady_clock::now();
  phases += std::string(phases.empty() ? "" : " ") + what + " " +
            std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now - t0).count());
}

bool PeerCopier::wait_idle(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, limit, [&] { return busy_ == 0; });
}

void PeerCopier::stop() {
  std::vector<std::shared_ptr<Link>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    all.swap(all_);
    links_.clear();
  }
  for (auto& l : all) {
    std::lock_guard<std::mutex> lock(l->mu);
    l->cancelled = true;
    if (l->conn) l->conn->shutdown();  // wakes the thread in recv/send
    l->cv.notify_all();
  }
  for (auto& l : all)
    if (l->thread.joinable()) l->thread.join();
}

}  // namespace rgpu::server
