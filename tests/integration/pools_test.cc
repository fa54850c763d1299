// Stream-ordered allocation and mapped page-locked memory through rgpud's host backend, over TCP
// and shared memory (tests/cuda/pools.cu).
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

Result run_pools(const std::string& transport, const std::string& mode,
                 std::vector<std::string> daemon_args = {}) {
  Daemon d(daemon_args);
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = transport;
  Result r = run({cuda_program("pools"), mode}, env, 60);
  EXPECT_TRUE(d.alive());
  return r;
}

void expect_passed(const Result& r, const std::string& mode) {
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("pools " + mode + ": passed"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out << r.err;
}

class Pools : public ::testing::TestWithParam<const char*> {};

TEST_P(Pools, StreamOrderedAllocation) { expect_passed(run_pools(GetParam(), "pools"), "pools"); }

TEST_P(Pools, UnderAClientMemoryLimit) {
  // Pool memory counts against --client-mem-limit; 64 MiB is plenty for the program when the
  // pools give idle memory back.
  expect_passed(run_pools(GetParam(), "pools", {"--client-mem-limit", "64MiB"}), "pools");
}

INSTANTIATE_TEST_SUITE_P(Transports, Pools, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return std::string(info.param); });

TEST(MappedHostMemory, KernelsUseItOverSharedMemory) {
  expect_passed(run_pools("shm", "mapped"), "mapped");
}

TEST(MappedHostMemory, RefusedAtTheCallOverTcp) {
  Result r = run_pools("tcp", "mapped-refused");
  expect_passed(r, "mapped-refused");
  EXPECT_NE(r.err.find("mapped page-locked memory needs a server on this machine"),
            std::string::npos)
      << r.err;
}

}  // namespace
