// rgpu's libnvidia-ml.so.1 against rgpud --backend host (CI's test double): tests/nvml/nvml_check
// loads "libnvidia-ml.so.1" from rgpu's lib directory, as a program run by `rgpu run` does, and
// checks its answers against rgpu's libcuda.so.1 for the same indices.  Also `rgpu ls`, a server
// that dies or stalls under a waiting program (under time limits), and that a query link is not a
// session (it holds no GPU resources, and --max-sessions does not count it).
#include <gtest/gtest.h>
#include <signal.h>

#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

Env nvml_env(const std::string& servers, const char* transport) {
  return {
      {"RGPU_SERVERS", servers}, {"RGPU_TRANSPORT", transport}, {"LD_LIBRARY_PATH", RGPU_LIB_PATH}};
}

class Nvml : public ::testing::TestWithParam<const char*> {};

TEST_P(Nvml, AnswersForTwoGpusOfOneServer) {
  Daemon d({"--host-gpus", "2", "--host-capacity", "1GiB"});
  const std::string s = d.servers();
  Result r = run({RGPU_NVML_CHECK, "list"}, nvml_env(s + "/0," + s + "/1", GetParam()), 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "ALL OK")) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "count 2")) << r.out;
  // The host backend's devices: their UUIDs and PCI bus ids differ; 1 GiB each; idle; one
  // process each: nvml_check's own session (it asked rgpu's driver too).
  EXPECT_TRUE(has(r.out,
                  "device 0  rgpu host backend (test double, no GPU)  "
                  "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf  00000000:01:00.0  "
                  "total 1073741824 used 0  util 0/0  cc 9.0  procs 1  temp Not Supported"))
      << r.out;
  EXPECT_TRUE(has(r.out,
                  "device 1  rgpu host backend (test double, no GPU)  "
                  "GPU-a1a2a3a4-a5a6-a7a8-a9aa-abacadaeafb0  00000000:02:00.0"))
      << r.out;
  EXPECT_TRUE(has(r.out, "p2p 0-1 0")) << r.out;  // two GPUs of one server: peers
  EXPECT_TRUE(has(r.out, "cuda driver 13000  driver version Not Supported")) << r.out;
  EXPECT_TRUE(has(r.err, "nvmlDeviceGetFanSpeed is not supported")) << r.err;
}

TEST_P(Nvml, AnswersForGpusOfTwoServers) {
  Daemon a({"--host-gpus", "2"});
  Daemon b({"--host-gpus", "2"});
  Result r = run({RGPU_NVML_CHECK, "list"},
                 nvml_env(a.servers() + "/0," + b.servers() + "/1", GetParam()), 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "ALL OK")) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "count 2")) << r.out;
  EXPECT_TRUE(has(r.out, "p2p 0-1 5")) << r.out;  // two servers: P2P_STATUS_NOT_SUPPORTED
}

INSTANTIATE_TEST_SUITE_P(Both, Nvml, ::testing::Values("shm", "tcp"));

// A server that dies under a program asking again and again: an error (GPU_IS_LOST) at once,
// never a hang.
TEST(NvmlLiveness, KilledServerIsLostWithinSeconds) {
  Daemon d;
  Child c = spawn({RGPU_NVML_CHECK, "lost"}, nvml_env(d.servers(), "tcp"));
  ASSERT_TRUE(c.wait_line("READY", 30)) << "nvml_check never got its first answer";
  kill(d.pid(), SIGKILL);
  std::string line;
  ASSERT_TRUE(c.wait_line("LOST", 8, &line)) << "no error within 8 s of the server's death";
  EXPECT_TRUE(has(line, "LOST 15 ")) << line;  // NVML_ERROR_GPU_IS_LOST
}

// A server that stops answering (its session process stopped): GPU_IS_LOST within RGPU_TIMEOUT.
TEST(NvmlLiveness, SilentServerIsLostWithinTimeout) {
  Daemon d;
  Env env = nvml_env(d.servers(), "tcp");
  env["RGPU_TIMEOUT"] = "2";
  Child c = spawn({RGPU_NVML_CHECK, "lost"}, env);
  ASSERT_TRUE(c.wait_line("READY", 30)) << "nvml_check never got its first answer";
  auto sessions = live_children(d.pid());
  ASSERT_EQ(sessions.size(), 1u);
  kill(sessions[0], SIGSTOP);
  std::string line;
  const bool lost = c.wait_line("LOST", 8, &line);
  kill(sessions[0], SIGCONT);
  ASSERT_TRUE(lost) << "no error within 8 s of the server falling silent (RGPU_TIMEOUT=2)";
  EXPECT_TRUE(has(line, "LOST 15 ")) << line;
}

// A query link is no session: with --max-sessions 1 and an NVML program connected, a CUDA program
// still gets its session.
TEST(NvmlLiveness, QueryLinkIsNotCountedAsSession) {
  Daemon d({"--max-sessions", "1"});
  Child c = spawn({RGPU_NVML_CHECK, "lost"}, nvml_env(d.servers(), "tcp"));
  ASSERT_TRUE(c.wait_line("READY", 30));
  Env env = d.client_env();
  Result r = run({cuda_program("mem_info")}, env, 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
}

// `rgpu run` puts rgpu's lib directory first: the program's dlopen("libnvidia-ml.so.1") finds
// rgpu's (no LD_LIBRARY_PATH given here).
TEST(RgpuRun, ProgramsFindRgpusNvml) {
  Daemon d;
  Result r = run({RGPU_CLI_PATH, "run", RGPU_NVML_CHECK, "list"}, {{"RGPU_SERVERS", d.servers()}},
                 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "ALL OK")) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "count 1")) << r.out;
}

TEST(RgpuLs, PrintsWhatNvmlAnswers) {
  Daemon d({"--host-gpus", "2", "--host-capacity", "2GiB"});
  const std::string s = d.servers();
  Result r = run({RGPU_CLI_PATH, "ls"}, {{"RGPU_SERVERS", s + "/0," + s + "/1"}}, 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out,
                  "0  rgpu host backend (test double, no GPU)  "
                  "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf  00000000:01:00.0  cc 9.0  "
                  "0.0/2.0 GiB used  util 0%  temp n/a  power n/a  " +
                      s + " (shm)"))
      << r.out;
  EXPECT_TRUE(has(r.out,
                  "1  rgpu host backend (test double, no GPU)  "
                  "GPU-a1a2a3a4-a5a6-a7a8-a9aa-abacadaeafb0  00000000:02:00.0"))
      << r.out;
  // A device whose server is gone: said so, and the exit status tells.
  Result gone = run({RGPU_CLI_PATH, "ls"}, {{"RGPU_SERVERS", s + "/0,127.0.0.1:1/0"}}, 60);
  EXPECT_EQ(gone.status, 1) << gone.out << gone.err;
  EXPECT_TRUE(has(gone.out, "1  127.0.0.1:1/0  unavailable")) << gone.out;
}

}  // namespace
