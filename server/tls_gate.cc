#include "server/tls_gate.h"

#include <vector>

#include "channel/channel.h"
#include "common/cuda_errors.h"
#include "common/log.h"
#include "proto/frame.h"

namespace rgpu::server {
namespace {

constexpr int kTlsHandshakeSec = 10;

// A plain first frame: another rgpud's PeerRoute is routed (and answered in plain: the session it
// went to runs the TLS handshake next); a client's Hello gets an error it will show its user.
void serve_plain_client(transport::Connection& conn, const PeerRouter& route) {
  using namespace proto;
  try {
    conn.set_recv_timeout(kTlsHandshakeSec);
    conn.set_send_timeout(kTlsHandshakeSec);
    channel::Channel ch(conn);
    FrameHeader h;
    std::vector<uint8_t> body;
    ch.read_frame(h, body, channel::Channel::Wait::Timed);
    if (h.type == static_cast<uint16_t>(MsgId::PeerRoute) && h.payload_len == 0) {
      auto q = decode_message<PeerRouteReq>(body.data(), body.size());
      std::string why = route(q.ticket, h.request_id, conn.fd());
      if (!why.empty()) LOG_WARN("peer link from %s refused: %s", conn.peer().c_str(), why.c_str());
      ch.send(h.type, kFlagReply, h.request_id,
              why.empty() ? encode_ok_reply(Empty{}) : encode_error_reply(err::NotPermitted, why));
      return;
    }
    LOG_WARN("refusing %s: a client without TLS", conn.peer().c_str());
    if (h.type != static_cast<uint16_t>(MsgId::Hello) || h.payload_len != 0) return;
    const bool peer = decode_message<HelloReq>(body.data(), body.size()).purpose ==
                      static_cast<uint32_t>(LinkPurpose::PeerLink);
    const std::string msg =
        peer ? "this rgpud requires TLS, and the client's ticket named no certificate for it "
               "(an rgpud or client of another version?)"
             : "this rgpud requires TLS: set RGPU_TLS=1 (and RGPU_TLS_CA to the CA that signed "
               "its certificate)";
    ch.send(h.type, kFlagReply, h.request_id, encode_error_reply(err::NotPermitted, msg));
  } catch (const std::exception& e) {
    LOG_INFO("client %s: %s", conn.peer().c_str(), e.what());
  }
}

}  // namespace

std::unique_ptr<transport::TlsContext> make_tls_context(const TlsSettings& s) {
  if (s.cert_file.empty() && s.key_file.empty() && s.client_ca_file.empty()) return nullptr;
  if (s.cert_file.empty() || s.key_file.empty())
    throw transport::TlsError(transport::TlsError::Kind::Config,
                              "TLS needs both --tls-cert and --tls-key");
  return transport::TlsContext::server({s.cert_file, s.key_file, s.client_ca_file});
}

std::unique_ptr<transport::TlsContext> make_peer_tls_context(const TlsSettings& s) {
  if (s.cert_file.empty() || s.key_file.empty()) return nullptr;
  return transport::TlsContext::server({s.cert_file, s.key_file, ""});
}

std::unique_ptr<transport::Connection> secure_client(std::unique_ptr<transport::Connection> tcp,
                                                     const transport::TlsContext& ctx,
                                                     const PeerRouter& route) {
  switch (transport::peek_first_bytes(*tcp, kTlsHandshakeSec)) {
    case transport::FirstBytes::None:
      LOG_INFO("client %s sent nothing", tcp->peer().c_str());
      return nullptr;
    case transport::FirstBytes::NotTls:
      serve_plain_client(*tcp, route);
      return nullptr;
    case transport::FirstBytes::Tls:
      break;
  }
  std::string peer = tcp->peer();
  try {
    auto conn = transport::tls_accept(std::move(tcp), ctx, kTlsHandshakeSec);
    LOG_INFO("client %s: %s", peer.c_str(), transport::tls_summary(*conn).c_str());
    return conn;
  } catch (const std::exception& e) {
    LOG_WARN("refusing %s: %s", peer.c_str(), e.what());
    return nullptr;
  }
}

}  // namespace rgpu::server
