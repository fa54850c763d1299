// Managed memory through rgpud's host backend, over TCP and shared memory (tests/cuda/managed.cu).
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

Result run_managed(const std::string& transport, const std::string& mode, bool stats = false) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = transport;
  if (stats) env["RGPU_STATS"] = "1";
  Result r = run({cuda_program("managed"), mode}, env, 60);
  EXPECT_TRUE(d.alive());
  return r;
}

void expect_passed(const Result& r, const std::string& mode) {
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("managed " + mode + ": passed"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out << r.err;
}

class Managed : public ::testing::TestWithParam<const char*> {};

TEST_P(Managed, HostAndKernelsShareOnePointer) {
  expect_passed(run_managed(GetParam(), "basic"), "basic");
}

TEST_P(Managed, OnlyDirtyGranulesMove) {
  // 8 ints written 8 MiB apart in a 64 MiB allocation: 8 write faults, 8 granules of 64 KiB
  // sent before the kernel, and one granule (the result) fetched after it.
  Result r = run_managed(GetParam(), "sparse", true);
  expect_passed(r, "sparse");
  EXPECT_NE(r.err.find("rgpu stats: managed memory: sent 524288 bytes in 8 runs, fetched 65536 "
                       "bytes in 1 runs, 8 write faults"),
            std::string::npos)
      << r.err;
}

INSTANTIATE_TEST_SUITE_P(Transports, Managed, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
