#include "proto/peer_auth.h"

#include <sodium.h>

#include <cstring>
#include <stdexcept>

namespace rgpu::proto {
namespace {

void ensure_sodium() {
  static const bool ok = sodium_init() >= 0;
  if (!ok) throw std::runtime_error("libsodium failed to initialise");
}

struct Hmac {
  crypto_auth_hmacsha256_state st;
  explicit Hmac(const Mac& key) { crypto_auth_hmacsha256_init(&st, key.data(), key.size()); }
  ~Hmac() { sodium_memzero(&st, sizeof st); }
  Hmac& add(const void* p, size_t n) {
    crypto_auth_hmacsha256_update(&st, static_cast<const uint8_t*>(p), n);
    return *this;
  }
  Hmac& add(const char* label) { return add(label, strlen(label)); }
  template <size_t N>
  Hmac& add(const std::array<uint8_t, N>& a) {
    return add(a.data(), a.size());
  }
  Mac done() {
    Mac m;
    crypto_auth_hmacsha256_final(&st, m.data());
    return m;
  }
};

bool same(const Mac& a, const Mac& b) { return sodium_memcmp(a.data(), b.data(), a.size()) == 0; }

}  // namespace

PeerKey derive_peer_key(const std::string& secret) {
  ensure_sodium();
  Mac base;
  crypto_hash_sha256(base.data(), reinterpret_cast<const uint8_t*>(secret.data()), secret.size());
  PeerKey k;
  k.tickets = Hmac(base).add("rgpu-peer-ticket-v1").done();
  k.links = Hmac(base).add("rgpu-peer-link-v1").done();
  sodium_memzero(base.data(), base.size());
  return k;
}

Mac peer_voucher_mac(const PeerKey& key, const PeerVoucher& v) {
  ensure_sodium();
  PeerVoucher unsigned_copy = v;
  unsigned_copy.mac = {};
  // The wire encoding: fixed-size fields and length-prefixed strings, so no two vouchers share
  // their bytes.
  const std::vector<uint8_t> bytes = encode_message(unsigned_copy);
  Mac m = Hmac(key.tickets).add("voucher").add(bytes.data(), bytes.size()).done();
  sodium_memzero(unsigned_copy.secret.data(), unsigned_copy.secret.size());
  return m;
}

bool peer_voucher_verify(const PeerKey& key, const PeerVoucher& v) {
  return same(peer_voucher_mac(key, v), v.mac);
}

Mac peer_link_proof(const PeerKey& key, PeerRole role, const PeerTicketId& id,
                    const PeerSecret& secret, const Nonce& active_nonce,
                    const Nonce& passive_nonce) {
  ensure_sodium();
  Mac per_ticket = Hmac(key.links).add(id).add(secret).done();
  Mac m = Hmac(per_ticket)
              .add(role == PeerRole::Active ? "active:" : "passive")  // 7 bytes each
              .add(active_nonce)
              .add(passive_nonce)
              .done();
  sodium_memzero(per_ticket.data(), per_ticket.size());
  return m;
}

bool peer_link_verify(const PeerKey& key, PeerRole role, const PeerTicketId& id,
                      const PeerSecret& secret, const Nonce& active_nonce,
                      const Nonce& passive_nonce, const Mac& proof) {
  return same(peer_link_proof(key, role, id, secret, active_nonce, passive_nonce), proof);
}

}  // namespace rgpu::proto
