// NVIDIA's own libcudart.so.13 (from the toolkit) running on rgpu's libcuda.so.1 against rgpud's
// host backend: the private export tables (frontend/cuda/export_tables.cc), the integrity check,
// cuGetProcAddress and the driver calls NVIDIA's runtime makes. Each program's output must equal
// its output through rgpu's own runtime.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

// cuSOLVER's and cuSPARSE's runtimes load hundreds of modules at their first call, which takes
// minutes under the sanitizers: there the library checks cover cuBLAS and cuFFT (the normal build
// runs them all).
#ifdef RGPU_SANITIZER_PRELOAD
constexpr bool kSanitized = true;
#define RGPU_LIBS_MODE "handles-quick"
#else
constexpr bool kSanitized = false;
#define RGPU_LIBS_MODE "handles"
#endif

struct Case {
  const char* program;
  const char* transport;
  std::vector<std::string> args = {};  // the program's arguments (a mode)
  int gpus = 1;                        // rgpud --host-gpus; every GPU is a virtual device
  int seconds = 60;                    // each run's limit
};

// What gtest prints for a case (instead of its bytes).
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.program << " over " << c.transport;
  for (const std::string& a : c.args) *os << ' ' << a;
  if (c.gpus > 1) *os << " (" << c.gpus << " GPUs)";
}

class NvidiaRuntime : public ::testing::TestWithParam<Case> {};

// A program with NVIDIA's runtime linked in statically: only rgpu's libcuda.so.1 is looked up.
class NvidiaStaticRuntime : public ::testing::TestWithParam<Case> {};

TEST_P(NvidiaStaticRuntime, SameOutputAsRgpusRuntime) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam().transport;
  Result ours = run({cuda_program(GetParam().program)}, env, 60);
  ASSERT_EQ(ours.status, 0) << ours.out << ours.err;
  Result theirs = run({cuda_program(std::string(GetParam().program) + "_static")}, env, 60);
  EXPECT_EQ(theirs.status, 0) << theirs.out << theirs.err;
  EXPECT_EQ(theirs.out, ours.out) << theirs.err;
}

INSTANTIATE_TEST_SUITE_P(Programs, NvidiaStaticRuntime,
                         ::testing::Values(Case{"memcpy_roundtrip", "tcp"},
                                           Case{"kernels_basic", "shm"},
                                           Case{"async_streams", "tcp"}, Case{"errors", "shm"}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.program) + "_" + i.param.transport;
                         });

TEST_P(NvidiaRuntime, SameOutputAsRgpusRuntime) {
  const Case& c = GetParam();
  std::vector<std::string> daemon_args;
  if (c.gpus > 1) daemon_args = {"--host-gpus", std::to_string(c.gpus)};
  Daemon d(daemon_args);
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = c.transport;
  if (c.gpus > 1) {
    std::string servers;
    for (int i = 0; i < c.gpus; ++i)
      servers += (i ? "," : "") + d.servers() + "/" + std::to_string(i);
    env["RGPU_SERVERS"] = servers;
  }
  std::vector<std::string> argv = {cuda_program(c.program)};
  argv.insert(argv.end(), c.args.begin(), c.args.end());
  Result ours = run(argv, env, c.seconds);
  ASSERT_EQ(ours.status, 0) << ours.out << ours.err;
  env["LD_LIBRARY_PATH"] = nvidia_runtime_dir();
  Result theirs = run(argv, env, c.seconds);
  EXPECT_EQ(theirs.status, 0) << theirs.out << theirs.err;
  EXPECT_EQ(theirs.out, ours.out) << theirs.err;
  EXPECT_EQ(theirs.err.find("integrity"), std::string::npos) << theirs.err;
  // No private-table slot rgpu lacks was called (the tools hooks are called only where the
  // runtime reads a nonzero "subscribed" word, which must never be).
  EXPECT_EQ(theirs.err.find("rgpu does not provide it"), std::string::npos) << theirs.err;
}

INSTANTIATE_TEST_SUITE_P(
    Programs, NvidiaRuntime,
    ::testing::Values(
        Case{"memcpy_roundtrip", "tcp"}, Case{"memcpy_roundtrip", "shm"},
        Case{"kernels_basic", "tcp"}, Case{"kernels_basic", "shm"}, Case{"errors", "tcp"},
        Case{"pointer_attrs", "tcp"}, Case{"async_streams", "tcp"}, Case{"async_streams", "shm"},
        Case{"kernels_symbols", "tcp"}, Case{"devmem", "tcp"}, Case{"launch", "tcp"},
        Case{"arrays", "tcp"}, Case{"arrays", "shm"}, Case{"misc", "tcp"},
        Case{"pools", "tcp", {"pools"}}, Case{"managed", "tcp", {"basic"}},
        Case{"managed", "shm", {"sparse"}}, Case{"pools", "tcp", {"devices"}, 2},
        Case{"pools", "shm", {"mapped"}}, Case{"kernels_api", "tcp"}, Case{"kernels_printf", "tcp"},
        Case{"async_stress", "tcp", {}, 2}, Case{"multi_gpu", "tcp", {}, 2},
        Case{"va_windows", "tcp"}, Case{"stream_waits", "tcp", {"stream"}},
        Case{"stream_waits", "shm", {"event"}}, Case{"stream_waits", "tcp", {"d2h"}},
        Case{"stream_waits", "tcp", {"h2d"}}, Case{"stream_waits", "tcp", {"free"}},
        Case{"limits", "tcp", {"streams", "4"}}, Case{"limits", "tcp", {"events", "5"}},
        Case{"limits", "tcp", {"malloc", "64", "4"}}, Case{"mem_info", "tcp"},
        Case{"device_query", "tcp"}, Case{"flood_async", "tcp", {"200", "4096"}},
        Case{"overlap", "tcp"}, Case{"graphs", "tcp"}, Case{"graphs", "shm"},
        Case{"graphs_query", "tcp"}, Case{"graphs_more", "tcp"}, Case{"graphs_mem", "tcp"},
        Case{"graphs_cond", "tcp"}, Case{"graphs_cond", "shm"},
        // cuSOLVER's and cuSPARSE's runtimes load hundreds of modules at their first call
        Case{"nvidia_libs", "tcp", {RGPU_LIBS_MODE}, 1, 140},
        Case{"nvidia_libs", "shm", {RGPU_LIBS_MODE}, 1, 140}, Case{"vmm_runtime", "tcp"},
        Case{"vmm_runtime", "shm"},
        // __managed__ variables and cuLibraryGetManaged under NVIDIA's runtime
        Case{"managed_vars", "tcp", {RGPU_CUDA_BIN "/managed_lib.fatbin"}}),
    [](const ::testing::TestParamInfo<Case>& i) {
      std::string name = std::string(i.param.program) + "_" + i.param.transport;
      for (std::string a : i.param.args) {
        if (a.rfind(RGPU_CUDA_BIN "/", 0) == 0) a = a.substr(sizeof(RGPU_CUDA_BIN));  // a file
        name += '_';
        for (char ch : a) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      }
      return name;
    });

}  // namespace

namespace {

// NVIDIA's cuBLAS, cuFFT, cuSOLVER and cuSPARSE (loaded from the toolkit, unmodified) make
// handles, plans and descriptors, answer workspace and buffer sizes, copy matrices and take
// streams on rgpu's driver, under either runtime, and every private export table they ask for is
// served (none refused) and no driver entry point they call is one of rgpu's unsupported stubs.
// (NVIDIA's runtime may still call the tools-hook slots rgpu leaves unfilled, for profilers:
// docs/compatibility.md.)
TEST(NvidiaLibraries, HandlesPlansAndCopiesWithEveryTableServed) {
  Daemon d;
  Env env = d.client_env();
  for (bool nvidia_runtime : {false, true}) {
    if (nvidia_runtime) env["LD_LIBRARY_PATH"] = nvidia_runtime_dir();
    Result r = run({cuda_program("nvidia_libs"), RGPU_LIBS_MODE}, env, 140);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("cufftPlanMany"), std::string::npos) << r.out;
    if (!kSanitized) {
      EXPECT_NE(r.out.find("ok   cusolverDnDgetrf_bufferSize"), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("ok   cusparseSpMV_bufferSize"), std::string::npos) << r.out;
    }
    EXPECT_NE(r.out.find("nvidia_libs: passed"), std::string::npos) << r.out;
    EXPECT_EQ(r.err.find("is not provided by rgpu"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("is not supported by rgpu"), std::string::npos) << r.err;  // no stub
  }
}

// CUDA IPC across two processes, both on NVIDIA's runtime and rgpu's driver: the exporter's
// memory handle opens in the importer (cuIpcGetMemHandle / cuIpcOpenMemHandle).
TEST(NvidiaRuntimeIpc, MemoryHandleSharedBetweenProcesses) {
  Daemon d;
  Env env = d.client_env();
  env["LD_LIBRARY_PATH"] = nvidia_runtime_dir();
  Child exporter = spawn({cuda_program("ipc"), "export"}, env);
  std::string line;
  ASSERT_TRUE(exporter.wait_line("handle ", 60, &line)) << "the exporter printed no handle";
  std::string hex = line.substr(7);
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r')) hex.pop_back();
  ASSERT_EQ(hex.size(), 128u) << line;
  Result imp = run({cuda_program("ipc"), "import", hex}, env, 60);
  EXPECT_EQ(imp.status, 0) << imp.out << imp.err;
  EXPECT_NE(imp.out.find("ipc import: passed"), std::string::npos) << imp.out << imp.err;
  ASSERT_TRUE(exporter.wait_line("ipc export: ", 60, &line)) << "the exporter did not finish";
  EXPECT_NE(line.find("passed"), std::string::npos) << line;
  exporter.kill_and_wait(0);
}

}  // namespace
