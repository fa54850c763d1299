// The transport registry: which providers a client tries for a server (co-location, TLS, cost,
// RGPU_TRANSPORT forcing one), the messages for settings it cannot honour, and the listeners a
// daemon opens.
#include <gtest/gtest.h>

#include "transport/registry.h"
#include "transport/tcp/tcp.h"

using namespace rgpu::transport;

namespace {

std::vector<std::string> names(const std::vector<const Provider*>& v) {
  std::vector<std::string> out;
  for (const Provider* p : v) out.push_back(p->name());
  return out;
}

using V = std::vector<std::string>;

TEST(Registry, ListsTheProvidersCompiledIn) {
  const Registry& r = Registry::builtin();
  ASSERT_NE(r.find("tcp"), nullptr);
  ASSERT_NE(r.find("shm"), nullptr);
  EXPECT_EQ(r.find("carrier-pigeon"), nullptr);
  EXPECT_EQ(r.choices(), "auto, shm or tcp");
}

TEST(Registry, AutoPrefersTheCheapestProviderThatReachesTheServer) {
  const Registry& r = Registry::builtin();
  EXPECT_EQ(names(r.candidates({"127.0.0.1", 1}, "auto", false)), V({"shm", "tcp"}));
  EXPECT_EQ(names(r.candidates({"localhost", 1}, "", false)), V({"shm", "tcp"}));
  // A co-located-only provider is never tried for another machine.
  EXPECT_EQ(names(r.candidates({"10.1.2.3", 1}, "auto", false)), V({"tcp"}));
  // With TLS, auto keeps to what TLS wraps.
  EXPECT_EQ(names(r.candidates({"127.0.0.1", 1}, "auto", true)), V({"tcp"}));
}

TEST(Registry, ForcingAProviderByName) {
  const Registry& r = Registry::builtin();
  EXPECT_EQ(names(r.candidates({"127.0.0.1", 1}, "tcp", false)), V({"tcp"}));
  EXPECT_EQ(names(r.candidates({"127.0.0.1", 1}, "shm", true)), V({"shm"}));
  try {
    r.candidates({"127.0.0.1", 1}, "udp", false);
    FAIL() << "an unknown transport was accepted";
  } catch (const ConnectError& e) {
    EXPECT_TRUE(e.bad_setting);
    EXPECT_STREQ(e.what(), "RGPU_TRANSPORT=udp: use auto, shm or tcp");
  }
  try {
    r.candidates({"10.1.2.3", 1}, "shm", false);
    FAIL() << "shared memory was offered for another machine";
  } catch (const ConnectError& e) {
    EXPECT_FALSE(e.bad_setting);
    EXPECT_STREQ(e.what(), "RGPU_TRANSPORT=shm needs a server on this machine (10.1.2.3 is not)");
  }
}

TEST(Registry, ConnectFallsThroughAndNamesTheLastFailure) {
  auto l = tcp_listen("127.0.0.1", 0);
  const uint16_t port = l->port();
  l.reset();  // nobody listens on TCP, nor on the shm socket of this port
  try {
    Registry::builtin().connect({"127.0.0.1", port}, "auto", false, 2);
    FAIL() << "connected to nobody";
  } catch (const ConnectError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot reach rgpud: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos)
        << e.what();  // the last one tried was TCP
  }
  try {
    Registry::builtin().connect({"127.0.0.1", port}, "shm", false, 2);
    FAIL() << "connected to nobody";
  } catch (const ConnectError& e) {
    EXPECT_NE(std::string(e.what()).find("(RGPU_TRANSPORT=shm)"), std::string::npos) << e.what();
  }
}

TEST(Registry, TheDaemonListensOnTheNetworkFirstAndNamesTheRestAfterItsPort) {
  std::vector<std::string> warnings;
  auto ls = Registry::builtin().listen({"127.0.0.1", 0}, warnings);
  ASSERT_EQ(ls.size(), 2u) << (warnings.empty() ? "" : warnings[0]);
  EXPECT_STREQ(ls[0].provider->name(), "tcp");
  const uint16_t port = ls[0].listener->port();
  EXPECT_GT(port, 0);
  EXPECT_EQ(ls[1].listener->address(), "shm:@rgpud-" + std::to_string(port));
  // A second daemon on the same port: TCP fails, and that is fatal.
  EXPECT_THROW(Registry::builtin().listen({"127.0.0.1", port}, warnings), TransportError);
}

}  // namespace
