// TCP transport: connect/accept, scatter/gather both ways, large transfers, peer loss.
#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "transport/tcp/tcp.h"

using namespace rgpu::transport;

namespace {

struct Pair {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Connection> client, server;
};

Pair make_pair() {
  Pair p;
  p.listener = tcp_listen("127.0.0.1", 0);
  std::thread t([&] { p.client = tcp_connect("127.0.0.1", p.listener->port()); });
  p.server = p.listener->accept();
  t.join();
  return p;
}

}  // namespace

TEST(Tcp, ListenerOnLoopbackKnowsIt) {
  auto l = tcp_listen("127.0.0.1", 0);
  EXPECT_TRUE(l->is_loopback());
  EXPECT_GT(l->port(), 0);
  auto any = tcp_listen("0.0.0.0", 0);
  EXPECT_FALSE(any->is_loopback());
}

TEST(Tcp, ScatterGatherBothWays) {
  Pair p = make_pair();
  char a[] = "hello, ", b[] = "scatter", c[] = "/gather";
  iovec out[3] = {{a, 7}, {b, 7}, {c, 7}};
  p.client->send_all(out, 3);
  char x[10] = {}, y[11] = {};
  iovec in[2] = {{x, 10}, {y, 11}};
  p.server->recv_all(in, 2);
  EXPECT_EQ(std::string(x, 10) + std::string(y, 11), "hello, scatter/gather");
}

TEST(Tcp, LargeTransferIsByteExact) {
  Pair p = make_pair();
  std::vector<uint32_t> src(8 << 20), dst(8 << 20);  // 32 MiB
  std::iota(src.begin(), src.end(), 12345u);
  std::thread t([&] { p.client->send(src.data(), src.size() * 4); });
  p.server->recv(dst.data(), dst.size() * 4);
  t.join();
  EXPECT_EQ(src, dst);
}

TEST(Tcp, PeerCloseIsSeen) {
  Pair p = make_pair();
  p.client.reset();
  char buf[4];
  EXPECT_FALSE(p.server->recv_or_eof(buf, 4));  // clean end before a message
  Pair q = make_pair();
  q.client->send("ab", 2);
  q.client.reset();
  try {
    q.server->recv(buf, 4);
    FAIL() << "expected an error";
  } catch (const TransportError& e) {
    EXPECT_TRUE(e.closed);
  }
  Pair r = make_pair();
  r.client->send("ab", 2);
  r.client.reset();
  EXPECT_THROW(r.server->recv_or_eof(buf, 4), TransportError);  // closed mid-message
}

TEST(Tcp, ConnectErrorNamesTheAddress) {
  auto l = tcp_listen("127.0.0.1", 0);
  uint16_t port = l->port();
  l.reset();
  try {
    tcp_connect("127.0.0.1", port);
    FAIL() << "expected an error";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos);
  }
}

TEST(Tcp, SendToAVanishedPeerThrowsInsteadOfSignalling) {
  Pair p = make_pair();
  p.server.reset();
  std::vector<char> big(16 << 20);
  EXPECT_THROW(
      {
        for (int i = 0; i < 8; ++i) p.client->send(big.data(), big.size());
      },
      TransportError);
}
