// rgpud trusts nobody: malformed shared-memory clients, trickling handshakes, per-client limits,
// and shutdown with a stopped session — each under a time limit, each followed by a client that
// must still be served correctly.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "tests/integration/harness.h"
#include "transport/shm/segment.h"
#include "transport/shm/shm.h"

using namespace rgpu;
using namespace rgpu::test;
using Clock = std::chrono::steady_clock;

namespace {

uint64_t free_bytes(const Env& env, uint64_t* total = nullptr) {
  Result r = run({cuda_program("mem_info")}, env);
  EXPECT_EQ(r.status, 0) << r.err;
  unsigned long long f = 0, t = 0;
  EXPECT_EQ(sscanf(r.out.c_str(), "free %llu total %llu", &f, &t), 2) << r.out;
  if (total) *total = t;
  return f;
}

// Free memory once the sessions of clients that just exited have given theirs back.
uint64_t settled_free_bytes(const Env& env, uint64_t& total) {
  uint64_t f = free_bytes(env, &total);
  for (int i = 0; i < 40 && f != total; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    f = free_bytes(env, &total);
  }
  return f;
}

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// True when the peer closed `fd` (EOF or reset) within `ms`.
bool closed_within(int fd, int ms) {
  auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (poll(&p, 1, std::max(0, left)) > 0) {
      char c;
      ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
      if (n <= 0 && !(n < 0 && errno == EAGAIN)) return true;
    }
    if (Clock::now() >= deadline) return false;
  }
}

bool is_open(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 0;
}

int tcp_connect(uint16_t port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
  return s;
}

// A shared-memory client made by hand: connects to rgpud's abstract socket and hands over a
// segment of its choosing.
int shm_raw_connect(uint16_t port, int seg_fd) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  std::string name = transport::shm_socket_name(port);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path + 1, name.data(), name.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  EXPECT_EQ(connect(s, reinterpret_cast<sockaddr*>(&a), len), 0) << strerror(errno);
  EXPECT_NO_THROW(rgpu::transport::shm_send_fd(s, seg_fd));
  return s;
}

}  // namespace

TEST(Hardening, MalformedShmClientsAreRefusedAndTheNextClientSeesAllMemory) {
  Daemon d({"--host-capacity", "1GiB"});
  Env shm = d.client_env();
  shm["RGPU_TRANSPORT"] = "shm";
  uint64_t total = 0;
  EXPECT_EQ(free_bytes(shm, &total), total);
  const size_t size = transport::shm_segment_size(1 << 16);

  {  // Not sealed: the client could truncate it under the session's mapping later.
    int fd = memfd_create("t", MFD_CLOEXEC);
    ASSERT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    auto* seg = static_cast<transport::ShmSegment*>(
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    seg->magic = transport::kShmMagic;
    seg->ring_bytes = 1 << 16;
    int s = shm_raw_connect(d.port(), fd);
    EXPECT_TRUE(closed_within(s, 3000));
    close(s);
    munmap(seg, size);
    close(fd);
  }
  {  // Sealed and adopted, then garbage ring indices while the session waits for Hello.
    std::string why;
    int fd = transport::shm_create_sealed("t", size, why);
    ASSERT_GE(fd, 0) << why;
    auto* seg = static_cast<transport::ShmSegment*>(
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    seg->magic = transport::kShmMagic;
    seg->ring_bytes = 1 << 16;
    int s = shm_raw_connect(d.port(), fd);
    char ack = 0;
    ASSERT_EQ(recv(s, &ack, 1, 0), 1);
    EXPECT_EQ(ack, 'K');
    seg->rings[0].head.store(uint64_t{1} << 62);
    seg->rings[0].data_seq.fetch_add(1);
    EXPECT_TRUE(closed_within(s, 3000));
    close(s);
    munmap(seg, size);
    close(fd);
  }
  EXPECT_TRUE(d.alive());
  // A legitimate client holds memory, is killed; every later client sees the whole capacity.
  Child holder = spawn({cuda_program("hold_memory"), "256"}, shm);
  ASSERT_TRUE(holder.wait_line("holding", 60));
  EXPECT_EQ(free_bytes(shm), total - (256u << 20));
  holder.kill_and_wait(SIGKILL);
  uint64_t f = 0;
  for (int i = 0; i < 40 && (f = free_bytes(shm)) != total; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(f, total);
  Result r = run({cuda_program("memcpy_roundtrip")}, shm);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
}

TEST(Hardening, TricklingHandshakesSpendNothingAndEndAtTheDeadline) {
  Daemon d({"--host-capacity", "1GiB", "--handshake-timeout", "4", "--max-handshakes", "300",
            "--max-handshakes-per-user", "0"});  // all from one address
  std::vector<int> socks;
  for (int i = 0; i < 200; ++i) {
    socks.push_back(tcp_connect(d.port()));
    ASSERT_EQ(send(socks.back(), "\x01", 1, MSG_NOSIGNAL), 1);  // the first byte of a header
  }
  auto connected = Clock::now();
  std::atomic<bool> stop{false};
  std::thread trickle([&] {  // a byte per connection every 500 ms: per-read timeouts never fire
    while (!stop) {
      for (int s : socks) send(s, "\x00", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  });
  // Held in their handshake, they take no ledger slot and no memory: a client allocates.
  Result r = run({cuda_program("limits"), "malloc", "64", "4"}, d.client_env());
  size_t held = 0;
  for (int s : socks) held += is_open(s);
  bool still_in_window = Clock::now() - connected < std::chrono::seconds(4);
  EXPECT_EQ(r.status, 0) << r.err;
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(contains(r.out, "malloc " + std::to_string(i) + " cudaSuccess")) << r.out;
  if (still_in_window) {
    EXPECT_EQ(held, 200u);
  }
  // Then the deadline ends them all, however they trickle.
  size_t closed = 0;
  for (int s : socks) closed += closed_within(s, 8000);
  EXPECT_EQ(closed, 200u);
  EXPECT_LT(Clock::now() - connected, std::chrono::seconds(12));
  stop = true;
  trickle.join();
  for (int s : socks) close(s);
  uint64_t total = 0;
  EXPECT_EQ(settled_free_bytes(d.client_env(), total), total);
  EXPECT_TRUE(d.alive());
}

TEST(Hardening, ConnectionsBeyondTheHandshakeBudgetAreDroppedAtOnce) {
  Daemon d({"--max-handshakes", "8", "--handshake-timeout", "3"});
  std::vector<int> socks;
  for (int i = 0; i < 40; ++i) socks.push_back(tcp_connect(d.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  size_t open = 0;
  for (int s : socks) open += is_open(s);
  EXPECT_LE(open, 8u);
  EXPECT_GE(open, 1u);  // those within the budget wait for their deadline
  size_t closed = 0;
  for (int s : socks) closed += closed_within(s, 6000);
  EXPECT_EQ(closed, 40u);
  for (int s : socks) close(s);
  uint64_t total = 0;
  EXPECT_EQ(settled_free_bytes(d.client_env(), total), total);
}

TEST(Hardening, PerClientLimitsFailWithMessagesNamingThem) {
  Daemon d(
      {"--client-mem-limit", "100MiB", "--client-max-streams", "4", "--client-max-events", "4"});
  Env env = d.client_env();
  env["RGPU_LOG"] = "info";
  Result r = run({cuda_program("limits"), "malloc", "40", "3"}, env);
  EXPECT_TRUE(contains(r.out, "malloc 0 cudaSuccess")) << r.out;
  EXPECT_TRUE(contains(r.out, "malloc 1 cudaSuccess")) << r.out;
  EXPECT_TRUE(contains(r.out, "malloc 2 cudaErrorMemoryAllocation")) << r.out;
  EXPECT_TRUE(contains(r.err, "--client-mem-limit")) << r.err;
  r = run({cuda_program("limits"), "streams", "4"}, env);
  EXPECT_TRUE(contains(r.out, "streams sync cudaSuccess")) << r.out << r.err;
  r = run({cuda_program("limits"), "streams", "5"}, env);
  EXPECT_FALSE(contains(r.out, "streams sync cudaSuccess")) << r.out;
  EXPECT_TRUE(contains(r.err, "--client-max-streams")) << r.err;
  r = run({cuda_program("limits"), "events", "5"}, env);
  EXPECT_FALSE(contains(r.out, "events sync cudaSuccess")) << r.out;
  EXPECT_TRUE(contains(r.err, "--client-max-events")) << r.err;
  uint64_t total = 0;
  EXPECT_EQ(settled_free_bytes(d.client_env(), total), total);
}

TEST(Hardening, SessionLimitsRefuseWithAClearMessage) {
  for (const char* opt : {"--max-sessions", "--max-sessions-per-user"}) {
    Daemon d({opt, "1"});
    Child holder = spawn({cuda_program("hold_memory"), "16"}, d.client_env());
    ASSERT_TRUE(holder.wait_line("holding", 60));
    Result r = run({cuda_program("mem_info")}, d.client_env());
    EXPECT_NE(r.status, 0);
    EXPECT_TRUE(contains(r.err, opt)) << r.err;
    if (std::string(opt) == "--max-sessions-per-user") {
      EXPECT_TRUE(contains(r.err, "for uid ")) << r.err;  // shared memory: per uid
      Env tcp = d.client_env();  // TCP: per peer address; the holder's uid is not counted
      tcp["RGPU_TRANSPORT"] = "tcp";
      EXPECT_EQ(run({cuda_program("mem_info")}, tcp).status, 0);
      // That client's slot comes back once its session is reaped: try a few times.
      bool holding = false;
      for (int i = 0; i < 40 && !holding; ++i) {
        Child second = spawn({cuda_program("hold_memory"), "16"}, tcp);
        holding = second.wait_line("holding", 60);
        if (!holding) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          continue;
        }
        r = run({cuda_program("mem_info")}, tcp);
        EXPECT_NE(r.status, 0);
        EXPECT_TRUE(contains(r.err, "for address 127.0.0.1")) << r.err;
      }
      ASSERT_TRUE(holding);
    }
    holder.kill_and_wait(SIGKILL);
    int status = -1;  // the slot comes back once the session is reaped
    for (int i = 0; i < 40 && status != 0; ++i) {
      status = run({cuda_program("mem_info")}, d.client_env()).status;
      if (status) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(status, 0);
  }
}

TEST(Hardening, SigtermEndsAStoppedSessionWithinTheDeadline) {
  Daemon d({"--shutdown-timeout", "2"});
  Child holder = spawn({cuda_program("hold_memory"), "16"}, d.client_env());
  ASSERT_TRUE(holder.wait_line("holding", 60));
  int handshaking = tcp_connect(d.port());  // and one still in its handshake
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<pid_t> sessions = live_children(d.pid());
  ASSERT_EQ(sessions.size(), 2u);
  for (pid_t p : sessions) kill(p, SIGSTOP);
  auto t0 = Clock::now();
  kill(d.pid(), SIGTERM);
  int status = -1;
  ASSERT_TRUE(d.wait_exit(4000, status)) << "rgpud did not exit within 4 s of SIGTERM";
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(3500));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (pid_t p : sessions) EXPECT_NE(kill(p, 0), 0) << "session " << p << " outlived rgpud";
  EXPECT_TRUE(closed_within(handshaking, 1000));
  close(handshaking);
  holder.kill_and_wait(SIGKILL);
}

TEST(Hardening, MinorMessages) {
  char dir[] = "/tmp/rgpu-tokdir-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  Result r = run({RGPUD_PATH, "--backend", "host", "--token-file", dir}, {}, 30);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "is a directory")) << r.err;
  rmdir(dir);

  Env env;
  env["LD_LIBRARY_PATH"] = RGPU_LIB_PATH;
  env["RGPU_SERVERS"] = "";
  r = run({cuda_program("mem_info")}, env);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.err, "RGPU_SERVERS")) << r.err;

  // --listen :0 (as the help suggests with --port-file): any free port on 127.0.0.1.
  std::string port_file = std::string(dir) + ".port";
  Child c = spawn({RGPUD_PATH, "--backend", "host", "--listen", ":0", "--port-file", port_file,
                   "--module-cache", "none"},
                  {});
  int port = 0;
  for (int i = 0; i < 200 && port <= 0; ++i) {
    std::ifstream in(port_file);
    if (!(in >> port)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(port, 0);
  if (port > 0) {
    Env e;
    e["LD_LIBRARY_PATH"] = RGPU_LIB_PATH;
    e["RGPU_SERVERS"] = "127.0.0.1:" + std::to_string(port);
    EXPECT_EQ(run({cuda_program("mem_info")}, e).status, 0);
  }
  c.kill_and_wait(SIGTERM);
  unlink(port_file.c_str());
}
