#include "server/handshake.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "channel/handshake.h"
#include "common/cuda_errors.h"
#include "common/log.h"
#include "transport/tcp/net_emu.h"

namespace rgpu::server {

using namespace rgpu::proto;

namespace {
constexpr int kReadTimeoutSec = 10;  // per read; the daemon also bounds the whole handshake
}  // namespace

bool server_handshake(transport::Connection& conn, const HandshakeConfig& cfg, HelloReq* hello) {
  conn.set_recv_timeout(kReadTimeoutSec);
  conn.set_send_timeout(kReadTimeoutSec);
  channel::AcceptPolicy policy;
  policy.token = cfg.token;
  policy.reply.gpu_count = static_cast<uint32_t>(cfg.gpu_count);
  policy.reply.driver_version = cfg.driver_version;
  policy.reply.backend = cfg.backend;
  policy.reply.server_info = cfg.server_info;
  policy.reply.payload_window = cfg.payload_window;
  HelloReq seen;  // the client's Hello, for `admit`
  if (cfg.admit) policy.admit = [&] { return cfg.admit(seen); };
  if (cfg.peer_links_prove_later)
    policy.token_exempt = [](const HelloReq& h) {
      return h.purpose == static_cast<uint32_t>(LinkPurpose::PeerLink);
    };
  // A shared-memory client is a local process the kernel names (SO_PEERCRED): without a token,
  // only the daemon's own user (or root) may use it; with one, the token decides, as over TCP.
  policy.check_peer = [&](const HelloReq& h) -> std::optional<channel::Refusal> {
    seen = h;
    long uid = conn.peer_uid();
    if (uid >= 0 && !cfg.token && uid != static_cast<long>(geteuid()) && uid != 0)
      return channel::Refusal{err::NotPermitted,
                              "user " + std::to_string(uid) +
                                  " may not use this rgpud over shared memory: it runs as user " +
                                  std::to_string(geteuid()) +
                                  " without a token (start it with --token-file)"};
    LOG_INFO("client %s: %s (%s)", conn.peer().c_str(), h.client_info.c_str(), h.arch.c_str());
    // RGPU_NET_EMU: this side's direction is emulated toward a client that emulates its own (so
    // a plain client of the same rgpud is measured plain); from the Hello's reply on.
    if (transport::net_emu_announced(h.client_info) && transport::net_emu_activate(conn))
      LOG_INFO("client %s: network emulation %s both ways", conn.peer().c_str(),
               transport::process_net_emu().spec().c_str());
    return std::nullopt;
  };
  channel::Channel ch(conn);
  if (!channel::accept_handshake(ch, policy, hello)) return false;
  conn.set_recv_timeout(0);
  return true;
}

std::string client_identity(const transport::Connection& conn) {
  if (long uid = conn.peer_uid(); uid >= 0) return "uid " + std::to_string(uid);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  char text[INET6_ADDRSTRLEN] = "?";
  if (getpeername(conn.fd(), reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    if (ss.ss_family == AF_INET)
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, text, sizeof text);
    else if (ss.ss_family == AF_INET6)
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, text, sizeof text);
  }
  return std::string("address ") + text;
}

}  // namespace rgpu::server
