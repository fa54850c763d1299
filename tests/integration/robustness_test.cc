// Sessions that cannot deadlock and stay bounded (host backend, which holds a "driver lock" during
// host functions and page-locked allocations, as CUDA does):
//  - the mix of eager copies, large copies, __constant__ writes and client callbacks on several
//    threads and streams that once deadlocked a session (a pool grew under a lock a host function
//    also wanted; a host function waited for the client while the reader allocated) completes;
//  - a client flooding asynchronous copies behind a busy stream waits on its window: the session's
//    memory stays bounded, and every byte still lands in order.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

void expect_pass(const Result& r, const std::string& name) {
  EXPECT_NE(r.status, 124) << name << " hung (killed after its time limit)";
  EXPECT_EQ(r.status, 0) << name << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_NE(r.out.find(name + ": passed"), std::string::npos) << r.out;
}

// Resident memory of the daemon's session processes (its children), in MiB.
long sessions_rss_mib(pid_t daemon) {
  std::ifstream children("/proc/" + std::to_string(daemon) + "/task/" + std::to_string(daemon) +
                         "/children");
  long total_kib = 0;
  for (pid_t pid; children >> pid;) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("VmRSS:", 0) == 0) total_kib += std::stol(line.substr(6));
  }
  return total_kib / 1024;
}

class Robust : public ::testing::TestWithParam<const char*> {};

TEST_P(Robust, TheMixThatOnceDeadlockedASessionCompletes) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  for (int run = 0; run < 10; ++run) {
    Result r = rgpu::test::run({cuda_program("stress_mix"), "3"}, env, 90);
    expect_pass(r, "stress_mix");
    if (r.status != 0) break;
  }
  EXPECT_TRUE(d.alive());
}

// `copies` asynchronous copies of `kib` KiB queued behind 2 s of work on the same stream: the
// session's resident memory peaks below `limit_mib`, and every copy lands in order.
void flood(const Daemon& d, const char* transport, const char* copies, const char* kib,
           long limit_mib, const char* timeout = "10") {
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = transport;
  env["RGPU_TIMEOUT"] = timeout;
  Child c = spawn({cuda_program("flood_async"), copies, kib}, env);
  std::atomic<long> peak{0};
  std::atomic<bool> stop{false};
  std::thread watch([&] {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (std::chrono::steady_clock::now() < until && !stop) {
      peak = std::max(peak.load(), sessions_rss_mib(d.pid()));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::string line;
  bool ready = c.wait_line("ready", 90, &line);
  bool done = ready && c.wait_line("flood_async: passed", 90, &line);
  stop = true;
  watch.join();
  c.kill_and_wait(SIGKILL);
  EXPECT_TRUE(done) << "the flood did not complete";
  EXPECT_LT(peak, limit_mib) << "session resident memory grew to " << peak << " MiB";
  EXPECT_GT(peak, 0);
  std::printf("%s x %s KiB over %s: session peak %ld MiB\n", copies, kib, transport, peak.load());
}

TEST_P(Robust, AFloodOfAsynchronousCopiesStaysBounded) {
  Daemon d;
  // 800 MiB in 4 MiB copies: the window (128 MiB of page-locked payload) holds the rest back.
  flood(d, GetParam(), "200", "4096", 400);
}

TEST_P(Robust, AFloodOfSmallAsynchronousCopiesStaysBounded) {
  Daemon d;
  // 20000 copies of 48 KiB (940 MiB), each staged by the server as it is issued.
  flood(d, GetParam(), "20000", "48", 400);
}

// The client waits for its window longer than RGPU_TIMEOUT while the server's streams hold its
// bytes behind 2 s of work: the server says it is busy, so the wait is not taken for a dead server.
TEST_P(Robust, AClientWaitingForItsWindowIsNotTakenForGone) {
  Daemon d;
  flood(d, GetParam(), "200", "4096", 400, "1");
}

// The server stops while the client waits for its window: an error within RGPU_TIMEOUT.
TEST_P(Robust, AStoppedServerFailsAClientWaitingForItsWindow) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  env["RGPU_TIMEOUT"] = "2";
  Child c = spawn({cuda_program("flood_async"), "200", "4096"}, env);
  // Past its synchronous setup (a setup call failing on the stopped server would end the program
  // before "ready": seen once under the sanitizers, which made the setup outlast a fixed 0.5 s),
  // then the flood fills the window.
  ASSERT_TRUE(c.wait_line("flooding", 60)) << "the program did not get to its copies";
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::ifstream children("/proc/" + std::to_string(d.pid()) + "/task/" + std::to_string(d.pid()) +
                         "/children");
  pid_t session = 0;
  children >> session;
  ASSERT_GT(session, 0);
  kill(session, SIGSTOP);
  auto t0 = std::chrono::steady_clock::now();
  std::string line;
  bool ready = c.wait_line("ready", 20, &line);  // the copies fail fast once the link is gone
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  kill(session, SIGCONT);
  c.kill_and_wait(SIGKILL);
  EXPECT_TRUE(ready) << "the client still waits";
  EXPECT_LT(waited, 2 + 3.0) << "the error took " << waited << " s";
}

INSTANTIATE_TEST_SUITE_P(Both, Robust, ::testing::Values("tcp", "shm"));

}  // namespace
