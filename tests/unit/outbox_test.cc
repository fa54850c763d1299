// The session's outbox: heartbeats only while the session is busy, a bounded queue whose waiting
// producers are released when a client that stopped reading makes the send time out.
#include "server/outbox.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "transport/tcp/tcp.h"

using namespace rgpu;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Link {
  std::unique_ptr<transport::Listener> listener;
  std::unique_ptr<transport::Connection> server, client;
  Link() {
    listener = transport::tcp_listen("127.0.0.1", 0);
    std::thread t([&] { client = transport::tcp_connect("127.0.0.1", listener->port(), 5); });
    server = listener->accept();
    t.join();
  }
};

server::OutItem beat_item() {
  server::OutItem item;
  item.head = {'H', 'B'};
  return item;
}

// Bytes the client can read within `ms`.
size_t drain(transport::Connection& c, int ms) {
  size_t n = 0;
  auto t0 = Clock::now();
  while (since(t0) * 1000 < ms) {
    pollfd p{c.fd(), POLLIN, 0};
    if (poll(&p, 1, 20) == 1) {
      char buf[256];
      ssize_t got = recv(c.fd(), buf, sizeof buf, MSG_DONTWAIT);
      if (got <= 0) break;
      n += static_cast<size_t>(got);
    }
  }
  return n;
}

TEST(Outbox, HeartbeatsGoOutOnlyWhileBusy) {
  Link l;
  std::atomic<bool> busy{false};
  channel::Channel ch(*l.server);
  server::Outbox out(ch);
  out.set_heartbeat(std::chrono::milliseconds(100), [&]() -> std::optional<server::OutItem> {
    if (!busy) return std::nullopt;
    return beat_item();
  });
  out.start();
  EXPECT_EQ(drain(*l.client, 500), 0u) << "heartbeats from an idle session";
  busy = true;
  size_t bytes = drain(*l.client, 1000);
  EXPECT_GE(bytes, 2u * 5) << "too few heartbeats in 1 s at a 100 ms interval";
  EXPECT_LE(bytes, 2u * 12);
  busy = false;
  drain(*l.client, 150);
  EXPECT_EQ(drain(*l.client, 500), 0u);
  out.stop();
}

TEST(Outbox, AFullQueueHoldsProducersUntilAStalledClientTimesOut) {
  Link l;
  l.server->set_send_timeout(1);
  channel::Channel ch(*l.server);
  server::Outbox out(ch, 1 << 20);
  out.start();
  static std::vector<uint8_t> big(8 << 20, 'x');
  int released = 0;
  for (int i = 0; i < 8; ++i) {  // 64 MiB the client never reads; never waits
    server::OutItem item;
    item.head = {'B'};
    item.payload = {{big.data(), big.size()}};
    item.release = [&released] { ++released; };
    out.push(std::move(item), server::Outbox::Block::Never);
  }
  auto t0 = Clock::now();
  out.push(beat_item(), server::Outbox::Block::IfFull);  // waits for room, until the send fails
  double waited = since(t0);
  EXPECT_GE(waited, 0.3) << "a producer did not wait for a full queue";
  EXPECT_LT(waited, 4.0);
  out.stop();
  EXPECT_EQ(released, 8) << "every queued item's buffers are returned";
  // The outbox shut the connection: the client sees the end after what was sent, not a hang.
  std::vector<char> sink(1 << 20);
  ssize_t n;
  while ((n = recv(l.client->fd(), sink.data(), sink.size(), 0)) > 0) {
  }
  EXPECT_LE(n, 0);  // an end (EOF, or a reset when the kernel gave up on the unread bytes)
}

}  // namespace
