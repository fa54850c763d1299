#include "server/handshake.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "common/cuda_errors.h"
#include "common/log.h"
#include "proto/auth.h"
#include "proto/frame.h"
#include "proto/messages.h"

namespace rgpu::server {

using namespace rgpu::proto;

namespace {

constexpr int kReadTimeoutSec = 10;  // per read; the daemon also bounds the whole handshake

void send_now(transport::Connection& conn, uint16_t type, uint64_t id,
              const std::vector<uint8_t>& body) {
  FrameHeader h{type, kFlagReply, static_cast<uint32_t>(body.size()), id, 0};
  uint8_t raw[kHeaderSize];
  encode_header(h, raw);
  iovec v[2] = {{raw, sizeof raw}, {const_cast<uint8_t*>(body.data()), body.size()}};
  conn.send_all(v, 2);
}

// Reads one frame that must be `want` without payload; false on a clean EOF before it.
bool read_frame(transport::Connection& conn, MsgId want, FrameHeader& h, std::vector<uint8_t>& body,
                const char* what) {
  uint8_t raw[kHeaderSize];
  if (!conn.recv_or_eof(raw, sizeof raw)) return false;
  h = decode_header(raw);
  if (h.type != static_cast<uint16_t>(want) || h.payload_len != 0) throw ProtoError(what);
  body.assign(h.body_len, 0);
  if (!body.empty()) conn.recv(body.data(), body.size());
  return true;
}

// Admission (daemon limits); false when refused, with the client told why.
bool admitted(transport::Connection& conn, const HandshakeConfig& cfg, const FrameHeader& h) {
  if (!cfg.admit) return true;
  std::string why = cfg.admit();
  if (why.empty()) return true;
  LOG_WARN("refusing %s: %s", conn.peer().c_str(), why.c_str());
  send_now(conn, h.type, h.request_id, encode_error_reply(err::DevicesUnavailable, why));
  return false;
}

}  // namespace

bool server_handshake(transport::Connection& conn, const HandshakeConfig& cfg,
                      uint32_t* client_timeout_ms) {
  conn.set_recv_timeout(kReadTimeoutSec);
  conn.set_send_timeout(kReadTimeoutSec);
  FrameHeader h;
  std::vector<uint8_t> body;
  if (!read_frame(conn, MsgId::Hello, h, body, "the first message is not Hello")) return false;
  // Magic and version come first in every protocol version.
  Reader r(body.data(), body.size());
  uint32_t magic = r.get<uint32_t>();
  uint32_t version = r.get<uint32_t>();
  if (magic != kMagic) throw ProtoError("bad magic in Hello");
  if (version != kProtocolVersion) {
    std::string msg = "protocol version mismatch: the client speaks rgpu protocol version " +
                      std::to_string(version) + ", this server (" + cfg.server_info +
                      ") speaks version " + std::to_string(kProtocolVersion);
    LOG_WARN("refusing %s: %s", conn.peer().c_str(), msg.c_str());
    send_now(conn, h.type, h.request_id, encode_error_reply(err::InsufficientDriver, msg));
    return false;
  }
  HelloReq hello = decode_message<HelloReq>(body.data(), body.size());
  if (client_timeout_ms) *client_timeout_ms = hello.timeout_ms;
  // A shared-memory client is a local process the kernel names (SO_PEERCRED): without a token,
  // only the daemon's own user (or root) may use it; with one, the token decides, as over TCP.
  long uid = conn.peer_uid();
  if (uid >= 0 && !cfg.token && uid != static_cast<long>(geteuid()) && uid != 0) {
    std::string msg = "user " + std::to_string(uid) +
                      " may not use this rgpud over shared memory: it runs as user " +
                      std::to_string(geteuid()) + " without a token (start it with --token-file)";
    LOG_WARN("refusing %s: %s", conn.peer().c_str(), msg.c_str());
    send_now(conn, h.type, h.request_id, encode_error_reply(err::NotPermitted, msg));
    return false;
  }
  LOG_INFO("client %s: %s (%s)", conn.peer().c_str(), hello.client_info.c_str(),
           hello.arch.c_str());

  HelloRep rep;
  rep.auth_required = cfg.token.has_value();
  Nonce challenge{};
  if (rep.auth_required) challenge = random_nonce();
  rep.challenge = challenge;
  rep.gpu_count = static_cast<uint32_t>(cfg.gpu_count);
  rep.driver_version = cfg.driver_version;
  rep.backend = cfg.backend;
  rep.server_info = cfg.server_info;
  rep.payload_window = cfg.payload_window;
  if (!rep.auth_required && !admitted(conn, cfg, h)) return false;
  send_now(conn, h.type, h.request_id, encode_ok_reply(rep));

  if (rep.auth_required) {
    FrameHeader a;
    if (!read_frame(conn, MsgId::Auth, a, body,
                    "authentication required but the client sent no Auth"))
      return false;
    AuthReq auth = decode_message<AuthReq>(body.data(), body.size());
    if (!auth_verify(*cfg.token, challenge, auth.mac)) {
      LOG_WARN("refusing %s: authentication failed (wrong token)", conn.peer().c_str());
      send_now(conn, a.type, a.request_id,
               encode_error_reply(err::NotPermitted,
                                  "authentication failed: the server did not accept RGPU_TOKEN"));
      return false;
    }
    if (!admitted(conn, cfg, a)) return false;
    send_now(conn, a.type, a.request_id, encode_ok_reply(Empty{}));
  }
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
