// Page-locked memory given to a kernel through rgpud's host backend (tests/cuda/pinned_args.cu):
// over shm the session maps it for its GPU; over TCP a launch naming memory the GPU cannot reach
// is refused with a clear error instead of faulting on the GPU.
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

Result run_pinned(const std::string& transport, const std::string& mode) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = transport;
  Result r = run({cuda_program("pinned_args"), mode}, env, 60);
  EXPECT_TRUE(d.alive());
  return r;
}

void expect_passed(const Result& r, const std::string& mode) {
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("pinned_args " + mode + ": passed"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out << r.err;
}

TEST(PinnedKernelArguments, KernelsUsePageLockedMemoryOverSharedMemory) {
  expect_passed(run_pinned("shm", "local"), "local");
}

TEST(PinnedKernelArguments, UnreachablePageLockedMemoryIsRefusedByNameOverTcp) {
  Result r = run_pinned("tcp", "network");
  expect_passed(r, "network");
  // The reason names the call, the kernel and the ways around it, once.
  const std::string what =
      "kernel launch of pools_fill: parameter at offset 0 points into "
      "page-locked host memory";
  const size_t at = r.err.find(what);
  EXPECT_NE(at, std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cudaHostAllocMapped"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(what, at + 1), std::string::npos) << "logged once: " << r.err;
}

}  // namespace
