// Authentication between rgpuds for server-to-server copies (docs/architecture.md, "Security of
// server-to-server copies").  The rgpuds of one cluster share a peer key (rgpud --peer-key-file),
// a secret clients never hold; the clients' token (--token-file, RGPU_TOKEN) plays no part here.
//
// Two keys are derived from it, one per use, so that no MAC made for one use is valid for another
// (and none is an HMAC under the token's key, whatever the key file holds):
//   tickets: HMAC(SHA-256(peer key), "rgpu-peer-ticket-v1") — the passive rgpud's statement of a
//            ticket (PeerVoucher: its id, secret, endpoint, machine, expiry, certificate pin);
//   links:   HMAC(SHA-256(peer key), "rgpu-peer-link-v1") — keyed again per ticket by its id and
//            secret, it makes each end's proof on the peer link: a MAC over a role label
//            ("active" / "passive") and both ends' fresh nonces.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "proto/auth.h"
#include "proto/messages.h"

namespace rgpu::proto {

struct PeerKey {
  Mac tickets{};
  Mac links{};
};
PeerKey derive_peer_key(const std::string& secret);

// The voucher's MAC: over every field of `v` but its own `mac`.
Mac peer_voucher_mac(const PeerKey& key, const PeerVoucher& v);
bool peer_voucher_verify(const PeerKey& key, const PeerVoucher& v);

enum class PeerRole { Active, Passive };
// The proof of the end in `role` on the link of ticket (`id`, `secret`): both nonces, always in
// the same order (the active end's first), under a key only holders of the peer key and of the
// ticket's secret can make.
Mac peer_link_proof(const PeerKey& key, PeerRole role, const PeerTicketId& id,
                    const PeerSecret& secret, const Nonce& active_nonce,
                    const Nonce& passive_nonce);
bool peer_link_verify(const PeerKey& key, PeerRole role, const PeerTicketId& id,
                      const PeerSecret& secret, const Nonce& active_nonce,
                      const Nonce& passive_nonce, const Mac& proof);

}  // namespace rgpu::proto
