// Shared-memory transport: rings in both directions, wrap-around with a small ring, scatter/gather,
// a vanished peer, and the daemon-style listener handshake.
#include "transport/shm/shm.h"

#include <gtest/gtest.h>

#include <numeric>
#include <thread>

using namespace rgpu::transport;

TEST(Shm, ScatterGatherBothWays) {
  std::unique_ptr<Connection> a, b;
  shm_pair(a, b, 1 << 16);
  EXPECT_STREQ(a->kind(), "shm");
  char x[] = "hello, ", y[] = "shared ", z[] = "memory";
  iovec out[3] = {{x, 7}, {y, 7}, {z, 6}};
  a->send_all(out, 3);
  char p[5] = {}, q[15] = {};
  iovec in[2] = {{p, 5}, {q, 15}};
  b->recv_all(in, 2);
  EXPECT_EQ(std::string(p, 5) + std::string(q, 15), "hello, shared memory");
  b->send("back", 4);
  char r[4];
  a->recv(r, 4);
  EXPECT_EQ(std::string(r, 4), "back");
}

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

TEST(Shm, AVanishedPeerIsSeen) {
  std::unique_ptr<Connection> a, b;
  shm_pair(a, b, 1 << 16);
  a.reset();  // closes its socket and marks the rings closed
  char c;
  EXPECT_FALSE(b->recv_or_eof(&c, 1));
  std::unique_ptr<Connection> x, y;
  shm_pair(x, y, 1 << 16);
  x->send("ab", 2);
  x.reset();
  char buf[4];
  EXPECT_THROW(y->recv(buf, 4), TransportError);  // closed in the middle of a message
}

TEST(Shm, ReceiveTimeout) {
  std::unique_ptr<Connection> a, b;
  shm_pair(a, b, 1 << 16);
  b->set_recv_timeout(1);
  char c;
  EXPECT_THROW(b->recv(&c, 1), TransportError);
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
