// Shared-memory specifics: wrap-around with a small ring, and the daemon-style listener handshake
// (the peer from SO_PEERCRED).  What every transport promises is checked in
// transport_conformance_test.cc; hostile segments in shm_trust_test.cc.
#include "transport/shm/shm.h"

#include <gtest/gtest.h>

#include <numeric>
#include <thread>

using namespace rgpu::transport;

TEST(Shm, LargeTransfersWrapAroundASmallRing) {
  std::unique_ptr<Connection> a, b;
  shm_pair(a, b, 4096);  // much smaller than the message: the ring wraps many times
  std::vector<uint32_t> src(1 << 20), dst(1 << 20);
  std::iota(src.begin(), src.end(), 7u);
  std::thread t([&] { a->send(src.data(), src.size() * 4); });
  b->recv(dst.data(), dst.size() * 4);
  t.join();
  EXPECT_EQ(src, dst);
}

TEST(Shm, ListenerHandshake) {
  std::string name = "rgpu-test-" + std::to_string(getpid());
  auto l = shm_listen(name);
  std::unique_ptr<Connection> server;
  std::thread t([&] { server = shm_adopt(shm_accept(*l)); });
  auto client = shm_connect(name);
  t.join();
  ASSERT_TRUE(server);
  EXPECT_NE(server->peer().find("pid " + std::to_string(getpid())), std::string::npos)
      << server->peer();  // the server knows its peer from SO_PEERCRED
  client->send("ping", 4);
  char buf[4];
  server->recv(buf, 4);
  EXPECT_EQ(std::string(buf, 4), "ping");
  EXPECT_THROW(shm_connect(name + "-nobody"), TransportError);
}
