// Device and context settings, pitched and 3-D memory, device printf and assert (issue 11 items
// 6, 7, 10) against rgpud's host backend, over TCP and shared memory (tests/cuda/devmem.cu checks
// its own results byte by byte; this checks where its output went and in what order).
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

class Devmem : public ::testing::TestWithParam<const char*> {};

const char kAssert[] =
    "devmem.cu:18: void devmem_assert(int): block: [0,0,0], thread: [0,0,0] Assertion `v == 0` "
    "failed.";

void expect_devmem(const Result& r) {
  EXPECT_EQ(r.status, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("devmem: passed"), std::string::npos) << r.out << r.err;
  // Device printf on stdout before the synchronization that covers it returns.
  size_t said = r.out.find("devmem: device says 42\n");
  size_t sync = r.out.find("ok   cudaDeviceSynchronize()", said);
  EXPECT_NE(said, std::string::npos) << r.out;
  EXPECT_NE(sync, std::string::npos) << r.out;
  // The assert's message on the program's stderr (not stdout), before the call returned.
  size_t assert_at = r.err.find(kAssert);
  size_t after = r.err.find("devmem: host after the assert");
  ASSERT_NE(assert_at, std::string::npos) << r.err;
  ASSERT_NE(after, std::string::npos) << r.err;
  EXPECT_LT(assert_at, after) << r.err;
  EXPECT_EQ(r.out.find("Assertion"), std::string::npos) << r.out;
  // The session's own log lines stay in rgpud's log now that the session captures its stderr.
  EXPECT_EQ(r.err.find("rgpud"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("ok   e                                                cudaErrorAssert"),
            std::string::npos)
      << r.out;
}

}  // namespace

TEST_P(Devmem, SettingsPitch3DPrintfAndAssert) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  expect_devmem(run({cuda_program("devmem")}, env, 60));
  EXPECT_TRUE(d.alive());
}

TEST_P(Devmem, TwoGpusAnswerP2PAttributes) {
  Daemon d({"--host-gpus", "2"});
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  env["RGPU_SERVERS"] = d.servers() + "/0," + d.servers() + "/1";
  Result r = run({cuda_program("devmem")}, env, 60);
  expect_devmem(r);
  EXPECT_NE(r.out.find("ok   P2P access attribute is 0 or 1"), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Both, Devmem, ::testing::Values("tcp", "shm"));
