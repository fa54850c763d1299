// One conformance suite for every transport provider in the registry (and TLS over TCP): a pair of
// connected ends is made through the provider's own connect / listen / two-phase accept, and each
// test checks one promise of the Connection interface.  A new provider registered in
// transport/registry.cc is picked up here without a line changed.  Every wait has a limit: a hang
// is a failure, not a stuck test.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <numeric>
#include <thread>

#include "transport/memory.h"
#include "transport/registry.h"
#include "transport/tcp/net_emu.h"
#include "transport/tcp/tcp.h"
#include "transport/tls/tls.h"

using namespace rgpu::transport;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Certificates for the TLS variant, made once per process with `openssl req` (self-signed, with an
// IP SAN for 127.0.0.1).  Empty when openssl is not there.
const std::string& tls_dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/rgpu-conformance-XXXXXX";
    if (!mkdtemp(tmpl)) return std::string();
    std::string d = tmpl;
    std::string cmd =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
        "-subj /CN=rgpu-conformance -addext subjectAltName=IP:127.0.0.1 -keyout " +
        d + "/k.pem -out " + d + "/c.pem >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0 ? d : std::string();
  }();
  return dir;
}

struct Ends {
  std::unique_ptr<Connection> client, server;
  std::unique_ptr<Listener> port_holder;  // keeps the TCP port the shm socket is named after
};

// Connects through `p`: listen, connect on a thread, phase 1 (accept once the listener polls
// readable), phase 2 (finish) with a deadline.
Ends connect_through(const Provider& p) {
  Ends e;
  Endpoint ep{"127.0.0.1", 0};
  if (p.capabilities().co_located_only) {  // a port nobody else uses names the socket
    e.port_holder = tcp_listen("127.0.0.1", 0);
    ep.port = e.port_holder->port();
  }
  auto l = p.listen(ep);
  if (l->port()) ep.port = l->port();
  auto client = std::async(std::launch::async, [&] { return p.connect(ep, 5); });
  pollfd pf{l->fd(), POLLIN, 0};
  if (poll(&pf, 1, 5000) != 1) throw std::runtime_error("no connection to accept within 5 s");
  auto pending = l->accept();
  if (!pending) throw std::runtime_error("phase 1 of accepting took nothing");
  e.server = pending->finish(5);
  e.client = client.get();
  return e;
}

Ends make_ends(const std::string& name) {
  if (name == "tcp_emu") {  // TCP under RGPU_NET_EMU's delay line keeps every promise too
    std::string error;
    NetEmuScope scope(*parse_net_emu("rtt=1ms,gbps=10", error));
    return connect_through(*Registry::builtin().find("tcp"));
  }
  if (name != "tls") return connect_through(*Registry::builtin().find(name));
  Ends e = connect_through(*Registry::builtin().find("tcp"));
  const std::string d = tls_dir();
  auto sctx = TlsContext::server({d + "/c.pem", d + "/k.pem", ""});
  auto cctx = TlsContext::client({d + "/c.pem", "", ""});
  auto server =
      std::async(std::launch::async, [&] { return tls_accept(std::move(e.server), *sctx, 5); });
  e.client = tls_connect(std::move(e.client), *cctx, "127.0.0.1", 5);
  e.server = server.get();
  return e;
}

std::vector<std::string> variants() {
  std::vector<std::string> v;
  for (const auto& p : Registry::builtin().providers()) v.push_back(p->name());
  v.push_back("tls");
  v.push_back("tcp_emu");
  return v;
}

class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "tls" && tls_dir().empty())
      GTEST_SKIP() << "openssl cannot make a test certificate here";
    e_ = make_ends(GetParam());
  }
  Ends e_;
};

TEST_P(Conformance, ConnectsAndKnowsItsKind) {
  const std::string kind = GetParam() == "tcp_emu" ? "tcp" : GetParam();
  EXPECT_EQ(std::string(e_.client->kind()), kind);
  EXPECT_EQ(std::string(e_.server->kind()), kind);
  EXPECT_FALSE(e_.server->peer().empty());
  if (const Provider* p = Registry::builtin().find(GetParam())) {
    // What the provider promises, its connections do.
    Capabilities pc = p->capabilities(), cc = e_.client->capabilities();
    EXPECT_EQ(pc.passes_descriptors, cc.passes_descriptors);
    EXPECT_EQ(pc.registers_memory, cc.registers_memory);
    EXPECT_EQ(pc.remote_memory_access, cc.remote_memory_access);
    EXPECT_EQ(pc.tls_wraps, cc.tls_wraps);
    EXPECT_GT(p->cost().bandwidth_gbs, 0);
  }
}

TEST_P(Conformance, SmallScatterGatherFramesBothWays) {
  char a[] = "hello, ", b[] = "scatter", c[] = "/gather";
  iovec out[3] = {{a, 7}, {b, 7}, {c, 7}};
  for (int round = 0; round < 100; ++round) {
    e_.client->send_all(out, 3);
    char x[10] = {}, y[11] = {};
    iovec in[2] = {{x, 10}, {y, 11}};
    e_.server->recv_all(in, 2);
    ASSERT_EQ(std::string(x, 10) + std::string(y, 11), "hello, scatter/gather");
    e_.server->send(x, 4);
    char back[4];
    e_.client->recv(back, 4);
    ASSERT_EQ(std::string(back, 4), "hell");
  }
}

TEST_P(Conformance, LargeFramesBothWaysAtOnceAreByteExact) {
  // 40 MiB each way, more than a shm ring (16 MiB) or a socket buffer: sender and receiver
  // threads on both ends at the same time.
  const size_t n = 10 << 20;
  std::vector<uint32_t> up(n), down(n), got_up(n), got_down(n);
  std::iota(up.begin(), up.end(), 1u);
  std::iota(down.begin(), down.end(), 777u);
  auto t0 = Clock::now();
  auto s1 = std::async(std::launch::async, [&] { e_.client->send(up.data(), n * 4); });
  auto s2 = std::async(std::launch::async, [&] { e_.server->send(down.data(), n * 4); });
  auto r1 = std::async(std::launch::async, [&] { e_.server->recv(got_up.data(), n * 4); });
  e_.client->recv(got_down.data(), n * 4);
  s1.get();
  s2.get();
  r1.get();
  EXPECT_TRUE(up == got_up);
  EXPECT_TRUE(down == got_down);
  EXPECT_LT(since(t0), 30.0);
}

TEST_P(Conformance, AnIdlePeerIsWaitedForButAStalledMessageTimesOut) {
  e_.server->set_recv_timeout(1);
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    e_.client->send("abcd", 4);
  });
  char buf[4];
  EXPECT_TRUE(e_.server->recv_idle_or_eof(buf, 4));
  late.join();
  EXPECT_EQ(std::string(buf, 4), "abcd");
  e_.client->send("ab", 2);
  auto t0 = Clock::now();
  try {
    e_.server->recv_idle_or_eof(buf, 4);
    ADD_FAILURE() << "a stalled message was received";
  } catch (const TransportError& err) {
    EXPECT_TRUE(err.timed_out) << err.what();
  }
  EXPECT_GE(since(t0), 0.9);
  EXPECT_LT(since(t0), 3.0);
}

TEST_P(Conformance, AReceiveFromASilentPeerTimesOut) {
  e_.client->set_recv_timeout(1);
  auto t0 = Clock::now();
  char c;
  try {
    e_.client->recv(&c, 1);
    ADD_FAILURE() << "received a byte nobody sent";
  } catch (const TransportError& err) {
    EXPECT_TRUE(err.timed_out) << err.what();
  }
  EXPECT_LT(since(t0), 3.0);
}

TEST_P(Conformance, ASendToAPeerThatStoppedReadingTimesOut) {
  e_.client->set_send_timeout(1);
  std::vector<char> big(64 << 20, 'x');
  auto t0 = Clock::now();
  try {
    e_.client->send(big.data(), big.size());
    ADD_FAILURE() << "64 MiB went to a peer that reads nothing";
  } catch (const TransportError& err) {
    EXPECT_TRUE(err.timed_out) << err.what();
  }
  EXPECT_LT(since(t0), 4.0);
}

TEST_P(Conformance, ACleanCloseIsEofAndACloseMidMessageIsAnError) {
  e_.client.reset();
  char buf[4];
  EXPECT_FALSE(e_.server->recv_or_eof(buf, 4));
  Ends f = make_ends(GetParam());
  f.client->send("ab", 2);
  f.client.reset();
  try {
    f.server->recv(buf, 4);
    ADD_FAILURE() << "a half message was received";
  } catch (const TransportError& err) {
    EXPECT_TRUE(err.closed) << err.what();
  }
}

TEST_P(Conformance, APeerGoneMidTransferIsAnErrorNotAHang) {
  std::vector<char> buf(32 << 20);
  auto receiver = std::async(std::launch::async, [&] {
    try {
      e_.server->recv(buf.data(), buf.size());
      return std::string("received everything");
    } catch (const TransportError& err) {
      return std::string(err.what());
    }
  });
  e_.client->send(buf.data(), 1 << 20);  // part of it, then the peer is gone
  e_.client.reset();
  ASSERT_EQ(receiver.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_NE(receiver.get(), "received everything");
  // And a sender whose receiver went away fails instead of blocking or signalling.
  Ends f = make_ends(GetParam());
  f.server.reset();
  auto sender = std::async(std::launch::async, [&] {
    std::vector<char> big(16 << 20);
    try {
      for (int i = 0; i < 8; ++i) f.client->send(big.data(), big.size());
      return false;
    } catch (const TransportError&) {
      return true;
    }
  });
  ASSERT_EQ(sender.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(sender.get());
}

TEST_P(Conformance, ShutdownWakesABlockedReceiver) {
  auto receiver = std::async(std::launch::async, [&] {
    char c;
    try {
      return e_.server->recv_idle_or_eof(&c, 1) ? "a byte" : "eof";
    } catch (const TransportError&) {
      return "error";
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  e_.server->shutdown();
  ASSERT_EQ(receiver.wait_for(std::chrono::seconds(3)), std::future_status::ready);
  EXPECT_STRNE(receiver.get(), "a byte");
}

TEST_P(Conformance, MemoryRegistrationWorksWhereClaimedAndIsRefusedClearlyElsewhere) {
  MemoryRegion r = allocate_region("rgpu-conformance", 1 << 20);
  std::memset(r.base, 0x5a, r.size);
  if (!e_.client->capabilities().registers_memory) {
    try {
      e_.client->register_memory(r);
      ADD_FAILURE() << GetParam() << " registered memory it says it cannot";
    } catch (const TransportError& err) {
      EXPECT_NE(std::string(err.what()).find("cannot register memory"), std::string::npos)
          << err.what();
    }
    EXPECT_THROW(e_.server->map_remote(1, r.size), TransportError);
    free_region(r);
    return;
  }
  uint64_t key = e_.client->register_memory(r);
  RemoteMapping m = e_.server->map_remote(key, r.size);
  ASSERT_EQ(m.size, r.size);
  EXPECT_EQ(static_cast<unsigned char>(m.base[12345]), 0x5a);  // the same memory, both ways
  m.base[7] = 1;
  EXPECT_EQ(static_cast<char*>(r.base)[7], 1);
  e_.server->unmap_remote(m);
  e_.client->unregister_memory(key);
  // A second registration gets another key; one of the wrong size is refused, naming why.
  uint64_t key2 = e_.client->register_memory(r);
  EXPECT_NE(key2, key);
  try {
    e_.server->map_remote(key2, r.size / 2);
    ADD_FAILURE() << "a segment of the wrong size was mapped";
  } catch (const TransportError& err) {
    EXPECT_NE(std::string(err.what()).find("bytes, not the"), std::string::npos) << err.what();
  }
  // An address without a descriptor cannot be shared memory.
  std::vector<char> plain(4096);
  EXPECT_THROW(e_.client->register_memory({-1, plain.data(), plain.size()}), TransportError);
  free_region(r);
}

TEST_P(Conformance, DescriptorsPassWhereClaimed) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  if (!e_.client->capabilities().passes_descriptors) {
    EXPECT_THROW(e_.client->send_fd(p[0]), TransportError);
  } else {
    e_.client->send_fd(p[1]);
    int got = e_.server->recv_fd();
    ASSERT_GE(got, 0);
    ASSERT_EQ(write(got, "fd", 2), 2);  // the server's copy writes into our pipe
    char buf[2];
    ASSERT_EQ(read(p[0], buf, 2), 2);
    EXPECT_EQ(std::string(buf, 2), "fd");
    close(got);
  }
  close(p[0]);
  close(p[1]);
}

INSTANTIATE_TEST_SUITE_P(Providers, Conformance, ::testing::ValuesIn(variants()),
                         [](const auto& info) { return info.param; });

// Peer links between rgpuds: the client trusts no CA, only the certificate it was told of (a
// fingerprint learnt over an authenticated link); any other certificate fails the handshake.
TEST(TlsPinned, OnlyThePinnedCertificateIsAccepted) {
  if (tls_dir().empty()) GTEST_SKIP() << "openssl cannot make a test certificate here";
  const std::string d = tls_dir();
  auto sctx = TlsContext::server({d + "/c.pem", d + "/k.pem", ""});
  auto pinned = TlsContext::pinned_client();
  const CertFingerprint pin = sctx->fingerprint();
  EXPECT_NE(pin, CertFingerprint{});
  for (bool right : {true, false}) {
    Ends e = connect_through(*Registry::builtin().find("tcp"));
    auto server = std::async(std::launch::async, [&] {
      try {
        return tls_accept(std::move(e.server), *sctx, 5);
      } catch (const std::exception&) {
        return std::unique_ptr<Connection>();
      }
    });
    CertFingerprint p = pin;
    if (!right) p[7] ^= 1;
    if (right) {
      auto c = tls_connect_pinned(std::move(e.client), *pinned, p, 5);
      auto srv = server.get();
      ASSERT_TRUE(srv);
      const char msg[] = "pinned";
      iovec v{const_cast<char*>(msg), sizeof msg};
      c->send_all(&v, 1);
      char got[sizeof msg] = {};
      iovec g{got, sizeof got};
      srv->recv_all(&g, 1);
      EXPECT_STREQ(got, msg);
    } else {
      try {
        tls_connect_pinned(std::move(e.client), *pinned, p, 5);
        ADD_FAILURE() << "a certificate other than the pinned one was accepted";
      } catch (const TlsError& err) {
        EXPECT_EQ(err.kind, TlsError::Kind::ServerUnverified);
        EXPECT_NE(std::string(err.what()).find("not the one"), std::string::npos) << err.what();
      }
      server.wait();
    }
  }
}

}  // namespace
