// Asynchronous notifications against rgpud --backend host, over TCP and shared memory: the host
// backend notifies "over budget" before failing an allocation beyond its capacity, and
// tests/cuda/notify.cpp checks delivery through the runtime and the driver, user data and
// handles, CUDA calls inside a callback, unregistering (never called after; waits for a running
// callback) and registering again.
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

class Notify : public ::testing::TestWithParam<const char*> {};

TEST_P(Notify, OverBudgetReachesRuntimeAndDriverCallbacks) {
  Daemon d({"--host-capacity", "256MiB"});
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("notify"), "over-budget"}, env, 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("notify: passed"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_TRUE(d.alive());
}

TEST_P(Notify, RegisterAndUnregisterWithoutNotifications) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("notify")}, env, 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("notify: passed"), std::string::npos) << r.out << r.err;
  EXPECT_TRUE(d.alive());
}

INSTANTIATE_TEST_SUITE_P(Transports, Notify, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
