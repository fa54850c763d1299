// rgpud's side of the handshake: its policy (the shm peer check, admission) on the channel
// layer's exchange (Hello, version check, token challenge),
// shared by Session and the daemon's session processes.  The daemon runs it before anything is
// spent on the client (no executor, no GPU context, no ledger slot); the daemon also bounds how
// long it may take (server/daemon.cc), since a per-read timeout alone can be extended by a peer
// that trickles bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "proto/messages.h"
#include "transport/connection.h"

namespace rgpu::server {

struct HandshakeConfig {
  std::optional<std::string> token;  // when set, clients must prove they hold it
  std::string server_info;           // "rgpud 0.1.0 on host"
  int gpu_count = 0;
  int driver_version = 0;
  std::string backend;  // "cuda", "host"
  // Called once the client is authenticated, before the reply that admits it, with its Hello (what
  // the link is for: HelloReq::purpose): returns "" to admit it, or the reason it is refused (sent
  // to the client as cudaErrorDevicesUnavailable).
  std::function<std::string(const proto::HelloReq&)> admit;
  uint64_t payload_window = 0;  // HelloRep::payload_window
  // Peer links (HelloReq::purpose PeerLink) are not asked for the token: rgpud's session process
  // serves them nothing but the peer key's proofs (server/peer_host.h) before a copy.  Only a
  // caller that never makes a session of a peer link sets it.
  bool peer_links_prove_later = false;
};

// True when the client is authenticated and admitted; false when it was refused (it got a reply
// saying why) or left.  Throws ProtoError / TransportError on malformed input or a broken link.
// `hello` (may be null) receives the client's Hello (its timeout, the messages it knows).
// The exchange itself is the channel layer's (channel/handshake.h); this is rgpud's policy.
bool server_handshake(transport::Connection& conn, const HandshakeConfig& config,
                      proto::HelloReq* hello = nullptr);

// What --max-sessions-per-user counts by: "uid N" for a shared-memory client (the kernel's word),
// "address A" (the peer's IP address, without port) for TCP.
std::string client_identity(const transport::Connection& conn);

}  // namespace rgpu::server
