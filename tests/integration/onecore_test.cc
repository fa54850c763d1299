// One client core per process (client/core_table.h): rgpu's libcudart.so.13 runs on the client
// core of rgpu's libcuda.so.1, so runtime and driver calls share devices, contexts, allocations,
// streams and events (tests/cuda/mixed_apis.cpp); a libcuda.so.1 that is not rgpu's is named and
// refused; and rgpud never runs on rgpu's own libcuda.so.1.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

class OneCore : public ::testing::TestWithParam<const char*> {};

// Two virtual devices (two names of the daemon's GPU), so that a context made current through the
// driver on device 1 must be what the runtime reports.
TEST_P(OneCore, RuntimeAndDriverShareObjects) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  env["RGPU_SERVERS"] = d.servers() + "," + d.servers();
  Result r = run({cuda_program("mixed_apis")}, env, 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("mixed_apis: all passed"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out << r.err;
  // One core: one set of address-window reservations, so none of them failed.
  EXPECT_EQ(r.err.find("RGPU_VA_BASE"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not rgpu's"), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Transports, OneCore, ::testing::Values("tcp", "shm"));

// rgpu's runtime in a process whose libcuda.so.1 is another one (the toolkit's stub, loaded
// first): it names that library and offers no devices rather than running a second core.
TEST(OneCoreForeignDriver, RuntimeNamesTheLibraryAndRefuses) {
  Daemon d;
  Env env = d.client_env();
  std::string stub = RGPU_NVIDIA_CUDART;  // <toolkit>/lib64/libcudart.so.13
  stub = stub.substr(0, stub.rfind('/')) + "/stubs/libcuda.so";
  env["LD_PRELOAD"] = stub;
  Result r = run({cuda_program("memcpy_roundtrip")}, env, 60);
  EXPECT_NE(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("is not rgpu's"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stubs/libcuda.so"), std::string::npos) << r.err;
}

// rgpud with rgpu's lib directory first on LD_LIBRARY_PATH: its cuda backend passes over rgpu's
// libcuda.so.1 and, with no NVIDIA driver on this machine, says so and exits (no recursion into
// rgpu's client, no hang).
TEST(OneCoreDaemon, CudaBackendRefusesRgpusDriver) {
  for (const char* p : {"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1"})
    if (access(p, R_OK) == 0) GTEST_SKIP() << "an NVIDIA driver is installed (" << p << ")";
  Result r = run({RGPUD_PATH, "--listen", "127.0.0.1:0", "--backend", "cuda"},
                 {{"LD_LIBRARY_PATH", RGPU_LIB_PATH}, {"RGPU_SERVERS", "127.0.0.1:1"}}, 20);
  EXPECT_NE(r.status, 0) << r.out << r.err;
  EXPECT_LT(r.status, 128) << "rgpud was killed or crashed: " << r.err;
  EXPECT_NE(r.err.find("rgpu's own client library"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(std::string(RGPU_LIB_PATH) + "/libcuda.so.1"), std::string::npos) << r.err;
}

}  // namespace
