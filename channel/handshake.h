// The handshake, both halves, for every rgpu link (client -> server today; server -> server next):
//
//   requester: Hello{magic, version, arch, info, timeout, known ids}
//   server:    HelloRep{..., auth_required, challenge, known ids}   (or an error reply: refused)
//   requester: Auth{HMAC(token, challenge)}                         (only when asked)
//   server:    ok                                                   (or an error reply)
//
// Magic and version keep their place in every version, so a mismatch is refused with a message
// naming both.  The version is the framing's generation; messages are negotiated by the `known`
// lists instead: each side learns which ids the other has (Channel::peer_knows), and Hello and its
// reply may gain fields at their end (older peers ignore them).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "channel/channel.h"
#include "proto/messages.h"

namespace rgpu::channel {

// The oldest protocol version this build still speaks.
constexpr uint32_t kMinProtocolVersion = 4;

struct Refusal {
  int32_t code = 0;  // a CUDA error number
  std::string message;
};

// ---- the requester's half
struct HandshakeResult {
  int32_t error = 0;      // 0: connected; else why not (CUDA error number)
  std::string message;    // what went wrong, for the user
  proto::HelloRep hello;  // the server's reply (on success)
};
// `hello.known` is filled in with this build's ids.  `seconds_left` (may be empty) gives the
// receive/send timeout for each step, so the whole exchange keeps one deadline.  On success the
// channel knows what the server knows.  Throws TransportError / ProtoError on a broken link.
HandshakeResult request_handshake(Channel& ch, proto::HelloReq hello,
                                  const std::optional<std::string>& token,
                                  const std::function<int()>& seconds_left = {});

// ---- the server's half
struct AcceptPolicy {
  std::optional<std::string> token;  // when set, the requester must prove it holds it
  proto::HelloRep reply;             // what the server tells about itself (gpus, backend, window)
  // Who may connect at all, judged on the Hello (e.g. the peer's uid over shared memory).
  std::function<std::optional<Refusal>(const proto::HelloReq&)> check_peer;
  // Called once the requester is authenticated, before the reply that admits it: "" admits it,
  // anything else is the reason it is refused (cudaErrorDevicesUnavailable).
  std::function<std::string()> admit;
  // Requesters that prove themselves otherwise once the handshake is over, and get nothing
  // until they have (another rgpud's peer link: the peer key, server/peer_host.h), are not asked
  // for the token: an rgpud never answers a token challenge for a peer link.
  std::function<bool(const proto::HelloReq&)> token_exempt;
};
// True when the requester is authenticated and admitted (`hello` receives its Hello, and the
// channel knows what it knows); false when it was refused (it got a reply saying why) or left.
// Throws ProtoError / TransportError on malformed input or a broken link.
bool accept_handshake(Channel& ch, const AcceptPolicy& policy, proto::HelloReq* hello);

}  // namespace rgpu::channel
