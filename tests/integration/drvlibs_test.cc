// Driver calls NVIDIA's libraries need (issue 12, drvlibs) through rgpu's libcuda.so.1 against
// rgpud's host backend, over TCP and shared memory (tests/cuda/driver_libs.cpp): tensor maps whose
// arguments reach the backend intact and whose errors come back, the potential block size with and
// without a callback equal to the documented search over the backend's occupancy, stream memory
// operations ordering work across streams (and mapped page-locked memory over shm), small calls.
// A stream left waiting on a value nobody writes does not keep the session from ending.  (NVIDIA's
// cuBLAS and cuFFT on rgpu's driver: tests/integration/nvidia_runtime_test.cc, NvidiaLibraries.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

class Drvlibs : public ::testing::TestWithParam<const char*> {};

TEST_P(Drvlibs, DriverLibsProgramPasses) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("driver_libs")}, env, 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("driver_libs: passed"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.err.find("not supported by rgpu"), std::string::npos) << r.err;
  if (std::string(GetParam()) == "shm") {  // the mapped page-locked memory case ran
    EXPECT_EQ(r.out.find("not available over this link"), std::string::npos) << r.out;
  }
}

// The program leaves a stream waiting on a word nobody writes and exits: its session ends (the
// host backend's waits give up when the session does) within seconds, under a time limit.
TEST_P(Drvlibs, AbandonedWaitDoesNotKeepTheSession) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("driver_libs"), "--abandon-wait"}, env, 30);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("driver_libs: left a stream waiting"), std::string::npos) << r.out << r.err;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!live_children(d.pid()).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(live_children(d.pid()).empty())
      << "the session still runs 10 s after its client left";
  EXPECT_TRUE(d.alive());
}

INSTANTIATE_TEST_SUITE_P(Transports, Drvlibs, ::testing::Values("tcp", "shm"));

}  // namespace
