// Server-to-server copies: rgpud routes a peer link to the session that issued its ticket.
//
// A session that issues a ticket (server/peer_host.h) registers the ticket's id with the daemon
// over its control socket: kPeerRegister + id + expiry (ms, u32), with its *inbox* attached the
// first time (one end of a SOCK_SEQPACKET pair the session reads).  Another rgpud then connects
// like a client (HelloReq::purpose PeerLink); the process the daemon forked for that connection
// does the handshake (which asks a peer link for no token), reads the link's first request
// (PeerAttach: ticket id and the peer's nonce) and sends kPeerHandoff + id + nonce + the
// request's id, with the connection's descriptor attached.  The daemon passes both to the owner's
// inbox (once: the route goes), and the owner runs the peer key's proofs with the peer and serves
// the link.  Routes end with their session, at expiry, or at their one use.  When rgpud
// runs TLS the link is routed before its TLS handshake instead: its first frame is a plain
// PeerRoute (the ticket's id only), the hand-off carries no secret and says "TLS", and the owner
// runs the handshake and reads PeerAttach itself (server/tls_gate.h, PeerHost::attach_tls).
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "proto/auth.h"
#include "proto/messages.h"

namespace rgpu::server {

constexpr char kPeerRegister = 'K';
constexpr char kPeerHandoff = 'P';
// kPeerHandoff's message, as forwarded to the inbox: id, the peer's nonce, PeerAttach's request
// id, and 1 when the link was routed before TLS (PeerRoute: no nonce yet, the owner runs the
// handshake).
constexpr size_t kPeerHandoffBytes = 1 + 16 + 32 + 8 + 1;
constexpr size_t kMaxRoutesPerSession = 4096;

// The daemon's side.  Not thread-safe (the daemon's loop owns it).
class PeerRoutes {
 public:
  PeerRoutes() = default;
  ~PeerRoutes() { close_all(); }
  PeerRoutes(const PeerRoutes&) = delete;
  PeerRoutes& operator=(const PeerRoutes&) = delete;

  // kPeerRegister from admitted session `owner` on `sock`; `fd` (may be -1) is its inbox.
  void serve_register(pid_t owner, int sock, const char* msg, size_t n, int fd);
  // kPeerHandoff from a process in its handshake on `sock`; `fd` is the peer link.
  void serve_handoff(int sock, const char* msg, size_t n, int fd);
  void drop_owner(pid_t owner);
  void close_all();
  size_t size() const { return routes_.size(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Route {
    pid_t owner;
    Clock::time_point expires;
  };
  void expire();
  std::map<pid_t, int> inboxes_;
  std::map<proto::PeerTicketId, Route> routes_;
};

// The session's side: registers a ticket id (with `inbox` attached, or -1); "" or why not.
std::string peer_register(int control, const proto::PeerTicketId& id, uint32_t expires_ms,
                          int inbox, int timeout_ms = 5000);
// The handshake process's side: hands `link` to the ticket's owner; "" or why not.
std::string peer_handoff(int control, const proto::PeerTicketId& id, const proto::Nonce& nonce,
                         uint64_t request_id, int link, bool tls = false, int timeout_ms = 5000);

}  // namespace rgpu::server
