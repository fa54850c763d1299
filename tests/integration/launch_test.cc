// Launches beyond the triple-chevron (tests/cuda/launch.cu) against rgpud's host backend, over
// TCP and shared memory: cooperative launches with a grid sync, programmatic stream serialization
// (attribute 6) in order, cluster dimensions, events and other attributes reaching the server, the
// kernel and cluster occupancy queries, and the library API on a fat binary and on PTX.  The
// host kernels (tests/host_kernels) fail loudly when an attribute did not arrive.
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

class Launch : public ::testing::TestWithParam<const char*> {};

TEST_P(Launch, AttributesReachTheServer) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("launch")}, env, 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("launch: passed"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(Transports, Launch, ::testing::Values("tcp", "shm"));

}  // namespace
