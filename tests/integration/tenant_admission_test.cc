// Hostile tenants before authentication: connections that squat the handshake budget from one
// address or several, and a daemon told to listen beyond loopback without authentication.  Each
// case fails without its fix: the squatters kept every client out (issue 36, item 1), and the
// refusal to listen unauthenticated came only after the socket was bound (item 8).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/integration/harness.h"

using namespace rgpu;
using namespace rgpu::test;
using Clock = std::chrono::steady_clock;

namespace {

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// A TCP connection to 127.0.0.1:port from the loopback address `from` (127.0.0.0/8 is all this
// machine's): how a test plays a client at another address.  -1 when it could not connect.
int connect_from(const char* from, uint16_t port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in src{};
  src.sin_family = AF_INET;
  inet_pton(AF_INET, from, &src.sin_addr);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(port);
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(s, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0 ||
      connect(s, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) {
    close(s);
    return -1;
  }
  return s;
}

bool is_open(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 0;
}

// Keeps `per_address` silent connections open from each address, reopening each one the daemon
// closes, until stopped: the attack of issue 36 item 1 (32 silent sockets, reopened when the 5 s
// deadline closes them, kept every client out).
class Squatters {
 public:
  Squatters(uint16_t port, std::vector<std::string> addresses, int per_address)
      : port_(port), addresses_(std::move(addresses)), per_(per_address) {
    thread_ = std::thread([this] { loop(); });
  }
  ~Squatters() {
    stop_ = true;
    thread_.join();
    for (int s : socks_)
      if (s >= 0) close(s);
  }
  // Connections (re)opened so far.
  long opened() const { return opened_; }
  // Whether every slot has been filled at least once.
  bool filled() const { return filled_; }

 private:
  void loop() {
    socks_.assign(addresses_.size() * per_, -1);
    for (int round = 0; !stop_ && round < 200000; ++round) {
      for (size_t i = 0; i < socks_.size() && !stop_; ++i) {
        if (socks_[i] >= 0 && is_open(socks_[i])) continue;
        if (socks_[i] >= 0) close(socks_[i]);
        socks_[i] = connect_from(addresses_[i / per_].c_str(), port_);
        if (socks_[i] >= 0) ++opened_;
      }
      filled_ = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  uint16_t port_;
  std::vector<std::string> addresses_;
  size_t per_;
  std::vector<int> socks_;
  std::atomic<bool> stop_{false}, filled_{false};
  std::atomic<long> opened_{0};
  std::thread thread_;
};

Env over(const Daemon& d, const char* transport) {
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = transport;
  env["RGPU_TIMEOUT"] = "10";
  return env;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

// 64 silent connections from one address, reopened as soon as they close: clients from another
// address over TCP and this machine's clients over shared memory are all served.
TEST(TenantAdmission, HandshakeSquattingFromOneAddressKeepsNoOneOut) {
  const std::string log = testing::TempDir() + "/squat_one.log";
  Daemon d({"--handshake-timeout", "5"}, {{"RGPU_LOG", "notice"}}, log);
  Squatters squat(d.port(), {"127.0.0.2"}, 64);
  while (!squat.filled()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  for (int i = 0; i < 2; ++i) {
    for (const char* t : {"tcp", "shm"}) {
      Result r = run({cuda_program("memcpy_roundtrip")}, over(d, t), 60);
      EXPECT_EQ(r.status, 0) << t << " run " << i << ": " << r.out << r.err;
    }
  }
  EXPECT_GT(squat.opened(), 64);  // the daemon closed the squatter's excess, which reopened it
  EXPECT_TRUE(d.alive());
  EXPECT_TRUE(contains(read_file(log), "--max-handshakes-per-user")) << read_file(log);
}

// Squatters from eight addresses fill the whole network budget (8 x 8 = 64 > 32): a client from a
// ninth address still gets in, because the source holding the most gives up a handshake to it.
TEST(TenantAdmission, SquattingFromSeveralAddressesYieldsToANewcomer) {
  const std::string log = testing::TempDir() + "/squat_many.log";
  Daemon d({"--handshake-timeout", "5"}, {{"RGPU_LOG", "notice"}}, log);
  std::vector<std::string> addresses;
  for (int i = 2; i < 10; ++i) addresses.push_back("127.0.0." + std::to_string(i));
  Squatters squat(d.port(), addresses, 8);
  while (!squat.filled()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  for (int i = 0; i < 2; ++i) {
    for (const char* t : {"tcp", "shm"}) {
      Result r = run({cuda_program("memcpy_roundtrip")}, over(d, t), 60);
      EXPECT_EQ(r.status, 0) << t << " run " << i << ": " << r.out << r.err;
    }
  }
  EXPECT_TRUE(d.alive());
  EXPECT_TRUE(contains(read_file(log), "to make room for address 127.0.0.1")) << read_file(log);
}

// One address holds at most --max-handshakes-per-user connections in their handshake; the rest are
// closed at once, not at the deadline.
TEST(TenantAdmission, OneAddressHoldsAtMostItsShareOfHandshakes) {
  Daemon d({"--handshake-timeout", "30", "--max-handshakes-per-user", "4"});
  std::vector<int> socks;
  for (int i = 0; i < 12; ++i) socks.push_back(connect_from("127.0.0.3", d.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  size_t open = 0;
  for (int s : socks) open += s >= 0 && is_open(s);
  EXPECT_EQ(open, 4u);
  // Another address has its own share.
  int other = connect_from("127.0.0.4", d.port());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(other >= 0 && is_open(other));
  for (int s : socks)
    if (s >= 0) close(s);
  if (other >= 0) close(other);
  EXPECT_EQ(run({cuda_program("memcpy_roundtrip")}, d.client_env()).status, 0);
}

// `--listen 0.0.0.0` without a token is refused before anything is bound: with the port already
// taken by someone else, rgpud still answers with the refusal (exit 2), not "address in use", and
// writes no port file.
TEST(TenantAdmission, ListeningBeyondLoopbackUnauthenticatedIsRefusedBeforeBinding) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(s, 1), 0);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string port = std::to_string(ntohs(a.sin_port));
  const std::string port_file = testing::TempDir() + "/unauth.port";
  unlink(port_file.c_str());
  Result r = run(
      {RGPUD_PATH, "--backend", "host", "--listen", "0.0.0.0:" + port, "--port-file", port_file},
      {}, 30);
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "refusing to listen on 0.0.0.0:" + port)) << r.err;
  EXPECT_FALSE(contains(r.err, "in use")) << r.err;
  EXPECT_NE(access(port_file.c_str(), F_OK), 0);
  close(s);
}
