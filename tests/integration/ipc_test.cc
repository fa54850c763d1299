// CUDA IPC memory handles between two client processes of one rgpud (host backend), over TCP and
// shared memory (tests/cuda/ipc.cu): the importer reads the exporter's memory and the exporter
// sees the importer's writes; a handle taken to another rgpud, or one whose exporter ended, is
// refused with cudaErrorInvalidResourceHandle.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

class Ipc : public ::testing::TestWithParam<const char*> {};

TEST_P(Ipc, MemoryHandleSharedBetweenProcesses) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Child exporter = spawn({cuda_program("ipc"), "export"}, env);
  std::string line;
  ASSERT_TRUE(exporter.wait_line("handle ", 60, &line)) << "the exporter printed no handle";
  std::string hex = line.substr(7);
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r')) hex.pop_back();
  ASSERT_EQ(hex.size(), 128u) << line;

  Result imp = run({cuda_program("ipc"), "import", hex}, env, 60);
  EXPECT_EQ(imp.status, 0) << imp.out << imp.err;
  EXPECT_NE(imp.out.find("ipc import: passed"), std::string::npos) << imp.out << imp.err;

  // The same handle given to another rgpud: refused, naming why.
  {
    Daemon other;
    Env oenv = other.client_env();
    oenv["RGPU_TRANSPORT"] = GetParam();
    oenv["RGPU_LOG"] = "info";  // the server's reason for a failed call is logged at info
    Result r = run({cuda_program("ipc"), "import-gone", hex}, oenv, 60);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("ipc import-gone: passed"), std::string::npos) << r.out << r.err;
    EXPECT_NE(r.err.find("another rgpud"), std::string::npos) << r.err;
  }

  ASSERT_TRUE(exporter.wait_line("ipc export: ", 60, &line)) << "the exporter did not finish";
  EXPECT_NE(line.find("passed"), std::string::npos) << line;

  // The exporter ended: its export goes with its session (the daemon drops it once the session
  // process is gone, which takes a moment).
  exporter.kill_and_wait(0);
  env["RGPU_LOG"] = "info";
  Result gone;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  do {
    gone = run({cuda_program("ipc"), "import-gone", hex}, env, 60);
    if (gone.status == 0) break;
    usleep(200000);
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(gone.status, 0) << gone.out << gone.err;
  EXPECT_NE(gone.err.find("does not exist"), std::string::npos) << gone.err;
  EXPECT_TRUE(d.alive());
}

INSTANTIATE_TEST_SUITE_P(Transports, Ipc, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
