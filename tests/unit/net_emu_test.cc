// RGPU_NET_EMU (transport/tcp/net_emu.h): the grammar, and the delay line on a loopback TCP pair:
// a round trip costs the emulated rtt, a stream of back-to-back sends reaches the emulated rate
// whatever the rtt (latency is not paid per send), and a connection ended with bytes still in the
// line ends both sides at once.  Every wait has a limit: a hang is a failure.
#include "transport/tcp/net_emu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "transport/tcp/tcp.h"

using namespace rgpu::transport;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

NetEmu spec(const std::string& s) {
  std::string error;
  auto e = parse_net_emu(s, error);
  if (!e) throw std::runtime_error(error);
  return *e;
}

struct Pair {
  std::unique_ptr<Connection> a, b;  // a connected, b accepted
};

// Whether `f` is ready within `d`; if not, both ends are shut down first, so that the thread
// behind `f` (blocked in a receive) ends and the test fails instead of hanging in its destructor.
template <class F, class D>
bool ready_or_shut(F& f, D d, Pair& p) {
  if (f.wait_for(d) == std::future_status::ready) return true;
  p.a->shutdown();
  p.b->shutdown();
  return false;
}

// A loopback pair, both ends emulated as `emu` says.
Pair emulated_pair(const NetEmu& emu) {
  NetEmuScope scope(emu);
  auto l = tcp_listen("127.0.0.1", 0);
  Pair p;
  auto accepted = std::async(std::launch::async, [&] { return l->accept(); });
  p.a = tcp_connect("127.0.0.1", l->port(), 5);
  if (accepted.wait_for(std::chrono::seconds(5)) != std::future_status::ready)
    throw std::runtime_error("nothing accepted within 5 s");
  p.b = accepted.get();
  return p;
}

std::string parse_error(const std::string& s) {
  std::string error;
  return parse_net_emu(s, error) ? "(accepted)" : error;
}

}  // namespace

TEST(NetEmuParse, GoodSpecs) {
  EXPECT_FALSE(spec("").on());
  EXPECT_FALSE(spec("  ").on());
  NetEmu e = spec("rtt=25us,gbps=100");
  EXPECT_EQ(e.rtt_ns, 25'000u);
  EXPECT_DOUBLE_EQ(e.gbps, 100);
  EXPECT_EQ(e.spec(), "rtt=25us,gbps=100");
  EXPECT_EQ(spec("gbps=8").rtt_ns, 0u);
  EXPECT_EQ(spec("gbps=8").spec(), "gbps=8");
  EXPECT_EQ(spec("rtt=2ms").spec(), "rtt=2ms");
  EXPECT_DOUBLE_EQ(spec("rtt=2ms").gbps, 0);
  EXPECT_EQ(spec(" gbps = 0.5 , rtt = 700ns ").rtt_ns, 700u);
  EXPECT_EQ(spec("rtt=1.5ms").rtt_ns, 1'500'000u);
  EXPECT_EQ(spec("rtt=1.5ms").spec(), "rtt=1500us");
  EXPECT_EQ(spec(spec("rtt=25us,gbps=12.5").spec()).spec(), "rtt=25us,gbps=12.5");  // round trip
  EXPECT_FALSE(spec("rtt=0us").on());
}

TEST(NetEmuParse, BadSpecsNameTheBadPart) {
  for (const char* bad : {"rtt=25", "rtt=25xs", "rtt=ms", "rtt=-1ms", "rtt=20000ms", "gbps=0",
                          "gbps=-1", "gbps=fast", "gbps=10g", "latency=1ms", "rtt", "rtt=1ms,",
                          ",gbps=1", "rtt=1ms,,gbps=1", "rtt=1ms,rtt=2ms", "gbps=1,gbps=2"}) {
    std::string error = parse_error(bad);
    EXPECT_NE(error, "(accepted)") << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
  EXPECT_NE(parse_error("rtt=1ms,latency=3us").find("\"latency=3us\""), std::string::npos);
  EXPECT_NE(parse_error("rtt=25xs").find("\"rtt=25xs\""), std::string::npos);
  EXPECT_NE(parse_error("gbps=0").find("\"gbps=0\""), std::string::npos);
  EXPECT_NE(parse_error("rtt=1ms,").find("empty"), std::string::npos);
}

TEST(NetEmuParse, TheHelloTagAnnouncesTheSpec) {
  EXPECT_EQ(net_emu_announced("rgpud 0.1.0 on h [net-emu rtt=25us,gbps=100]"),
            std::optional<std::string>("rtt=25us,gbps=100"));
  EXPECT_FALSE(net_emu_announced("rgpud 0.1.0 on h"));
  EXPECT_EQ(net_emu_tag(), "");  // this test process has no RGPU_NET_EMU
}

TEST(NetEmuLink, PingPongTakesTheEmulatedRoundTrip) {
  Pair p = emulated_pair(spec("rtt=2ms"));
  auto echo = std::async(std::launch::async, [&] {
    char b[8];
    for (int i = 0; i < 20; ++i) {
      p.b->recv(b, 8);
      p.b->send(b, 8);
    }
  });
  std::vector<double> ms;
  char b[8] = {};
  for (int i = 0; i < 20; ++i) {
    auto t0 = Clock::now();
    p.a->send(b, 8);
    p.a->recv(b, 8);
    ms.push_back(ms_since(t0));
  }
  ASSERT_TRUE(ready_or_shut(echo, std::chrono::seconds(5), p));
  std::sort(ms.begin(), ms.end());
  printf("  emulated rtt=2ms: round trip min %.3f ms, median %.3f ms, max %.3f ms\n", ms.front(),
         ms[ms.size() / 2], ms.back());
  EXPECT_GE(ms.front(), 2.0);               // never earlier than the emulated latency
  EXPECT_LT(ms[ms.size() / 2], 2.0 + 1.5);  // generous: a busy 2-core machine
}

TEST(NetEmuLink, BackToBackSendsReachTheRateWhateverTheRtt) {
  // 2 Gb/s is 250 MB/s: 16 MiB in 67 ms, plus 5 ms of latency once.  A line that paid the latency
  // per 1 MiB send (4.2 ms + 5 ms) would give 114 MB/s, under the bound.  A modest rate: this
  // machine's plain loopback stream, shared with builds, ran at 0.4 to 2 GB/s.
  Pair p = emulated_pair(spec("rtt=10ms,gbps=2"));
  constexpr size_t kChunk = 1 << 20, kChunks = 16;
  constexpr double kRate = 2e9 / 8;
  std::vector<char> src(kChunk, 'x'), dst(kChunk * kChunks);
  auto t0 = Clock::now();
  auto sink = std::async(std::launch::async, [&] { p.b->recv(dst.data(), dst.size()); });
  for (size_t i = 0; i < kChunks; ++i) p.a->send(src.data(), src.size());
  ASSERT_TRUE(ready_or_shut(sink, std::chrono::seconds(5), p));
  sink.get();
  const double rate = static_cast<double>(dst.size()) / (ms_since(t0) / 1e3);
  printf("  emulated rtt=10ms,gbps=2: 16 x 1 MiB back to back at %.1f MB/s (%.2f of 250)\n",
         rate / 1e6, rate / kRate);
  EXPECT_GT(rate, 0.6 * kRate);
  EXPECT_LT(rate, 1.1 * kRate);  // and never faster than the emulated rate
  EXPECT_EQ(dst.back(), 'x');
}

TEST(NetEmuLink, ShutdownWithBytesInTheLineEndsBothSidesAtOnce) {
  Pair p = emulated_pair(spec("rtt=2000ms"));  // what is sent arrives after 1 s
  auto peer_reader = std::async(std::launch::async, [&] {
    char b[8];
    try {
      return p.b->recv_or_eof(b, 8) ? std::string("received") : std::string("eof");
    } catch (const TransportError& e) {
      return std::string("error");
    }
  });
  auto own_reader = std::async(std::launch::async, [&] {
    char b[8];
    try {
      return p.a->recv_or_eof(b, 8) ? std::string("received") : std::string("eof");
    } catch (const TransportError& e) {
      return std::string("error");
    }
  });
  p.a->send("in line", 8);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto t0 = Clock::now();
  p.a->shutdown();
  ASSERT_TRUE(ready_or_shut(peer_reader, std::chrono::milliseconds(500), p));
  ASSERT_TRUE(ready_or_shut(own_reader, std::chrono::milliseconds(500), p));
  EXPECT_LT(ms_since(t0), 500);
  EXPECT_NE(peer_reader.get(), "received");  // dropped with the line, not delivered late
  EXPECT_NE(own_reader.get(), "received");
  EXPECT_THROW(p.a->send("more", 4), TransportError);
  t0 = Clock::now();
  p.a.reset();  // nothing left to deliver: no wait
  EXPECT_LT(ms_since(t0), 500);
}

TEST(NetEmuLink, ClosingDeliversTheLineThenEnds) {
  Pair p = emulated_pair(spec("rtt=400ms"));
  auto t0 = Clock::now();
  p.a->send("bye", 4);
  p.a.reset();  // a last message still arrives, as over a real network
  char b[4];
  ASSERT_TRUE(p.b->recv_or_eof(b, 4));
  EXPECT_STREQ(b, "bye");
  EXPECT_FALSE(p.b->recv_or_eof(b, 4));
  EXPECT_GE(ms_since(t0), 200);
  EXPECT_LT(ms_since(t0), 1500);
}

TEST(NetEmuLink, AnInactiveEndSendsPlainUntilActivated) {
  auto l = tcp_listen("127.0.0.1", 0);
  auto accepted = std::async(std::launch::async, [&] { return l->accept(); });
  auto a = net_emulate(tcp_connect("127.0.0.1", l->port(), 5), spec("rtt=100ms"), false);
  auto b = accepted.get();
  char c[2];
  auto t0 = Clock::now();
  a->send("1", 2);
  b->recv(c, 2);
  EXPECT_LT(ms_since(t0), 40);
  EXPECT_TRUE(net_emu_activate(*a));
  EXPECT_FALSE(net_emu_activate(*b));  // not an emulated connection
  t0 = Clock::now();
  a->send("2", 2);
  b->recv(c, 2);
  EXPECT_GE(ms_since(t0), 50);
  EXPECT_STREQ(c, "2");
}
