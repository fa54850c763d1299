// End to end without a GPU: rgpud --backend host on loopback, CUDA programs built by nvcc with
// -cudart shared, run against rgpu's libcudart.so.13.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <regex>
#include <thread>

#include "common/cuda_errors.h"
#include "proto/frame.h"
#include "tests/integration/harness.h"
#include "transport/tcp/tcp.h"

using namespace rgpu;
using namespace rgpu::test;

namespace {

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

void expect_pass(const Result& r, const std::string& name) {
  EXPECT_EQ(r.status, 0) << name << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(name + ": passed"), std::string::npos) << r.out;
}

std::string write_token(const std::string& token) {
  char path[] = "/tmp/rgpu-token-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_EQ(write(fd, token.data(), token.size()), static_cast<ssize_t>(token.size()));
  close(fd);
  chmod(path, 0600);
  return path;
}

uint64_t free_bytes(const Daemon& d, uint64_t* total = nullptr) {
  Result r = run({cuda_program("mem_info")}, d.client_env());
  EXPECT_EQ(r.status, 0) << r.err;
  unsigned long long f = 0, t = 0;
  EXPECT_EQ(sscanf(r.out.c_str(), "free %llu total %llu", &f, &t), 2) << r.out;
  if (total) *total = t;
  return f;
}

}  // namespace

class Programs : public ::testing::TestWithParam<const char*> {};

TEST_P(Programs, PassThroughTheHostBackend) {
  Daemon d({"--host-capacity", "1GiB"});
  std::string name = GetParam();
  std::string expect =
      name.substr(0, name.rfind("_ptds") == std::string::npos ? name.size() : name.rfind("_ptds"));
  expect_pass(run({cuda_program(name)}, d.client_env()), expect);
  EXPECT_TRUE(d.alive());
}
INSTANTIATE_TEST_SUITE_P(Cuda, Programs,
                         ::testing::Values("memcpy_roundtrip", "errors", "pointer_attrs",
                                           "device_query", "kernels_basic", "kernels_symbols",
                                           "kernels_api", "kernels_launch_loop", "async_streams",
                                           "async_streams_ptds"));

// Threads, streams and several GPUs of one server.
class TwoGpuPrograms : public ::testing::TestWithParam<const char*> {};

TEST_P(TwoGpuPrograms, PassWithTwoGpusOnOneServer) {
  Daemon d({"--host-gpus", "2"});
  Env env = d.client_env();
  env["RGPU_SERVERS"] = d.servers() + "/0," + d.servers() + "/1";
  std::string name = GetParam();
  std::string expect =
      name.substr(0, name.rfind("_ptds") == std::string::npos ? name.size() : name.rfind("_ptds"));
  expect_pass(run({cuda_program(name)}, env), expect);
  EXPECT_TRUE(d.alive());
}
INSTANTIATE_TEST_SUITE_P(Async, TwoGpuPrograms,
                         ::testing::Values("async_stress", "async_stress_ptds", "multi_gpu"));

TEST(Kernels, DevicePrintfArrivesInOrderBeforeTheSyncReturns) {
  Daemon d;
  Result r = run({cuda_program("kernels_printf")}, d.client_env());
  expect_pass(r, "kernels_printf");
  std::string want;
  for (int round = 0; round < 3; ++round) {
    want += "host before round " + std::to_string(round) + "\n";
    for (int i = 0; i < 4; ++i) {
      char line[80];
      snprintf(line, sizeof line, "round %d: line %d from the device (%.2f)\n", round, i, i * 0.5);
      want += line;
    }
    want += "ok   cudaDeviceSynchronize()                          cudaSuccess\n";
    want += "host after round " + std::to_string(round) + "\n";
  }
  want += "round 9: line 0 from the device (0.00)\nround 9: line 1 from the device (0.50)\n";
  EXPECT_EQ(r.out.substr(0, want.size()), want);
}

TEST(Kernels, AKernelWithoutAHostImplementationFailsClearly) {
  Daemon d;
  Result r = run({cuda_program("kernel_no_host_impl")}, d.client_env());
  expect_pass(r, "kernel_no_host_impl");
  EXPECT_NE(r.err.find("no host implementation of kernel nobody_implements_me"), std::string::npos)
      << r.err;
}

TEST(Kernels, ASecondProcessSendsOnlyTheModuleHash) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_LOG"] = "info";
  Result first = run({cuda_program("kernels_api")}, env);
  expect_pass(first, "kernels_api");
  EXPECT_NE(first.err.find("bytes to"), std::string::npos) << first.err;
  Result second = run({cuda_program("kernels_api")}, env);
  expect_pass(second, "kernels_api");
  EXPECT_NE(second.err.find("by hash"), std::string::npos) << second.err;
  EXPECT_EQ(second.err.find("bytes to"), std::string::npos) << second.err;
}

TEST(Integration, UnsupportedCallIsAnErrorLoggedOnceByName) {
  Daemon d;
  Result r = run({cuda_program("unsupported")}, d.client_env());
  expect_pass(r, "unsupported");
  EXPECT_EQ(count(r.err, "cudaGraphicsUnregisterResource is not supported"), 1u) << r.err;
}

TEST(Integration, SeveralGpusOnOneServerAreSeveralDevices) {
  Daemon d({"--host-gpus", "2"});
  Env env = d.client_env();
  env["RGPU_SERVERS"] = d.servers() + "/0," + d.servers() + "/1";
  expect_pass(run({cuda_program("device_query")}, env), "device_query");
  env["RGPU_SERVERS"] = d.servers() + "/1";
  expect_pass(run({cuda_program("memcpy_roundtrip")}, env), "memcpy_roundtrip");
  env["RGPU_SERVERS"] = d.servers() + "/5";
  Result r = run({cuda_program("mem_info")}, env);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("the server has 2 GPU(s)"), std::string::npos) << r.err;
}

TEST(Integration, TokenIsRequiredAndChecked) {
  std::string token_file = write_token("correct horse battery staple");
  Daemon d({"--token-file", token_file});
  Env env = d.client_env();

  Result none = run({cuda_program("mem_info")}, env);
  EXPECT_NE(none.status, 0);
  EXPECT_NE(none.err.find("requires authentication: set RGPU_TOKEN"), std::string::npos)
      << none.err;
  EXPECT_NE(none.out.find("cudaErrorNotPermitted"), std::string::npos) << none.out;

  env["RGPU_TOKEN"] = "wrong";
  Result wrong = run({cuda_program("mem_info")}, env);
  EXPECT_NE(wrong.status, 0);
  EXPECT_NE(wrong.err.find("authentication failed"), std::string::npos) << wrong.err;

  env["RGPU_TOKEN"] = "correct horse battery staple";
  Result ok = run({cuda_program("mem_info")}, env);
  EXPECT_EQ(ok.status, 0) << ok.err;
  expect_pass(run({cuda_program("errors")}, env), "errors");
  unlink(token_file.c_str());
}

TEST(Integration, WrongProtocolVersionIsRefusedWithBothVersions) {
  Daemon d;
  auto conn = transport::tcp_connect("127.0.0.1", d.port());
  proto::HelloReq hello;
  hello.version = 77;
  std::vector<uint8_t> body = proto::encode_message(hello);
  proto::FrameHeader h{static_cast<uint16_t>(proto::MsgId::Hello), 0,
                       static_cast<uint32_t>(body.size()), 1, 0};
  uint8_t raw[proto::kHeaderSize];
  proto::encode_header(h, raw);
  conn->send(raw, sizeof raw);
  conn->send(body.data(), body.size());
  conn->recv(raw, sizeof raw);
  proto::FrameHeader rh = proto::decode_header(raw);
  std::vector<uint8_t> reply(rh.body_len);
  conn->recv(reply.data(), reply.size());
  proto::HelloRep rep;
  std::string msg;
  EXPECT_EQ(proto::decode_reply(reply, rep, msg), err::InsufficientDriver);
  EXPECT_NE(msg.find("version 77"), std::string::npos) << msg;
  EXPECT_NE(msg.find("version " + std::to_string(proto::kProtocolVersion)), std::string::npos)
      << msg;
  EXPECT_TRUE(d.alive());
}

TEST(Integration, MalformedInputDoesNotHurtTheDaemon) {
  Daemon d;
  for (int i = 0; i < 5; ++i) {
    auto conn = transport::tcp_connect("127.0.0.1", d.port());
    std::vector<uint8_t> junk(64 + i * 100, static_cast<uint8_t>(0x41 + i));
    conn->send(junk.data(), junk.size());
  }
  {  // a header that announces an oversized body, then silence
    auto conn = transport::tcp_connect("127.0.0.1", d.port());
    uint8_t raw[proto::kHeaderSize];
    proto::encode_header({1, 0, 0xffffffffu, 1, 0}, raw);
    conn->send(raw, sizeof raw);
  }
  expect_pass(run({cuda_program("device_query")}, d.client_env()), "device_query");
  EXPECT_TRUE(d.alive());
}

TEST(Integration, SigkilledClientsMemoryIsFreedAndTheDaemonKeepsServing) {
  Daemon d({"--host-capacity", "512MiB"});
  uint64_t total = 0;
  EXPECT_EQ(free_bytes(d, &total), 512ull << 20);
  Child holder = spawn({cuda_program("hold_memory"), "300"}, d.client_env());
  ASSERT_TRUE(holder.wait_line("holding", 60));
  EXPECT_LE(free_bytes(d), (512ull - 300) << 20);
  holder.kill_and_wait(SIGKILL);
  bool released = false;
  for (int i = 0; i < 100 && !released; ++i) {
    released = free_bytes(d) == total;
    if (!released) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(released);
  expect_pass(run({cuda_program("memcpy_roundtrip")}, d.client_env()), "memcpy_roundtrip");
  EXPECT_TRUE(d.alive());
}

TEST(Integration, ListeningBeyondLoopbackRequiresAToken) {
  Result r = run({RGPUD_PATH, "--backend", "host", "--listen", "0.0.0.0:0"}, {}, 20);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--token-file"), std::string::npos) << r.err;
  std::string token_file = write_token("t");
  chmod(token_file.c_str(), 0644);
  Result loose = run({RGPUD_PATH, "--backend", "host", "--token-file", token_file}, {}, 20);
  EXPECT_EQ(loose.status, 2);
  EXPECT_NE(loose.err.find("group or others"), std::string::npos) << loose.err;
  unlink(token_file.c_str());
}

TEST(Integration, CudaBackendWithoutAGpuSaysSo) {
  if (access("/dev/nvidia0", F_OK) == 0) GTEST_SKIP() << "this machine has a GPU";
  Result r = run({RGPUD_PATH, "--backend", "cuda", "--listen", "127.0.0.1:0"}, {}, 30);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot use the cuda backend"), std::string::npos) << r.err;
}

TEST(Integration, UnreachableServerIsAClearError) {
  auto l = transport::tcp_listen("127.0.0.1", 0);
  uint16_t port = l->port();
  l.reset();
  Env env = {{"RGPU_SERVERS", "127.0.0.1:" + std::to_string(port)},
             {"LD_LIBRARY_PATH", RGPU_LIB_PATH}};
  Result r = run({cuda_program("mem_info")}, env);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("cudaErrorDevicesUnavailable"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("cannot reach rgpud"), std::string::npos) << r.err;
}

TEST(Integration, RgpuCliListsPingsAndRuns) {
  Daemon d;
  Env env = {{"RGPU_SERVERS", d.servers()}};
  Result ls = run({RGPU_CLI_PATH, "ls"}, env);
  EXPECT_EQ(ls.status, 0) << ls.err;
  EXPECT_NE(ls.out.find("rgpu host backend"), std::string::npos) << ls.out;
  Result ping = run({RGPU_CLI_PATH, "ping", "-n", "50"}, env);
  EXPECT_EQ(ping.status, 0) << ping.err;
  EXPECT_NE(ping.out.find("median"), std::string::npos) << ping.out;
  // `rgpu run` puts the library on LD_LIBRARY_PATH itself.
  Result prog = run({RGPU_CLI_PATH, "run", "--", cuda_program("mem_info")}, env);
  EXPECT_EQ(prog.status, 0) << prog.err;
  EXPECT_NE(prog.out.find("free "), std::string::npos);
}

// The bulk pipeline under every chunk size and depth setting: odd sizes and offsets, 2-D copies,
// asynchronous copies on several streams and threads.
struct PipelineSetting {
  const char* chunk;
  const char* depth;
};
class Pipeline : public ::testing::TestWithParam<PipelineSetting> {};

TEST_P(Pipeline, CopiesStayByteExact) {
  Daemon d({"--chunk-size", GetParam().chunk, "--pipeline-depth", GetParam().depth, "--host-gpus",
            "2", "--host-capacity", "1GiB"});
  Env env = d.client_env();
  expect_pass(run({cuda_program("memcpy_roundtrip")}, env), "memcpy_roundtrip");
  expect_pass(run({cuda_program("async_streams")}, env), "async_streams");
  env["RGPU_SERVERS"] = d.servers() + "/0," + d.servers() + "/1";
  expect_pass(run({cuda_program("async_stress")}, env), "async_stress");
  env["RGPU_EAGER_BYTES"] = "0";  // every host-to-device copy waits for the server
  expect_pass(run({cuda_program("memcpy_roundtrip")}, env), "memcpy_roundtrip");
  EXPECT_TRUE(d.alive());
}
INSTANTIATE_TEST_SUITE_P(Bulk, Pipeline,
                         ::testing::Values(PipelineSetting{"4KiB", "1"},
                                           PipelineSetting{"64KiB", "3"},
                                           PipelineSetting{"1MiB", "2"},
                                           PipelineSetting{"32MiB", "16"}),
                         [](const ::testing::TestParamInfo<PipelineSetting>& i) {
                           return std::string("chunk_") + i.param.chunk + "_depth_" + i.param.depth;
                         });

TEST(Bulk, AClientKilledInTheMiddleOfAGigabyteLeavesTheServerHealthy) {
  Daemon d({"--host-capacity", "2GiB"});
  uint64_t total = 0;
  free_bytes(d, &total);
  for (int round = 0; round < 3; ++round) {
    Child c = spawn({cuda_program("big_transfer")}, d.client_env());
    ASSERT_TRUE(c.wait_line("starting", 60));
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + round * 400));
    c.kill_and_wait(SIGKILL);
    bool released = false;
    for (int i = 0; i < 100 && !released; ++i) {
      released = free_bytes(d) == total;
      if (!released) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_TRUE(released) << "round " << round;
    EXPECT_TRUE(d.alive());
  }
  expect_pass(run({cuda_program("memcpy_roundtrip")}, d.client_env()), "memcpy_roundtrip");
}

TEST(Bulk, BenchRunsAndWritesJson) {
  Daemon d;
  std::string json = "/tmp/rgpu-bench-test-" + std::to_string(getpid()) + ".json";
  Env env = {{"RGPU_SERVERS", d.servers()}};
  Result r = run({RGPU_CLI_PATH, "bench", "--max-size", "64KiB", "--json", json}, env, 300);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("sync call"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("h2d_pinned"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("native: skipped"), std::string::npos) << r.out;
  std::ifstream in(json);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"mode\": \"rgpu\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"mode\": \"link\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"op\": \"d2h_pageable\", \"bytes\": 16384"), std::string::npos) << text;
  // The graph rows: in the table with numbers, and in the JSON for both transports.
  for (const char* label : {"graph launches", "graph replay", "same on stream"}) {
    size_t at = r.out.find(std::string("\n") + label);
    ASSERT_NE(at, std::string::npos) << label << "\n" << r.out;
    std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    EXPECT_TRUE(std::regex_search(line, std::regex("^[a-z ]+ +- +- +[0-9.e+]+(/s| us) "))) << line;
  }
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("rgpu +tcp: graph launch\\+sync [0-9.]+ us, 102 calls\\+sync [0-9.]+ us")))
      << r.out;
  for (const char* op : {"graph_launch_rate", "graph_replay", "stream_replay"})
    for (const char* t : {"tcp", "shm"}) {
      std::regex entry(std::string("\\{\"op\": \"") + op +
                       "\", \"bytes\": 0, \"mode\": \"rgpu\", \"value\": ([0-9.e+]+), "
                       "\"unit\": \"[a-z/]+\", \"transport\": \"" +
                       t + "\"\\}");
      std::smatch m;
      ASSERT_TRUE(std::regex_search(text, m, entry)) << op << " " << t << "\n" << text;
      EXPECT_GT(std::stod(m[1]), 0) << op << " " << t;
    }
  unlink(json.c_str());
}

// Transports: shared memory is chosen for a server on this machine; TCP stays available.
class Transport : public ::testing::TestWithParam<const char*> {};

TEST_P(Transport, ProgramsPassOverEachTransport) {
  Daemon d({"--host-capacity", "1GiB"});
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  for (const char* p : {"memcpy_roundtrip", "async_streams", "kernels_basic", "kernels_printf"})
    expect_pass(run({cuda_program(p)}, env), p);
  Result ls =
      run({RGPU_CLI_PATH, "ls"}, {{"RGPU_SERVERS", d.servers()}, {"RGPU_TRANSPORT", GetParam()}});
  std::string want =
      std::string("(") + (std::string(GetParam()) == "auto" ? "shm" : GetParam()) + ")";
  EXPECT_NE(ls.out.find(want), std::string::npos) << ls.out;
}
INSTANTIATE_TEST_SUITE_P(Both, Transport, ::testing::Values("auto", "shm", "tcp"));

TEST(Transport, SharedMemoryNeedsALocalServerAndLeavesNoNames) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = "bogus";
  EXPECT_NE(run({cuda_program("mem_info")}, env).status, 0);
  // Segments are anonymous (memfd): nothing in /dev/shm another process could open.
  env["RGPU_TRANSPORT"] = "shm";
  Child holder = spawn({cuda_program("hold_memory"), "16"}, env);
  ASSERT_TRUE(holder.wait_line("holding", 60));
  Result shm = run({"/bin/sh", "-c", "ls /dev/shm | grep -c rgpu || true"}, {});
  EXPECT_EQ(shm.out, "0\n");
  holder.kill_and_wait(SIGKILL);
  EXPECT_TRUE(d.alive());
}

TEST(Transport, SharedMemoryOfAnotherUserNeedsAToken) {
  if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0)
    GTEST_SKIP() << "needs root and setpriv to run a client as another user";
  Result reach =
      run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c",
           "test -x '" + cuda_program("mem_info") + "' && test -r '" + std::string(RGPU_LIB_PATH) +
               "/libcudart.so.13'"});
  if (reach.status != 0) GTEST_SKIP() << "the build is not readable by another user here";
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = "shm";
  Result r = run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                  cuda_program("mem_info")},
                 env);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("may not use this rgpud over shared memory"), std::string::npos) << r.err;
  EXPECT_TRUE(d.alive());
}
