// NVIDIA's own libcudart.so.13 (from the toolkit) running on rgpu's libcuda.so.1 against rgpud's
// host backend: the private export tables (frontend/cuda/export_tables.cc), the integrity check,
// cuGetProcAddress and the driver calls NVIDIA's runtime makes. Each program's output must equal
// its output through rgpu's own runtime.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

// A folder with NVIDIA's runtime and rgpu's driver, and nothing else.
std::string nvidia_runtime_dir() {
  static std::string dir = [] {
    char tmpl[] = "/tmp/rgpu-nvrt-XXXXXX";
    std::string d = mkdtemp(tmpl);
    EXPECT_EQ(symlink(RGPU_NVIDIA_CUDART, (d + "/libcudart.so.13").c_str()), 0);
    EXPECT_EQ(symlink(RGPU_LIB_PATH "/libcuda.so.1", (d + "/libcuda.so.1").c_str()), 0);
    return d;
  }();
  return dir;
}

struct Case {
  const char* program;
  const char* transport;
};

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
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam().transport;
  Result ours = run({cuda_program(GetParam().program)}, env, 60);
  ASSERT_EQ(ours.status, 0) << ours.out << ours.err;
  env["LD_LIBRARY_PATH"] = nvidia_runtime_dir();
  Result theirs = run({cuda_program(GetParam().program)}, env, 60);
  EXPECT_EQ(theirs.status, 0) << theirs.out << theirs.err;
  EXPECT_EQ(theirs.out, ours.out) << theirs.err;
  EXPECT_EQ(theirs.err.find("integrity"), std::string::npos) << theirs.err;
}

INSTANTIATE_TEST_SUITE_P(
    Programs, NvidiaRuntime,
    ::testing::Values(Case{"memcpy_roundtrip", "tcp"}, Case{"memcpy_roundtrip", "shm"},
                      Case{"kernels_basic", "tcp"}, Case{"kernels_basic", "shm"},
                      Case{"errors", "tcp"}, Case{"pointer_attrs", "tcp"},
                      Case{"async_streams", "tcp"}, Case{"async_streams", "shm"},
                      Case{"kernels_symbols", "tcp"}, Case{"kernels_api", "tcp"},
                      Case{"graphs", "tcp"}, Case{"graphs", "shm"}, Case{"graphs_query", "tcp"},
                      Case{"graphs_more", "tcp"}),
    [](const ::testing::TestParamInfo<Case>& i) {
      return std::string(i.param.program) + "_" + i.param.transport;
    });

}  // namespace
