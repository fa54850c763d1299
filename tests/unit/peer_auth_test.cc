// The peer key's MACs (proto/peer_auth.h) and the checks around them (server/peer_vouch.h): a
// ticket's statement covers each of its fields; a link's proofs depend on the role, both nonces,
// the ticket and the key, and none is a token's answer even when the key file holds the token;
// the active rgpud refuses every endpoint it may not connect to, naming why; the passive one
// states where its client reached it; the default key file is made once, private.
#include "proto/peer_auth.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "server/peer_ipc.h"
#include "server/peer_vouch.h"
#include "transport/tcp/tcp.h"

using namespace rgpu::proto;
using namespace rgpu::server;

namespace {

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

PeerVoucher voucher(const PeerKey& key, const std::string& endpoint) {
  PeerVoucher v;
  for (size_t i = 0; i < v.id.size(); ++i) v.id[i] = static_cast<uint8_t>(i + 1);
  for (size_t i = 0; i < v.secret.size(); ++i) v.secret[i] = static_cast<uint8_t>(3 * i);
  v.endpoint = endpoint;
  v.machine = peer_machine_id();
  v.not_after_ms = peer_wall_ms() + 60000;
  v.mac = peer_voucher_mac(key, v);
  return v;
}

TEST(PeerAuth, AVoucherCoversEveryField) {
  const PeerKey key = derive_peer_key("cluster secret");
  EXPECT_NE(key.tickets, key.links);
  const PeerVoucher v = voucher(key, "10.0.0.2:7766");
  EXPECT_TRUE(peer_voucher_verify(key, v));
  EXPECT_FALSE(peer_voucher_verify(derive_peer_key("another secret"), v));
  auto changed = [&](auto&& change) {
    PeerVoucher w = v;
    change(w);
    return !peer_voucher_verify(key, w);
  };
  EXPECT_TRUE(changed([](PeerVoucher& w) { w.id[0] ^= 1; }));
  EXPECT_TRUE(changed([](PeerVoucher& w) { w.secret[5] ^= 1; }));
  EXPECT_TRUE(changed([](PeerVoucher& w) { w.tls_pin[9] = 1; }));
  EXPECT_TRUE(changed([](PeerVoucher& w) { w.endpoint = "10.0.0.3:7766"; }));
  EXPECT_TRUE(changed([](PeerVoucher& w) { w.machine += "x"; }));
  EXPECT_TRUE(changed([](PeerVoucher& w) { w.not_after_ms += 1; }));
  EXPECT_TRUE(changed([](PeerVoucher& w) { w.mac[31] ^= 1; }));
}

TEST(PeerAuth, LinkProofsAreBoundToRoleNoncesTicketAndKeyAndAreNoTokenAnswer) {
  const std::string secret_text = "shared by mistake with the token";
  const PeerKey key = derive_peer_key(secret_text);
  const PeerVoucher v = voucher(key, "10.0.0.2:7766");
  Nonce na{}, np{};
  na[0] = 1;
  np[0] = 2;
  const Mac active = peer_link_proof(key, PeerRole::Active, v.id, v.secret, na, np);
  const Mac passive = peer_link_proof(key, PeerRole::Passive, v.id, v.secret, na, np);
  EXPECT_NE(active, passive);
  EXPECT_TRUE(peer_link_verify(key, PeerRole::Active, v.id, v.secret, na, np, active));
  EXPECT_FALSE(peer_link_verify(key, PeerRole::Passive, v.id, v.secret, na, np, active));
  EXPECT_FALSE(peer_link_verify(key, PeerRole::Active, v.id, v.secret, np, na, active));
  PeerSecret other = v.secret;
  other[0] ^= 1;
  EXPECT_FALSE(peer_link_verify(key, PeerRole::Active, v.id, other, na, np, active));
  EXPECT_FALSE(
      peer_link_verify(derive_peer_key("x"), PeerRole::Active, v.id, v.secret, na, np, active));
  // Even with the token in the key file, no proof answers a token challenge made of a nonce.
  for (const Nonce& challenge : {na, np}) {
    EXPECT_FALSE(auth_verify(secret_text, challenge, active));
    EXPECT_FALSE(auth_verify(secret_text, challenge, passive));
  }
}

TEST(PeerAuth, TheActiveRgpudConnectsOnlyWhereItMay) {
  const PeerKey key = derive_peer_key("cluster secret");
  EXPECT_EQ(peer_check_voucher(&key, "", voucher(key, "10.0.0.2:7766")), "");
  EXPECT_EQ(peer_check_voucher(&key, "", voucher(key, "127.0.0.1:7766")), "");
  EXPECT_EQ(peer_check_voucher(&key, "", voucher(key, "[::1]:7766")), "");
  EXPECT_EQ(peer_check_voucher(&key, "", voucher(key, "[2001:db8::5]:7766")), "");
  EXPECT_TRUE(has(peer_check_voucher(nullptr, "no file", voucher(key, "10.0.0.2:7766")),
                  "no peer key (no file)"));
  PeerVoucher forged = voucher(key, "10.0.0.2:7766");
  forged.endpoint = "10.0.0.9:22";
  EXPECT_TRUE(has(peer_check_voucher(&key, "", forged), "not vouched for"));
  EXPECT_TRUE(has(peer_check_voucher(&key, "", voucher(derive_peer_key("other"), "10.0.0.2:1")),
                  "not vouched for"));
  for (const char* e : {"gpu-b:7766", "10.0.0.2", "10.0.0.2:0", ":7766"})
    EXPECT_TRUE(has(peer_check_voucher(&key, "", voucher(key, e)), "numeric")) << e;
  for (const char* e : {"0.0.0.0:7766", "255.255.255.255:7766", "224.0.0.1:7766", "[::]:7766",
                        "[ff02::1]:7766", "[fe80::1]:7766", "[::ffff:10.0.0.2]:7766"})
    EXPECT_TRUE(has(peer_check_voucher(&key, "", voucher(key, e)), "no address an rgpud")) << e;
  PeerVoucher old = voucher(key, "10.0.0.2:7766");
  old.not_after_ms = peer_wall_ms() - kPeerClockSlackMs - 1000;
  old.mac = peer_voucher_mac(key, old);
  EXPECT_TRUE(has(peer_check_voucher(&key, "", old), "expired"));
  for (const char* e : {"127.0.0.1:7766", "127.1.2.3:7766", "[::1]:7766"}) {
    PeerVoucher far = voucher(key, e);
    far.machine = "another boot id";
    far.mac = peer_voucher_mac(key, far);
    EXPECT_TRUE(has(peer_check_voucher(&key, "", far), "another machine")) << e;
  }
  PeerVoucher far = voucher(key, "10.0.0.2:7766");  // not loopback: the machine does not matter
  far.machine = "another boot id";
  far.mac = peer_voucher_mac(key, far);
  EXPECT_EQ(peer_check_voucher(&key, "", far), "");
}

TEST(PeerAuth, ThePassiveRgpudStatesWhereItsClientReachedIt) {
  auto listener = rgpu::transport::tcp_listen("127.0.0.1", 0);
  auto client = rgpu::transport::tcp_connect("127.0.0.1", listener->port(), 5);
  auto served = listener->accept();
  std::string why;
  EXPECT_EQ(peer_own_endpoint(*served, "0.0.0.0:1", why),
            "127.0.0.1:" + std::to_string(listener->port()));
  // Not TCP (shared memory): the listener's address, a wildcard as loopback.
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  auto local = rgpu::transport::tcp_adopt(sv[0], "shm");
  close(sv[1]);
  EXPECT_EQ(peer_own_endpoint(*local, "0.0.0.0:7766", why), "127.0.0.1:7766");
  EXPECT_EQ(peer_own_endpoint(*local, "[::]:7766", why), "[::1]:7766");
  EXPECT_EQ(peer_own_endpoint(*local, "10.1.2.3:7766", why), "10.1.2.3:7766");
  EXPECT_EQ(peer_own_endpoint(*local, "", why), "");
  EXPECT_FALSE(why.empty());
}

TEST(PeerAuth, TheDefaultKeyFileIsMadeOncePrivateAndAnOpenOneIsRefused) {
  char tmpl[] = "/tmp/rgpu-peer-key-XXXXXX";
  ASSERT_TRUE(mkdtemp(tmpl));
  const std::string dir = tmpl, path = dir + "/sub/rgpud/peer-key";
  std::string error;
  auto first = load_peer_key(path, true, error);
  ASSERT_TRUE(first) << error;
  EXPECT_EQ(first->size(), 64u);
  auto again = load_peer_key(path, true, error);
  ASSERT_TRUE(again) << error;
  EXPECT_EQ(*again, *first);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((dir + "/sub/rgpud").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  chmod(path.c_str(), 0644);
  EXPECT_FALSE(load_peer_key(path, false, error));
  EXPECT_TRUE(has(error, "group or others")) << error;
  EXPECT_FALSE(load_peer_key(dir + "/none", false, error));
  std::string rm = "rm -rf '" + dir + "'";
  EXPECT_EQ(system(rm.c_str()), 0);
}

}  // namespace
