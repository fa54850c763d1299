#include "server/tls_gate.h"

#include <vector>

#include "channel/channel.h"
#include "common/cuda_errors.h"
#include "common/log.h"
#include "proto/frame.h"

namespace rgpu::server {
namespace {

constexpr int kTlsHandshakeSec = 10;

// Answers a plain client's first frame (its Hello) with an error it will show its user.
void refuse_plain_client(transport::Connection& conn) {
  using namespace proto;
  const std::string msg =
      "this rgpud requires TLS: set RGPU_TLS=1 (and RGPU_TLS_CA to the CA that signed its "
      "certificate)";
  LOG_WARN("refusing %s: a client without TLS", conn.peer().c_str());
  try {
    conn.set_recv_timeout(kTlsHandshakeSec);
    channel::Channel ch(conn);
    FrameHeader h;
    std::vector<uint8_t> body;
    ch.read_frame(h, body, channel::Channel::Wait::Timed);
    if (h.type != static_cast<uint16_t>(MsgId::Hello) || h.payload_len != 0) return;
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

std::unique_ptr<transport::Connection> secure_client(std::unique_ptr<transport::Connection> tcp,
                                                     const transport::TlsContext& ctx) {
  switch (transport::peek_first_bytes(*tcp, kTlsHandshakeSec)) {
    case transport::FirstBytes::None:
      LOG_INFO("client %s sent nothing", tcp->peer().c_str());
      return nullptr;
    case transport::FirstBytes::NotTls:
      refuse_plain_client(*tcp);
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
