// CUDA arrays, texture and surface objects (issue 11, item 2) against rgpud's host backend, over
// TCP and shared memory: tests/cuda/arrays.cu checks every copy form byte by byte, texture
// fetches (point, normalized + linear, a mipmap level, a layer) and a surface write run by the
// host backend's test kernels through the texture and surface objects the server made.
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

class Arrays : public ::testing::TestWithParam<const char*> {};

}  // namespace

TEST_P(Arrays, CopiesTexturesSurfaces) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("arrays")}, env, 120);
  EXPECT_EQ(r.status, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("arrays: passed (0 failures)"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("ok   tex2D normalized coordinates, linear filtering between texels"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("ok   36 MiB host -> array -> host"), std::string::npos) << r.out;
  EXPECT_TRUE(d.alive());
}

INSTANTIATE_TEST_SUITE_P(Both, Arrays, ::testing::Values("tcp", "shm"));
