// TCP specifics: a listener knows whether it is on loopback, and a failed connect names the
// address.  What every transport promises (both directions, large frames, deadlines, peer loss)
// is checked in transport_conformance_test.cc.
#include <gtest/gtest.h>

#include "transport/tcp/tcp.h"

using namespace rgpu::transport;

TEST(Tcp, ListenerOnLoopbackKnowsIt) {
  auto l = tcp_listen("127.0.0.1", 0);
  EXPECT_TRUE(l->is_loopback());
  EXPECT_GT(l->port(), 0);
  auto any = tcp_listen("0.0.0.0", 0);
  EXPECT_FALSE(any->is_loopback());
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
