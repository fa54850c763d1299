// The driver API through rgpu's libcuda.so.1 against rgpud's host backend, over TCP and shared
// memory (tests/cuda/driver_api.cpp: devices, contexts, every copy and memset form, modules from
// a cubin, a fat binary and PTX with launches by argument pointers and by the `extra` buffer,
// libraries, streams, events, host functions, pointer attributes, cuGetProcAddress, errors), and
// an entry point rgpu does not implement answering CUDA_ERROR_NOT_SUPPORTED with its name logged.
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

class Driver : public ::testing::TestWithParam<const char*> {};

TEST_P(Driver, DriverApiProgramPasses) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("driver_api")}, env, 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("driver_api: passed"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out << r.err;
  // It ran on rgpu's library, not on anything else called libcuda.so.1.
  EXPECT_EQ(r.err.find("not supported by rgpu"), std::string::npos) << r.err;
}

// Run-time compilation (tests/cuda/nvrtc_jit.cpp): NVRTC's PTX and cubin, and nvJitLink's cubin
// from that PTX, loaded and launched through rgpu's driver.
TEST_P(Driver, NvrtcAndNvJitLinkModulesRun) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("nvrtc_jit")}, env, 120);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("nvrtc_jit: passed"), std::string::npos) << r.out << r.err;
}

// Private export-table slots NVIDIA's libraries call (tests/cuda/export_slots.cpp): TOOLS_CONTEXT
// slots 51 and 39 give a stream's handle and its number, equal to cuStreamGetId.
TEST_P(Driver, ExportTableSlotsServed) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("export_slots")}, env, 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("export_slots: passed"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.err.find("rgpu does not provide it"), std::string::npos) << r.err;
}

// Virtual memory management (tests/cuda/driver_vmm.cpp): mappings back to back used as one range.
TEST_P(Driver, VmmProgramPasses) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  env["DRIVER_VMM_BAD_HANDLES"] = "1";     // rgpu refuses handles that are none (NVIDIA's crashes)
  env["DRIVER_VMM_RESET"] = "1";           // and releases everything at a device reset
  env["DRIVER_VMM_FABRIC_REFUSED"] = "1";  // a fabric handle type is refused by name
  Result r = run({cuda_program("driver_vmm")}, env, 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("driver_vmm: passed"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.err.find("not supported by rgpu"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("CU_MEM_HANDLE_TYPE_FABRIC is not supported through rgpu"),
            std::string::npos)
      << r.err;
}

INSTANTIATE_TEST_SUITE_P(Transports, Driver, ::testing::Values("tcp", "shm"));

}  // namespace
