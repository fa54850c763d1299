// Stream-ordered allocation and mapped page-locked memory through rgpud's host backend, over TCP
// and shared memory (tests/cuda/pools.cu).
#include <gtest/gtest.h>
#include <sys/personality.h>

#include <cstdlib>
#include <sstream>
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

TEST(StreamOrderedAllocation, EachVirtualDeviceAllocatesInItsOwnWindow) {
  // Two virtual devices naming one GPU, and another GPU: three windows, three default pools.
  Daemon d({"--host-gpus", "2"});
  Env env = d.client_env();
  env["RGPU_SERVERS"] = d.servers() + "/1," + d.servers() + "/1," + d.servers() + "/0";
  env["POOLS_PRINT"] = "1";
  Result r = run({cuda_program("pools"), "devices"}, env, 60);
  expect_passed(r, "devices");
  std::istringstream in(r.out);
  std::string line;
  int seen = 0;
  while (std::getline(in, line)) {
    if (line.rfind("addr ", 0) != 0) continue;
    std::istringstream f(line.substr(5));
    int dev = -1;
    std::string p;
    f >> dev >> p;
    const uint64_t addr = std::strtoull(p.c_str(), nullptr, 16);
    const uint64_t window = 0x500000000000ull + static_cast<uint64_t>(dev) * (1ull << 40);
    EXPECT_GE(addr, window) << line;
    EXPECT_LT(addr, window + (1ull << 40)) << line;
    ++seen;
  }
  EXPECT_EQ(seen, 6) << r.out;
}

TEST(MappedHostMemory, KernelsUseItOverSharedMemory) {
  expect_passed(run_pools("shm", "mapped"), "mapped");
}

// Without address randomization rgpud's session and the program have the same layout, so the
// program's segment address is taken in the session (as a real machine's driver mappings can
// take it): the segment moves to an address free in both, and kernels use it all the same.
TEST(MappedHostMemory, MovesWhereTheSessionHasTheAddressTaken) {
  const int old = personality(0xffffffff);
  ASSERT_NE(old, -1);
  ASSERT_NE(personality(static_cast<unsigned long>(old) | ADDR_NO_RANDOMIZE), -1);
  Result r;
  {
    Daemon d;  // both inherit the personality
    Env env = d.client_env();
    env["RGPU_TRANSPORT"] = "shm";
    env["RGPU_LOG"] = "info";
    r = run({cuda_program("pools"), "mapped"}, env, 60);
    EXPECT_TRUE(d.alive());
  }
  personality(static_cast<unsigned long>(old));
  expect_passed(r, "mapped");
  EXPECT_NE(r.err.find("mapped page-locked memory: moved to"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("managed memory stands in"), std::string::npos) << r.err;
}

// Over a network a GPU cannot reach the client's memory: cudaHostAlloc(cudaHostAllocMapped) gets
// managed memory standing in (said once on stderr), and kernels read and write it all the same.
TEST(MappedHostMemory, EmulatedWithManagedMemoryOverTcp) {
  Result r = run_pools("tcp", "mapped");
  expect_passed(r, "mapped");
  EXPECT_NE(r.err.find("managed memory stands in"), std::string::npos) << r.err;
}

TEST(MappedHostMemory, RegisteringOrdinaryMemoryAsMappedRefusedOverTcp) {
  Result r = run_pools("tcp", "mapped-refused");
  expect_passed(r, "mapped-refused");
  EXPECT_NE(r.err.find("a remote GPU cannot map this process's ordinary memory"), std::string::npos)
      << r.err;
}

}  // namespace
