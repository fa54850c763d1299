// Transport deadlines, over TCP and shared memory: the wait for the next message has no limit
// (recv_idle_or_eof), a message that has begun must finish within the receive timeout, a send to a
// peer that stopped reading fails within the send timeout, and a connect to a server that never
// answers gives up in time.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "transport/shm/shm.h"
#include "transport/tcp/tcp.h"

using namespace rgpu::transport;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Ends {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Connection> a, b;
};

Ends make(const std::string& kind) {
  Ends e;
  if (kind == "shm") {
    shm_pair(e.a, e.b, 1 << 16);
  } else {
    e.listener = tcp_listen("127.0.0.1", 0);
    std::thread t([&] { e.a = tcp_connect("127.0.0.1", e.listener->port(), 5); });
    e.b = e.listener->accept();
    t.join();
  }
  return e;
}

class Deadlines : public ::testing::TestWithParam<const char*> {};

TEST_P(Deadlines, AnIdlePeerIsWaitedForButAStalledMessageFails) {
  Ends e = make(GetParam());
  e.b->set_recv_timeout(1);
  // Idle for longer than the timeout, then a message: it is received.
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    e.a->send("abcd", 4);
  });
  char buf[4];
  EXPECT_TRUE(e.b->recv_idle_or_eof(buf, 4));
  late.join();
  EXPECT_EQ(std::string(buf, 4), "abcd");
  // A message that begins and stops: the rest must come within the timeout.
  e.a->send("ab", 2);
  auto t0 = Clock::now();
  try {
    e.b->recv_idle_or_eof(buf, 4);
    ADD_FAILURE() << "a stalled message was received";
  } catch (const TransportError& err) {
    EXPECT_TRUE(err.timed_out) << err.what();
    EXPECT_NE(std::string(err.what()).find("for 1 s"), std::string::npos) << err.what();
  }
  EXPECT_GE(since(t0), 0.9);
  EXPECT_LT(since(t0), 3.0);
}

TEST_P(Deadlines, ASendToAPeerThatStoppedReadingFails) {
  Ends e = make(GetParam());
  e.a->set_send_timeout(1);
  std::vector<char> big(64 << 20, 'x');  // more than any socket buffer or ring holds
  auto t0 = Clock::now();
  try {
    e.a->send(big.data(), big.size());
    ADD_FAILURE() << "64 MiB went to a peer that reads nothing";
  } catch (const TransportError& err) {
    EXPECT_TRUE(err.timed_out) << err.what();
  }
  EXPECT_LT(since(t0), 4.0);
}

INSTANTIATE_TEST_SUITE_P(Transports, Deadlines, ::testing::Values("tcp", "shm"));

TEST(Deadlines, ConnectingToAServerThatNeverAcceptsTheSegmentGivesUp) {
  // Shared memory: the listener takes the connection but never acknowledges the segment.
  std::string name = "rgpu-test-silent-" + std::to_string(getpid());
  auto l = shm_listen(name);
  auto t0 = Clock::now();
  try {
    shm_connect(name, 1);
    ADD_FAILURE() << "connected to a server that never answered";
  } catch (const TransportError& err) {
    EXPECT_NE(std::string(err.what()).find("within 1 s"), std::string::npos) << err.what();
  }
  EXPECT_LT(since(t0), 3.0);
}

}  // namespace
