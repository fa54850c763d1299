// The misc2 group against rgpud --backend host, over TCP and shared memory: __managed__ variables
// (tests/cuda/managed_vars.cu: initial values fetched on the first host access, host writes sent
// before launches, kernel writes fetched after synchronizations) and a memory pool shared between
// two client processes (tests/cuda/pool_share.cu: the pool's descriptor over a Unix socket, a
// pointer's export data on the command line, writes seen both ways).
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

class Misc2 : public ::testing::TestWithParam<const char*> {};

TEST_P(Misc2, ManagedVariables) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  env["RGPU_STATS"] = "1";
  Result r = run({cuda_program("managed_vars"), cuda_program("managed_lib.fatbin")}, env, 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("managed_vars: passed"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("initial counter 7\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("after the first kernel: counter 15, values[1] 3, values[39999] 119997"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("after the second kernel: counter 101, values[2] 14"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("library managed variable: 58"), std::string::npos) << r.out;
  // The variables moved as managed memory does: granules sent and fetched, not copied whole.
  EXPECT_NE(r.err.find("rgpu stats: managed memory: sent "), std::string::npos) << r.err;
  EXPECT_TRUE(d.alive());
}

// pool_share's exporter offers its pool; an importer maps it and one of its pointers.
void share_pool(const Env& env) {
  char dir[] = "/tmp/rgpu-pool-share-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  Child exporter = spawn({cuda_program("pool_share"), "export", dir}, env);
  std::string line;
  ASSERT_TRUE(exporter.wait_line("data ", 60, &line)) << "the exporter printed no export data";
  std::string hex = line.substr(5);
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r')) hex.pop_back();
  ASSERT_EQ(hex.size(), 128u) << line;
  ASSERT_TRUE(exporter.wait_line("listening", 60)) << "the exporter does not offer its pool";

  Result imp = run({cuda_program("pool_share"), "import", dir, hex}, env, 60);
  EXPECT_EQ(imp.status, 0) << imp.out << imp.err;
  EXPECT_NE(imp.out.find("pool_share import: passed"), std::string::npos) << imp.out << imp.err;

  ASSERT_TRUE(exporter.wait_line("pool_share export: ", 60, &line)) << "the exporter hung";
  EXPECT_NE(line.find("passed"), std::string::npos) << line;
  exporter.kill_and_wait(0);
  unlink((std::string(dir) + "/sock").c_str());
  unlink((std::string(dir) + "/done").c_str());
  rmdir(dir);
}

TEST_P(Misc2, PoolSharedBetweenProcesses) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  share_pool(env);
  EXPECT_TRUE(d.alive());
}

// The same on NVIDIA's runtime and rgpu's driver (cuMemPoolExportToShareableHandle /
// ImportFromShareableHandle, cuMemPoolExportPointer / ImportPointer).
TEST_P(Misc2, PoolSharedBetweenProcessesOnNvidiaRuntime) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  env["LD_LIBRARY_PATH"] = nvidia_runtime_dir();
  share_pool(env);
  EXPECT_TRUE(d.alive());
}

INSTANTIATE_TEST_SUITE_P(Transports, Misc2, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
