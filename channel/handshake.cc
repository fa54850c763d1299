#include "channel/handshake.h"

#include "common/cuda_errors.h"
#include "common/log.h"
#include "proto/auth.h"

namespace rgpu::channel {

using namespace rgpu::proto;

namespace {

// Splits a reply body like decode_reply, tolerating fields a newer peer appended.
template <class Rep>
int32_t decode_hello_reply(const std::vector<uint8_t>& body, Rep& rep, std::string& message) {
  Reader r(body.data(), body.size());
  int32_t error = r.get<int32_t>();
  if (error == 0) {
    rep = decode_message_prefix<Rep>(body.data() + 4, body.size() - 4);
  } else {
    decode_field(r, message);
  }
  return error;
}

void timeouts(Channel& ch, const std::function<int()>& seconds_left) {
  if (!seconds_left) return;
  int s = seconds_left();
  ch.connection().set_send_timeout(s);
  ch.connection().set_recv_timeout(s);
}

bool version_ok(uint32_t v) { return v >= kMinProtocolVersion && v <= kProtocolVersion; }

std::string versions(uint32_t theirs) {
  return std::to_string(theirs) +
         (kMinProtocolVersion == kProtocolVersion
              ? ", this side speaks version " + std::to_string(kProtocolVersion)
              : ", this side speaks versions " + std::to_string(kMinProtocolVersion) + " to " +
                    std::to_string(kProtocolVersion));
}

// Reads one frame that must be `want` without payload; false on a clean close before it.
bool read_expected(Channel& ch, MsgId want, FrameHeader& h, std::vector<uint8_t>& body,
                   const char* what) {
  if (!ch.read_frame(h, body, Channel::Wait::TimedOrEof)) return false;
  if (h.type != static_cast<uint16_t>(want) || h.payload_len != 0) throw ProtoError(what);
  return true;
}

void reply(Channel& ch, const FrameHeader& h, const std::vector<uint8_t>& body) {
  ch.send(h.type, kFlagReply, h.request_id, body);
}

}  // namespace

HandshakeResult request_handshake(Channel& ch, HelloReq hello,
                                  const std::optional<std::string>& token,
                                  const std::function<int()>& seconds_left) {
  HandshakeResult out;
  hello.magic = kMagic;
  hello.version = kProtocolVersion;
  hello.known = known_ids();
  timeouts(ch, seconds_left);
  ch.send(static_cast<uint16_t>(MsgId::Hello), kFlagSync, ch.next_request_id(),
          encode_message(hello));
  FrameHeader h;
  std::vector<uint8_t> body;
  ch.read_frame(h, body, Channel::Wait::Timed);
  if (!(h.flags & kFlagReply) || h.type != static_cast<uint16_t>(MsgId::Hello))
    throw ProtoError("the server did not answer Hello");
  out.error = decode_hello_reply(body, out.hello, out.message);
  if (out.error) return out;
  if (out.hello.magic != kMagic) throw ProtoError("bad magic in the server's Hello reply");
  if (!version_ok(out.hello.version)) {
    out.error = err::InsufficientDriver;
    out.message = "the server speaks rgpu protocol version " + versions(out.hello.version);
    return out;
  }
  if (out.hello.auth_required) {
    if (!token) {
      out.error = err::NotPermitted;
      out.message = "it requires authentication: set RGPU_TOKEN to its token";
      return out;
    }
    AuthReq auth;
    auth.mac = auth_mac(*token, out.hello.challenge);
    timeouts(ch, seconds_left);
    ch.send(static_cast<uint16_t>(MsgId::Auth), kFlagSync, ch.next_request_id(),
            encode_message(auth));
    ch.read_frame(h, body, Channel::Wait::Timed);
    if (!(h.flags & kFlagReply) || h.type != static_cast<uint16_t>(MsgId::Auth))
      throw ProtoError("the server did not answer Auth");
    Empty ok;
    int32_t e = decode_reply(body, ok, out.message);
    if (e != err::Success) {
      out.error = err::NotPermitted;
      return out;
    }
  }
  ch.set_peer_known(out.hello.known);
  return out;
}

bool accept_handshake(Channel& ch, const AcceptPolicy& policy, HelloReq* hello_out) {
  FrameHeader h;
  std::vector<uint8_t> body;
  if (!read_expected(ch, MsgId::Hello, h, body, "the first message is not Hello")) return false;
  // Magic and version come first in every protocol version.
  Reader r(body.data(), body.size());
  uint32_t magic = r.get<uint32_t>();
  uint32_t version = r.get<uint32_t>();
  if (magic != kMagic) throw ProtoError("bad magic in Hello");
  const std::string peer = ch.connection().peer();
  if (!version_ok(version)) {
    std::string msg = "protocol version mismatch: the client speaks rgpu protocol version " +
                      std::to_string(version) + ", this server (" + policy.reply.server_info +
                      ") speaks version " + std::to_string(kProtocolVersion);
    LOG_WARN("refusing %s: %s", peer.c_str(), msg.c_str());
    reply(ch, h, encode_error_reply(err::InsufficientDriver, msg));
    return false;
  }
  HelloReq hello = decode_message_prefix<HelloReq>(body.data(), body.size());
  if (policy.check_peer) {
    if (auto no = policy.check_peer(hello)) {
      LOG_WARN("refusing %s: %s", peer.c_str(), no->message.c_str());
      reply(ch, h, encode_error_reply(no->code, no->message));
      return false;
    }
  }
  auto admitted = [&](const FrameHeader& last) {
    if (!policy.admit) return true;
    std::string why = policy.admit();
    if (why.empty()) return true;
    LOG_WARN("refusing %s: %s", peer.c_str(), why.c_str());
    reply(ch, last, encode_error_reply(err::DevicesUnavailable, why));
    return false;
  };
  HelloRep rep = policy.reply;
  rep.magic = kMagic;
  rep.version = kProtocolVersion;
  rep.auth_required =
      policy.token.has_value() && !(policy.token_exempt && policy.token_exempt(hello));
  Nonce challenge{};
  if (rep.auth_required) challenge = random_nonce();
  rep.challenge = challenge;
  rep.known = known_ids();
  if (!rep.auth_required && !admitted(h)) return false;
  reply(ch, h, encode_ok_reply(rep));
  if (rep.auth_required) {
    FrameHeader a;
    if (!read_expected(ch, MsgId::Auth, a, body,
                       "authentication required but the client sent no Auth"))
      return false;
    AuthReq auth = decode_message<AuthReq>(body.data(), body.size());
    if (!auth_verify(*policy.token, challenge, auth.mac)) {
      LOG_WARN("refusing %s: authentication failed (wrong token)", peer.c_str());
      reply(ch, a,
            encode_error_reply(err::NotPermitted,
                               "authentication failed: the server did not accept RGPU_TOKEN"));
      return false;
    }
    if (!admitted(a)) return false;
    reply(ch, a, encode_ok_reply(Empty{}));
  }
  ch.set_peer_known(hello.known);
  if (hello_out) *hello_out = std::move(hello);
  return true;
}

}  // namespace rgpu::channel
