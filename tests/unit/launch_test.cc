// Launch attributes on the host backend (checked as the driver checks them, handed to the host
// kernel) and the images a library may be loaded from: raw cubins and PTX text are described like
// fat binaries, and malformed ones are refused naming what was wrong.
#include <gtest/gtest.h>

#include <string>

#include "backend/host/host_launch.h"
#include "fatbin/fatbin.h"
#include "tests/unit/image_builder.h"

using namespace rgpu::backend;
using namespace rgpu::fatbin;
using rgpu::test::CubinBuilder;

namespace {

LaunchDims dims(uint32_t grid, uint32_t block) {
  LaunchDims d;
  d.grid[0] = grid;
  d.block[0] = block;
  return d;
}

LaunchAttribute attr(uint32_t id, uint64_t v0, uint64_t v1 = 0, uint64_t v2 = 0) {
  LaunchAttribute a;
  a.id = id;
  a.v[0] = v0, a.v[1] = v1, a.v[2] = v2;
  return a;
}

TEST(HostLaunch, AttributesReachTheKernel) {
  rgpu_host_launch l{};
  HostLaunchPlan plan;
  Status s = plan_host_launch(dims(8, 64),
                              {attr(2, 1), attr(4, 2, 1, 1), attr(6, 1), attr(8, -1), attr(12, 77),
                               attr(7, 78, 0, 1), attr(1, 0x1000, 4096)},
                              l, plan);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(l.cooperative, 1);
  EXPECT_EQ(l.cluster[0], 2u);
  EXPECT_EQ(l.cluster[1], 1u);
  EXPECT_EQ(l.programmatic_serialization, 1);
  EXPECT_EQ(l.priority, -1);
  EXPECT_EQ(plan.events, (std::vector<uint64_t>{77, 78}));
  EXPECT_EQ(l.attributes,
            (1u << 1) | (1u << 2) | (1u << 4) | (1u << 6) | (1u << 7) | (1u << 8) | (1u << 12));
}

TEST(HostLaunch, ClustersMustDivideTheGridAndStayPortable) {
  rgpu_host_launch l{};
  HostLaunchPlan plan;
  Status s = plan_host_launch(dims(8, 64), {attr(4, 3, 1, 1)}, l, plan);
  EXPECT_EQ(s.code, 912);
  EXPECT_NE(s.message.find("does not divide"), std::string::npos) << s.message;
  s = plan_host_launch(dims(16, 64), {attr(4, 16, 1, 1)}, l, plan);
  EXPECT_EQ(s.code, 912);
  s = plan_host_launch(dims(8, 64), {attr(4, 0, 1, 1)}, l, plan);
  EXPECT_EQ(s.code, 912);
}

TEST(HostLaunch, CooperativeGridMustFitTheDevice) {
  rgpu_host_launch l{};
  HostLaunchPlan plan;
  // 132 SMs x 2 blocks of 1024 threads.
  EXPECT_TRUE(plan_host_launch(dims(264, 1024), {attr(2, 1)}, l, plan).ok());
  rgpu_host_launch l2{};
  Status s = plan_host_launch(dims(265, 1024), {attr(2, 1)}, l2, plan);
  EXPECT_EQ(s.code, 720);
  EXPECT_NE(s.message.find("at most 264"), std::string::npos) << s.message;
  // Not cooperative: any grid.
  rgpu_host_launch l3{};
  EXPECT_TRUE(plan_host_launch(dims(100000, 1024), {attr(2, 0)}, l3, plan).ok());
}

TEST(HostLaunch, UnknownAttributeIsRefused) {
  rgpu_host_launch l{};
  HostLaunchPlan plan;
  Status s = plan_host_launch(dims(1, 1), {attr(99, 0)}, l, plan);
  EXPECT_EQ(s.code, rgpu::err::InvalidValue);
  EXPECT_NE(s.message.find("99"), std::string::npos) << s.message;
}

TEST(HostLaunch, OccupancyQueries) {
  int32_t v = 0;
  EXPECT_TRUE(host_occupancy_cluster(1, dims(8, 128), {}, v).ok());
  EXPECT_EQ(v, 8);
  EXPECT_TRUE(host_occupancy_cluster(0, dims(8, 128), {attr(4, 2, 1, 1)}, v).ok());
  EXPECT_EQ(v, 132 * 16 / 2);
  EXPECT_FALSE(host_occupancy_cluster(0, dims(8, 0), {}, v).ok());
  uint64_t bytes = 0;
  EXPECT_TRUE(host_occupancy_dynamic_smem(1, 128, bytes).ok());
  EXPECT_EQ(bytes, 232448u);
  EXPECT_TRUE(host_occupancy_dynamic_smem(64, 128, bytes).ok());
  EXPECT_EQ(bytes, 0u);  // 64 blocks do not fit one SM
  EXPECT_FALSE(host_occupancy_dynamic_smem(0, 128, bytes).ok());
}

std::vector<uint8_t> text(const std::string& s) {
  std::vector<uint8_t> v(s.begin(), s.end());
  v.push_back(0);
  return v;
}

TEST(LibraryImages, RawCubinIsDescribed) {
  std::vector<uint8_t> cubin = rgpu::test::basic_cubin().build();
  ModuleInfo info = describe_image(cubin.data(), cubin.size());
  ASSERT_EQ(info.kernels.count("k"), 1u);
  EXPECT_EQ(info.kernels["k"], (KernelLayout{{Param{0, 8}, Param{8, 4}}}));
}

TEST(LibraryImages, PtxTextIsDescribed) {
  auto ptx = text(
      ".version 8.0\n.target sm_90\n.address_size 64\n"
      ".visible .entry lib_add(\n .param .u64 lib_add_param_0,\n .param .u32 lib_add_param_1\n)\n"
      "{ ret; }\n");
  ModuleInfo info = describe_image(ptx.data(), ptx.size());
  ASSERT_EQ(info.kernels.count("lib_add"), 1u);
  EXPECT_EQ(info.kernels["lib_add"], (KernelLayout{{Param{0, 8}, Param{8, 4}}}));
}

TEST(LibraryImages, MalformedImagesAreRefused) {
  auto expect_refused = [](std::vector<uint8_t> image, const char* what) {
    try {
      describe_image(image.data(), image.size());
      ADD_FAILURE() << "accepted: " << what;
    } catch (const FatbinError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  std::vector<uint8_t> no_nul = {'.', 'v', 'e', 'r'};
  expect_refused(no_nul, "neither a fat binary");
  auto trailing = text(".version 8.0\n.target sm_90\n");
  trailing.push_back('x');
  expect_refused(trailing, "after its terminating NUL");
  expect_refused(text("hello world"), "without .version");
  expect_refused(std::vector<uint8_t>(16, 0), "neither a fat binary");
  std::vector<uint8_t> cubin = rgpu::test::basic_cubin().build();
  cubin.resize(40);  // headers cut short
  try {
    describe_image(cubin.data(), cubin.size());
    ADD_FAILURE() << "a truncated cubin was accepted";
  } catch (const FatbinError&) {
  }
}

}  // namespace
