// The peer key and tickets' statements for server-to-server copies (docs/architecture.md,
// "Security of server-to-server copies").
//
// The passive rgpud vouches for its own endpoint in each ticket it issues (proto::PeerVoucher,
// MAC'd under the peer key): where its client reached it.  The active rgpud connects only to the
// endpoint of a ticket whose MAC holds under its own peer key, so a client, which never holds
// that key, cannot make it connect anywhere an rgpud of its cluster did not vouch for itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "proto/peer_auth.h"
#include "transport/connection.h"

namespace rgpu::server {

// Where rgpud keeps its peer key without --peer-key-file: $XDG_CONFIG_HOME/rgpud/peer-key, else
// ~/.config/rgpud/peer-key, else /tmp/rgpud-<uid>/peer-key.  rgpuds of one user on one machine so
// share one; rgpuds of a cluster are given the same file (--peer-key-file).
std::string default_peer_key_file();
// Reads a peer key file (its first line; mode 0600, as a token file, and owned by this user).
// `create`: a missing file is made first (256 random bits in hex; its folder mode 0700, owned by
// this user, writable by nobody else).  nullopt with `error` set when there is no key.
std::optional<std::string> load_peer_key(const std::string& path, bool create, std::string& error);

// The endpoint ("address:port", numeric) this rgpud vouches for in a ticket for the client on
// `conn`: the connection's own local address when the client came over TCP (where it reached this
// rgpud); otherwise (shared memory: the client is on this machine) `listen`, the TCP listener's
// address, with a wildcard as loopback.  "" with `why` when there is none.
std::string peer_own_endpoint(const transport::Connection& conn, const std::string& listen,
                              std::string& why);

// Milliseconds since 1970 (tickets' expiry: the two rgpuds' clocks may differ by up to
// kPeerClockSlackMs).
uint64_t peer_wall_ms();
constexpr uint64_t kPeerClockSlackMs = 5 * 60 * 1000;

// Whether this rgpud may connect to the endpoint ticket `v` names: "" when it may; else why not.
// `key` null: this rgpud has no peer key (`no_key` says why).  Checked before any connection.
std::string peer_check_voucher(const proto::PeerKey* key, const std::string& no_key,
                               const proto::PeerVoucher& v);

}  // namespace rgpu::server
