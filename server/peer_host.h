// Server-to-server copies, the passive end (docs/architecture.md, "Server-to-server copies"): the
// session whose GPU is not the copy's stream's issues a one-time ticket (PeerTicket: a statement
// of its endpoint MAC'd under the peer key, server/peer_vouch.h) and serves the other server's
// peer link that shows it: PeerAttach (the ticket's id, used up at once, and the peer's nonce;
// answered with this end's proof) and PeerProve (the peer's: both hold the peer key and the
// ticket's secret, proto/peer_auth.h), then copy after copy for as long as the link stays up:
// PeerBegin (the copy's rows, checked against the session's allocations), then PeerWrite... +
// PeerFinish (the peer writes them) or PeerRead (it reads them).  Links arrive through rgpud
// (server/peer_routes.h) on the session's inbox; each is served on a thread of its own with staging
// buffers from the session's pool.  Between copies a link may stay silent for as long as it likes.
//
// When rgpud runs TLS (`tls`: its certificate, without client verification: the ticket is the
// peer's credential), a ticket carries the certificate's fingerprint for the client to hand the
// active server, and a link arrives before its TLS handshake (PeerRoute, server/tls_gate.h): its
// thread runs the handshake, then reads PeerAttach and PeerProve over TLS.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/executor.h"
#include "channel/channel.h"
#include "proto/messages.h"
#include "proto/peer_auth.h"
#include "server/peer_pipe.h"
#include "transport/connection.h"
#include "transport/tls/tls.h"

namespace rgpu::server {

class PeerHost {
 public:
  // What the session lends its links (called on a link's thread): whether a copy's rows lie in
  // its memory; giving back a fence's event (Session::release_event).
  struct Hooks {
    // `born_by`: an AllocationTable stamp; rows in memory allocated since do not count.
    std::function<backend::Status(const proto::PeerBeginReq&, uint64_t born_by)> check;
    std::function<void(int dev, uint64_t event)> release_event;
    // The stamp of the allocation that holds (dev, ptr), 0 for none (PeerExports).
    std::function<uint64_t(int dev, uint64_t ptr)> stamp_at;
    // The session's fence page (server/peer_fences.h), made at the first call: its memfd (the
    // session's) and a new slot for the asking link; an error when there is none (or no slot).
    std::function<backend::Status(int& fd, uint32_t& slot)> fence_page;
    // PeerFenceQuery: the state of GPU `dev`'s legacy stream (Executor::stream_query).
    std::function<backend::Status(uint32_t dev)> fence_query;
  };
  // `control`: the session's control socket to rgpud; `timeout_s`: a link that stays silent
  // this long mid-copy is dropped (and how long a copy waits for its fence).
  // `key`: the peer key (null: no tickets are issued).
  PeerHost(backend::Executor& exec, StagingPool& pool, int control, int timeout_s, Hooks hooks,
           const proto::PeerKey* key, const transport::TlsContext* tls = nullptr);
  ~PeerHost() { stop(); }
  PeerHost(const PeerHost&) = delete;
  PeerHost& operator=(const PeerHost&) = delete;

  static constexpr uint32_t kTicketMs = 600000;  // a copy may wait behind its stream's work
  // A ticket for one link, vouching for `endpoint` (where this rgpud is: server/peer_vouch.h)
  // (the dispatcher's call: it alone uses the control socket).
  backend::Status issue(proto::PeerTicketRep& rep, const std::string& endpoint);
  // PeerFence (the dispatcher's call): `event`, recorded on GPU `dev`'s legacy stream, is what
  // the copy that names fence `id` waits for; it is the host's now (released when used, or when
  // too many wait unclaimed).
  // `stamp`: the allocation table's stamp() then; the copy's rows must be older.
  void fence(const std::vector<uint64_t>& ids, int dev, uint64_t event, uint64_t stamp);
  // The session ends: links are shut down, threads joined, tickets forgotten.
  void stop();
  // Waits (up to `limit`) until no link is in the middle of a copy; false when one still is.
  // A free calls it after the allocation left the table (so no later PeerBegin can name it):
  // a copy whose rows were checked before that ends before the memory goes.
  bool wait_quiet(std::chrono::milliseconds limit);

 private:
  using Clock = std::chrono::steady_clock;
  struct Ticket {
    proto::PeerSecret secret;
    Clock::time_point expires;
  };
  struct Link {
    std::unique_ptr<transport::Connection> conn;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void inbox_loop();
  void accept(const char* msg, int fd);
  // "" when ticket `id` is valid, its secret in `secret` (used up either way), else why not
  // (mu_ held).
  std::string redeem(const proto::PeerTicketId& id, proto::PeerSecret& secret);
  // A link routed before TLS: the handshake, PeerAttach over TLS, then prove and serve (its
  // thread).
  void attach_tls(Link& link, const proto::PeerTicketId& routed);
  // The proofs (PeerAttach's reply, then the peer's PeerProve): true when the peer holds the
  // peer key and the ticket's secret; else it was told why not.
  bool prove(transport::Connection& conn, const proto::PeerTicketId& id,
             const proto::PeerSecret& secret, const proto::Nonce& theirs, uint64_t attach_id);
  void refuse(transport::Connection& conn, uint16_t type, uint64_t request_id,
              const std::string& why);
  void serve(Link& link);
  // PeerIpcOpen: a unix socket beside the link when the peer runs on this machine (-1 if not).
  int open_ipc(channel::Channel& ch, const proto::FrameHeader& h, const std::vector<uint8_t>& body);
  // Waits (up to timeout_s_) for fence `id`, then for its event.
  // `stamp` out: the fence's allocation stamp.
  backend::Status await_fence(uint64_t id, int& dev, uint64_t& stamp);
  void reap_done();  // joins finished link threads (mu_ held)

  backend::Executor& exec_;
  StagingPool& pool_;
  const int control_;
  const int timeout_s_;
  const Hooks hooks_;
  const proto::PeerKey* const key_;
  const transport::TlsContext* const tls_;
  transport::CertFingerprint pin_{};  // tls_'s certificate
  int inbox_ = -1;                    // the session's end; rgpud holds the other
  std::thread inbox_thread_;
  std::mutex mu_;  // tickets_, links_, fences_, stopping_; never held across a backend call
  std::map<proto::PeerTicketId, Ticket> tickets_;
  std::vector<std::unique_ptr<Link>> links_;
  struct Fence {
    int dev;
    std::shared_ptr<uint64_t> event;  // shared by fences that mark one point; released
    uint64_t stamp;                   // (Hooks::release_event) with the last of them
  };
  std::map<uint64_t, Fence> fences_;  // sent by the client, not yet claimed by a copy
  std::condition_variable fence_cv_;
  int copying_ = 0;  // links between PeerBegin and the end of that copy
  std::condition_variable quiet_cv_;
  bool stopping_ = false;
};

}  // namespace rgpu::server
