// Liveness, end to end, over TCP and shared memory: a server that stops answering becomes an
// error within RGPU_TIMEOUT (and a listener that never answers fails the handshake in time), a
// long kernel is not taken for a dead server (heartbeats), and a client that stalls in the middle
// of a request or stops reading loses its session within --client-timeout, its memory coming back.
#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include "proto/frame.h"
#include "proto/messages.h"
#include "tests/integration/harness.h"
#include "transport/shm/shm.h"
#include "transport/tcp/tcp.h"

using namespace rgpu;
using namespace rgpu::test;
using namespace rgpu::proto;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The one session process of `d`, waiting up to 10 s for it to appear.
pid_t session_of(const Daemon& d) {
  for (auto t0 = Clock::now(); since(t0) < 10;) {
    auto c = live_children(d.pid());
    if (c.size() == 1) return *c.begin();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

bool gone(pid_t pid, pid_t parent) {
  auto c = live_children(parent);
  return std::find(c.begin(), c.end(), pid) == c.end();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string temp_path(const char* stem) {
  return "/tmp/" + std::string(stem) + "-" + std::to_string(getpid()) + "-" +
         std::to_string(Clock::now().time_since_epoch().count());
}

// A client speaking the protocol by hand, so that it can stop exactly where a test wants.
struct RawClient {
  std::unique_ptr<transport::Connection> conn;
  uint64_t next = 1;

  RawClient(const Daemon& d, const std::string& transport) {
    conn = transport == "shm" ? transport::shm_connect(transport::shm_socket_name(d.port()), 10)
                              : transport::tcp_connect("127.0.0.1", d.port(), 10);
    conn->set_recv_timeout(10);
    HelloRep rep;
    EXPECT_EQ(call<HelloMsg>(HelloReq{}, rep), 0);
  }
  void send_frame(uint16_t type, const std::vector<uint8_t>& body, uint64_t payload_len,
                  const void* payload, size_t payload_sent) {
    FrameHeader h{type, 0, static_cast<uint32_t>(body.size()), next++, payload_len};
    uint8_t raw[kHeaderSize];
    encode_header(h, raw);
    iovec v[3] = {{raw, sizeof raw},
                  {const_cast<uint8_t*>(body.data()), body.size()},
                  {const_cast<void*>(payload), payload_sent}};
    conn->send_all(v, 3);
  }
  template <class M>
  void send(const typename M::Req& req) {
    send_frame(static_cast<uint16_t>(M::id), encode_message(req), 0, nullptr, 0);
  }
  // Sends M and returns its reply's error (pushed frames before it are skipped).
  template <class M>
  int32_t call(const typename M::Req& req, typename M::Rep& rep) {
    send<M>(req);
    for (;;) {
      uint8_t raw[kHeaderSize];
      conn->recv(raw, sizeof raw);
      FrameHeader h = decode_header(raw);
      std::vector<uint8_t> body(h.body_len);
      if (h.body_len) conn->recv(body.data(), body.size());
      EXPECT_EQ(h.payload_len, 0u);
      std::string msg;
      if (h.flags & kFlagReply) return decode_reply(body, rep, msg);
    }
  }
};

uint64_t free_memory(const Daemon& d) {
  RawClient c(d, "tcp");
  MemGetInfoRep rep;
  EXPECT_EQ((c.call<MemGetInfoMsg>(DeviceReq{0}, rep)), 0);
  return rep.free;
}

// Waits up to `limit_s` for the session process to end and the daemon to have its memory back.
void expect_session_ends(const Daemon& d, pid_t session, uint64_t free_before, double limit_s) {
  auto t0 = Clock::now();
  while (!gone(session, d.pid()) && since(t0) < limit_s + 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  double took = since(t0);
  EXPECT_TRUE(gone(session, d.pid())) << "the session process is still there";
  EXPECT_LT(took, limit_s) << "the session took " << took << " s to end";
  uint64_t now_free = 0;
  for (auto t1 = Clock::now(); since(t1) < 5;
       std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    if ((now_free = free_memory(d)) == free_before) break;
  EXPECT_EQ(now_free, free_before) << "the stalled client's memory did not come back";
  EXPECT_TRUE(d.alive());
}

class Liveness : public ::testing::TestWithParam<const char*> {
 protected:
  std::string transport() const { return GetParam(); }
};

// A kernel that runs longer than RGPU_TIMEOUT: the server's heartbeats keep the call waiting.
TEST_P(Liveness, ALongKernelIsNotTakenForADeadServer) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = transport();
  env["RGPU_TIMEOUT"] = "2";
  auto t0 = Clock::now();
  Result r = run({cuda_program("liveness"), "long", "5"}, env, 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("liveness long: passed"), std::string::npos) << r.out << r.err;
  EXPECT_GE(since(t0), 5.0);
}

// A client leaves a kernel that runs for a minute: its session waits --drain-limit seconds for it,
// then its process ends (the driver frees what it held), and the daemon serves on.  Without the
// limit the session would live until the kernel ends.
TEST_P(Liveness, AbandonedWorkEndsTheSessionAfterTheDrainLimit) {
  Daemon d({"--drain-limit", "2"});
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = transport();
  Result r = run({cuda_program("liveness"), "abandon", "60"}, env, 30);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("left a kernel running"), std::string::npos) << r.out << r.err;
  auto t0 = Clock::now();
  while (!live_children(d.pid()).empty() && since(t0) < 15)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(live_children(d.pid()).empty()) << "the session outlived its drain limit by 13 s";
  EXPECT_TRUE(d.alive());
  Result again = run({cuda_program("liveness"), "long", "0"}, env, 60);
  EXPECT_EQ(again.status, 0) << again.out << again.err;
}

// The server's session process is stopped (SIGSTOP) while a call waits: the call fails within
// RGPU_TIMEOUT with an error CUDA programs know and a message naming the server and the wait;
// a later call fails at once.
TEST_P(Liveness, AStoppedServerFailsTheWaitingCallWithinTheTimeout) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = transport();
  env["RGPU_TIMEOUT"] = "2";
  std::string err_file = temp_path("rgpu-liveness-err");
  Child c =
      spawn({"/bin/sh", "-c", "exec \"$0\" stall 2>" + err_file, cuda_program("liveness")}, env);
  ASSERT_TRUE(c.wait_line("waiting", 30));
  pid_t session = session_of(d);
  ASSERT_GT(session, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the call is waiting now
  ASSERT_EQ(kill(session, SIGSTOP), 0);
  auto t0 = Clock::now();
  std::string sync, later;
  bool got_sync = c.wait_line("sync:", 15, &sync);
  double took = since(t0);
  bool got_later = c.wait_line("later:", 5, &later);
  kill(session, SIGCONT);
  c.kill_and_wait(SIGKILL);
  std::string err = read_file(err_file);
  unlink(err_file.c_str());
  ASSERT_TRUE(got_sync) << err;
  EXPECT_NE(sync.find("cudaErrorDevicesUnavailable"), std::string::npos) << sync;
  EXPECT_GE(took, 1.0) << sync;  // silence counts from the last heartbeat (every 0.5 s)
  EXPECT_LT(took, 2 + 2.5) << sync;
  ASSERT_TRUE(got_later) << err;
  EXPECT_NE(later.find("cudaErrorDevicesUnavailable after 0.0 s"), std::string::npos) << later;
  EXPECT_NE(err.find("lost the connection to rgpud at 127.0.0.1:" + std::to_string(d.port())),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("nothing arrived from it for 2."), std::string::npos) << err;
  EXPECT_NE(err.find("RGPU_TIMEOUT=2"), std::string::npos) << err;
}

// A listener that accepts and never answers: the handshake fails within RGPU_TIMEOUT.
TEST_P(Liveness, AServerThatNeverAnswersFailsTheHandshakeInTime) {
  auto tcp = transport::tcp_listen("127.0.0.1", 0);
  uint16_t port = tcp->port();
  std::unique_ptr<transport::Listener> shm;
  if (transport() == "shm") shm = transport::shm_listen(transport::shm_socket_name(port));
  transport::Listener& l = shm ? *shm : *tcp;
  // Accept whatever comes and hold it, answering nothing.
  std::vector<int> held;
  std::atomic<bool> stop{false};
  std::thread acceptor([&] {
    while (!stop) {
      pollfd p{l.fd(), POLLIN, 0};
      if (poll(&p, 1, 50) == 1) {
        int fd = accept(l.fd(), nullptr, nullptr);
        if (fd >= 0) held.push_back(fd);
      }
    }
  });
  Env env = {{"RGPU_SERVERS", "127.0.0.1:" + std::to_string(port)},
             {"LD_LIBRARY_PATH", RGPU_LIB_PATH},
             {"RGPU_TRANSPORT", transport()},
             {"RGPU_TIMEOUT", "2"}};
  auto t0 = Clock::now();
  Result r = run({cuda_program("mem_info")}, env, 30);
  double took = since(t0);
  stop = true;
  acceptor.join();
  EXPECT_FALSE(held.empty()) << "the client never connected";
  for (int fd : held) close(fd);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.status, 124) << "the client hung";
  EXPECT_LT(took, 2 + 2.5);
  EXPECT_NE(r.out.find("cudaErrorDevicesUnavailable"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("within 2 s"), std::string::npos) << r.err;
}

// A client that stops in the middle of a request's payload: its session ends within
// --client-timeout and what it allocated comes back.
TEST_P(Liveness, AClientStalledMidPayloadLosesItsSession) {
  Daemon d({"--client-timeout", "2", "--host-capacity", "512MiB"});
  uint64_t free_before = free_memory(d);
  RawClient c(d, transport());
  pid_t session = session_of(d);
  ASSERT_GT(session, 0);
  MallocRep m;
  ASSERT_EQ((c.call<MallocMsg>(MallocReq{0, 64 << 20}, m)), 0);
  EXPECT_LT(free_memory(d), free_before);
  std::vector<char> part(1 << 20, 'x');
  MemcpyHtoDReq q{0, m.ptr, 8 << 20};
  c.send_frame(static_cast<uint16_t>(MsgId::MemcpyHtoD), encode_message(q), q.size, part.data(),
               part.size());  // 1 MiB of the 8 it announced, then nothing
  // No byte for 2 s ends it (over TCP a receive that got part of its chunk may take up to 2 x 2 s).
  expect_session_ends(d, session, free_before, 2 * 2 + 2);
}

// A client that asks for data and stops reading it: the session's send makes no progress, fails
// after --client-timeout, and the session ends.
TEST_P(Liveness, AClientThatStopsReadingLosesItsSession) {
  Daemon d({"--client-timeout", "2", "--host-capacity", "512MiB"});
  uint64_t free_before = free_memory(d);
  RawClient c(d, transport());
  pid_t session = session_of(d);
  ASSERT_GT(session, 0);
  MallocRep m;
  ASSERT_EQ((c.call<MallocMsg>(MallocReq{0, 64 << 20}, m)), 0);
  for (int i = 0; i < 4; ++i) c.send<MemcpyDtoHMsg>(MemcpyDtoHReq{0, m.ptr, 64 << 20});
  // 256 MiB asked for, none read: far more than socket buffers or the shared ring hold.
  expect_session_ends(d, session, free_before, 2 + 4);
}

// An idle client between requests is legitimate for ever: it outlives --client-timeout.
TEST_P(Liveness, AnIdleClientKeepsItsSession) {
  Daemon d({"--client-timeout", "1"});
  RawClient c(d, transport());
  pid_t session = session_of(d);
  ASSERT_GT(session, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_FALSE(gone(session, d.pid()));
  PingRep rep;
  EXPECT_EQ((c.call<PingMsg>(PingReq{}, rep)), 0);
}

INSTANTIATE_TEST_SUITE_P(Transports, Liveness, ::testing::Values("tcp", "shm"));

}  // namespace
