// The misc group against rgpud --backend host, over TCP and shared memory: CUDA IPC event handles
// between two client processes (tests/cuda/ipc_events.cu: the importer's query, stream wait and
// synchronize follow the exporter's record), and the logs API, peer access, GPUDirect RDMA flush
// and atomic capabilities in one process (tests/cuda/misc.cu).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

class Misc : public ::testing::TestWithParam<const char*> {};

TEST_P(Misc, EventHandleSharedBetweenProcesses) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  char dir[] = "/tmp/rgpu-ipc-events-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  Child exporter = spawn({cuda_program("ipc_events"), "export", dir}, env);
  std::string line;
  ASSERT_TRUE(exporter.wait_line("handle ", 60, &line)) << "the exporter printed no handle";
  std::string hex = line.substr(7);
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r')) hex.pop_back();
  ASSERT_EQ(hex.size(), 128u) << line;
  ASSERT_TRUE(exporter.wait_line("recorded", 60)) << "the exporter did not record its event";

  Result imp = run({cuda_program("ipc_events"), "import", dir, hex}, env, 60);
  EXPECT_EQ(imp.status, 0) << imp.out << imp.err;
  EXPECT_NE(imp.out.find("ipc_events import: passed"), std::string::npos) << imp.out << imp.err;

  ASSERT_TRUE(exporter.wait_line("ipc_events export: ", 60, &line)) << "the exporter hung";
  EXPECT_NE(line.find("passed"), std::string::npos) << line;
  exporter.kill_and_wait(0);
  unlink((std::string(dir) + "/go").c_str());
  unlink((std::string(dir) + "/done").c_str());
  rmdir(dir);
  EXPECT_TRUE(d.alive());
}

TEST_P(Misc, LogsPeerAccessAndAtomics) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("misc")}, env, 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("misc: passed"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("flush GPUDirect RDMA writes: cudaSuccess"), std::string::npos) << r.out;
  // The host backend's capabilities: 32/64-bit, signed, unsigned, reductions for integer add;
  // no unsigned for float add.
  EXPECT_NE(r.out.find("host atomic capabilities: 0x1f 0x1b 0x1d"), std::string::npos) << r.out;
  EXPECT_TRUE(d.alive());
}

INSTANTIATE_TEST_SUITE_P(Transports, Misc, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
