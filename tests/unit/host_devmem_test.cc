// The host backend's context settings and kernel failures (backend/host/host_devmem.h): what CI's
// devmem tests rely on when they set limits or make an assert fail.
#include "backend/host/host_devmem.h"

#include <gtest/gtest.h>

using rgpu::backend::Executor;
using rgpu::backend::HostDeviceState;
using Op = Executor::ConfigOp;

TEST(HostDeviceState, LimitsStartAtCudasDefaultsAndKeepWhatIsSet) {
  HostDeviceState s(2);
  uint64_t v = 0;
  ASSERT_TRUE(s.config(0, Op::GetLimit, 0, v).ok());  // cudaLimitStackSize
  EXPECT_EQ(v, 1024u);
  v = 8192;
  ASSERT_TRUE(s.config(0, Op::SetLimit, 0, v).ok());
  ASSERT_TRUE(s.config(0, Op::GetLimit, 0, v).ok());
  EXPECT_EQ(v, 8192u);
  ASSERT_TRUE(s.config(1, Op::GetLimit, 0, v).ok());  // per GPU
  EXPECT_EQ(v, 1024u);
  EXPECT_EQ(s.config(0, Op::GetLimit, 42, v).code, 1);  // cudaErrorInvalidValue, as natively
  EXPECT_EQ(s.config(0, Op::SetLimit, 42, v).code, 1);
  EXPECT_EQ(s.config(2, Op::GetLimit, 0, v).code, rgpu::err::InvalidDevice);
  s.reset(0);
  ASSERT_TRUE(s.config(0, Op::GetLimit, 0, v).ok());
  EXPECT_EQ(v, 1024u);
}

TEST(HostDeviceState, CacheConfigIsCheckedAndKept) {
  HostDeviceState s(1);
  uint64_t v = 2;  // cudaFuncCachePreferL1
  ASSERT_TRUE(s.config(0, Op::SetCacheConfig, 0, v).ok());
  v = 0;
  ASSERT_TRUE(s.config(0, Op::GetCacheConfig, 0, v).ok());
  EXPECT_EQ(v, 2u);
  v = 9;
  EXPECT_EQ(s.config(0, Op::SetCacheConfig, 0, v).code, rgpu::err::InvalidValue);
}

TEST(HostDeviceState, P2PAttributesNeedTwoGpus) {
  HostDeviceState s(2);
  uint64_t v = 1;
  ASSERT_TRUE(s.config(0, Op::P2PAttribute, 2, v).ok());  // access supported
  EXPECT_EQ(v, 1u);
  v = 0;
  EXPECT_EQ(s.config(0, Op::P2PAttribute, 2, v).code, rgpu::err::InvalidDevice);
}

TEST(HostDeviceState, AKernelFailureIsStickyUntilReset) {
  HostDeviceState s(2);
  EXPECT_TRUE(s.failed(0).ok());
  s.fail(0, 710);
  s.fail(0, 719);  // the first failure stays
  EXPECT_EQ(s.failed(0).code, 710);
  EXPECT_NE(s.failed(0).message.find("reset"), std::string::npos);
  EXPECT_TRUE(s.failed(1).ok());
  s.reset(0);
  EXPECT_TRUE(s.failed(0).ok());
}
