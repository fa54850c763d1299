// rgpud's --gpus option (several daemons per machine, each serving its own GPUs): bad lists and
// the wrong backend are refused with a clear message before anything listens.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

Result rgpud(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {RGPUD_PATH, "--listen", "127.0.0.1:0"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, {}, 30);
}

TEST(DaemonGpus, ABadListIsRefused) {
  Result r = rgpud({"--gpus", "0,x"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("'x' is neither a GPU number nor a GPU-/MIG- UUID"), std::string::npos)
      << r.err;
  r = rgpud({"--gpus", "1,01"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("'01' is named twice"), std::string::npos) << r.err;
  r = rgpud({"--gpus", ""});
  EXPECT_EQ(r.status, 2) << r.err;
}

TEST(DaemonGpus, TheHostBackendHasItsOwnOption) {
  Result r = rgpud({"--backend", "host", "--gpus", "0"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--host-gpus"), std::string::npos) << r.err;
}

TEST(DaemonGpus, WithoutAUsableGpuItIsAnErrorNotTheHostBackend) {
  // Auto with --gpus must not fall back to the host backend when no GPU is usable.
  if (access("/dev/nvidiactl", F_OK) == 0) GTEST_SKIP() << "this machine has an NVIDIA driver";
  Result r = rgpud({"--gpus", "0"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("cannot use the cuda backend"), std::string::npos) << r.err;
}

}  // namespace
