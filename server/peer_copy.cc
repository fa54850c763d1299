#include "server/peer_copy.h"

#include <unistd.h>

#include "channel/channel.h"
#include "channel/handshake.h"
#include "common/cuda_errors.h"
#include "common/log.h"
#include "common/strings.h"
#include "transport/tcp/tcp.h"

namespace rgpu::server {

using namespace rgpu::proto;
using backend::Status;

namespace {

// The reply to request `id` of type `type` (AsyncData frames go to `data`, when given).
Status await_reply(
    channel::Channel& ch, uint16_t type, uint64_t id,
    const std::function<bool(const FrameHeader&, const std::vector<uint8_t>&)>& data = {}) {
  FrameHeader h;
  std::vector<uint8_t> body;
  for (;;) {
    ch.read_frame(h, body, channel::Channel::Wait::Timed);
    if (h.type == static_cast<uint16_t>(MsgId::AsyncData) && data && h.request_id == id) {
      data(h, body);
      continue;
    }
    if (!(h.flags & kFlagReply) || h.type != type || h.request_id != id)
      throw ProtoError("the peer sent an unexpected frame");
    Empty ok;
    std::string message;
    int32_t e = decode_reply(body, ok, message);
    return e ? Status::fail(e, message) : Status::success();
  }
}

}  // namespace

PeerCopier::PeerCopier(backend::Executor& exec, StagingPool& pool, std::optional<std::string> token,
                       int timeout_s)
    : exec_(exec),
      pool_(pool),
      token_(std::move(token)),
      timeout_s_(timeout_s > 0 ? timeout_s : 10) {}

void PeerCopier::start(PeerJob job, std::function<void(const Status&)> done) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = runs_.begin(); it != runs_.end();) {  // join finished copies
    if ((*it)->done) {
      (*it)->thread.join();
      it = runs_.erase(it);
    } else {
      ++it;
    }
  }
  auto run = std::make_unique<Run>();
  Run* r = run.get();
  r->cancelled = stopping_;
  runs_.push_back(std::move(run));
  r->thread = std::thread([this, r, job = std::move(job), done = std::move(done)] {
    Status s = copy(*r, job);
    if (!s.ok())
      s.message = std::string("copy ") + (job.push ? "to " : "from ") + job.remote_name + " (" +
                  job.endpoint + "): " + s.message;
    done(s);
    r->done = true;
  });
}

Status PeerCopier::copy(Run& run, const PeerJob& job) {
  // The stream's earlier work first (the stream itself waits at its gate meanwhile).
  Status s = exec_.event_synchronize(job.local.dev, job.after_event);
  exec_.event_destroy(job.local.dev, job.after_event);
  if (!s.ok()) return s;
  auto hp = parse_host_port(job.endpoint);
  if (!hp) return Status::fail(err::InvalidValue, "bad peer endpoint");
  uint64_t stream = 0;
  if (Status c = exec_.stream_create(job.local.dev, 1 /* non-blocking */, 0, stream); !c.ok())
    return c;
  try {
    auto conn = transport::tcp_connect(hp->host, hp->port, timeout_s_);
    {
      std::lock_guard<std::mutex> lock(run.mu);
      if (run.cancelled) throw transport::TransportError("the session is ending");
      run.conn = conn.get();
    }
    s = transfer(run, job, *conn, stream);
    {
      std::lock_guard<std::mutex> lock(run.mu);
      run.conn = nullptr;
    }
  } catch (const std::exception& e) {
    {
      std::lock_guard<std::mutex> lock(run.mu);
      run.conn = nullptr;
    }
    s = Status::fail(err::DevicesUnavailable, std::string("peer link failed: ") + e.what());
  }
  exec_.stream_destroy(job.local.dev, stream);
  return s;
}

Status PeerCopier::transfer(Run&, const PeerJob& job, transport::Connection& conn,
                            uint64_t stream) {
  channel::Channel ch(conn);
  HelloReq hello;
  hello.client_info = "rgpud peer link (pid " + std::to_string(getpid()) + ")";
  hello.timeout_ms = static_cast<uint32_t>(timeout_s_) * 1000;
  hello.purpose = static_cast<uint32_t>(LinkPurpose::PeerLink);
  conn.set_recv_timeout(timeout_s_);
  conn.set_send_timeout(timeout_s_);
  channel::HandshakeResult hr = channel::request_handshake(ch, hello, token_);
  if (hr.error) return Status::fail(hr.error, "peer link refused: " + hr.message);
  uint64_t id = ch.next_request_id();
  ch.send(static_cast<uint16_t>(MsgId::PeerAttach), kFlagSync, id,
          encode_message(PeerAttachReq{job.ticket, job.secret}));
  if (Status s = await_reply(ch, static_cast<uint16_t>(MsgId::PeerAttach), id); !s.ok()) return s;
  const uint64_t total = job.local.bytes();
  if (total != job.remote_bytes) return Status::fail(err::InvalidValue, "peer copy sizes differ");
  if (job.push) {
    const uint16_t write = static_cast<uint16_t>(MsgId::PeerWrite);
    Status s = peer_send_rows(
        exec_, pool_, job.local, stream, [&](uint64_t off, const char* data, uint64_t n) {
          iovec v{const_cast<char*>(data), n};
          ch.send(write, 0, ch.next_request_id(), encode_message(PeerWriteReq{off, n}), &v, 1);
        });
    if (!s.ok()) return s;  // closing the link tells the peer
    id = ch.next_request_id();
    ch.send(static_cast<uint16_t>(MsgId::PeerFinish), kFlagSync, id, encode_message(Empty{}));
    return await_reply(ch, static_cast<uint16_t>(MsgId::PeerFinish), id);
  }
  // Pull: the peer streams AsyncData chunks, each copied to the GPU while the next arrives.
  id = ch.next_request_id();
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

void PeerCopier::stop() {
  std::vector<std::unique_ptr<Run>> runs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& r : runs_) {
      std::lock_guard<std::mutex> rl(r->mu);
      r->cancelled = true;
      if (r->conn) r->conn->shutdown();
    }
    runs.swap(runs_);
  }
  for (auto& r : runs) r->thread.join();
}

}  // namespace rgpu::server
