// Stream waits across servers (tests/cuda/cross_waits.cu): two `rgpud --backend host`, device 0
// on one and device 1 on the other; a stream of device 1 waits for events of device 0 (runtime and
// driver API), over TCP and shared memory, under a time limit.  And the event's server killed
// while the other waits: the wait ends with an error within seconds.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

class CrossWaits : public ::testing::TestWithParam<const char*> {};

Env two_servers(const Daemon& a, const Daemon& b, const std::string& transport) {
  Env env = a.client_env();
  env["RGPU_SERVERS"] = a.servers() + "/0," + b.servers() + "/0";
  env["RGPU_TRANSPORT"] = transport;
  return env;
}

TEST_P(CrossWaits, StreamWaitsForAnotherServersEvent) {
  Daemon a, b;
  Result r = run({cuda_program("cross_waits")}, two_servers(a, b, GetParam()), 90);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("cross_waits: passed"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("peer access 1 -> 0: 0"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out << r.err;
}

TEST_P(CrossWaits, EventServerKilledWhileAStreamWaits) {
  Daemon a, b;
  Child c = spawn({cuda_program("cross_waits"), "kill"}, two_servers(a, b, GetParam()));
  ASSERT_TRUE(c.wait_line("WAITING", 30));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the synchronization waits now
  for (pid_t p : live_children(a.pid())) kill(p, SIGKILL);
  kill(a.pid(), SIGKILL);
  std::string line;
  ASSERT_TRUE(c.wait_line("SYNC", 15, &line))
      << "the waiting stream hung after its event's server died";
  EXPECT_EQ(line.find("cudaSuccess"), std::string::npos) << line;
  double took = 99;
  sscanf(line.c_str(), "SYNC %*s %lf", &took);
  EXPECT_LT(took, 10) << line;
  // The stream's server still serves this client's other work: it is not the one that died.
  EXPECT_TRUE(b.alive());
}

INSTANTIATE_TEST_SUITE_P(Transports, CrossWaits, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
