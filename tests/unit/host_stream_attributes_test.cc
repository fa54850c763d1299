// The host backend's stream attributes (backend/host/host_graphs3.h): values set are read back
// per stream, a new stream's priority is clamped to the range, bad values are refused naming what
// was wrong and leave the old value, unknown attributes are refused, copies are independent.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/host/host_graphs3.h"

using rgpu::backend::HostStreamAttributes;
using rgpu::backend::LaunchAttribute;

namespace {

LaunchAttribute attr(uint32_t id, uint64_t v0 = 0, uint64_t v1 = 0, uint64_t v2 = 0,
                     uint64_t v3 = 0) {
  LaunchAttribute a;
  a.id = id;
  a.v[0] = v0, a.v[1] = v1, a.v[2] = v2, a.v[3] = v3;
  return a;
}

uint64_t float_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

TEST(HostStreamAttributes, SetValuesAreReadBackPerStream) {
  HostStreamAttributes s;
  s.created(0, 7, -3);
  s.created(0, 8, -100);  // clamped to the greatest priority
  LaunchAttribute a = attr(8);
  ASSERT_TRUE(s.get(0, 7, a).ok());
  EXPECT_EQ(static_cast<int>(static_cast<uint32_t>(a.v[0])), -3);
  a = attr(8);
  ASSERT_TRUE(s.get(0, 8, a).ok());
  EXPECT_EQ(static_cast<int>(static_cast<uint32_t>(a.v[0])),
            HostStreamAttributes::kGreatestPriority);

  ASSERT_TRUE(s.set(0, 7, attr(3, 4)).ok());
  a = attr(3);
  ASSERT_TRUE(s.get(0, 7, a).ok());
  EXPECT_EQ(a.v[0], 4u);
  a = attr(3);
  ASSERT_TRUE(s.get(0, 8, a).ok());
  EXPECT_EQ(a.v[0], 1u) << "another stream keeps the default (auto)";

  const LaunchAttribute w = attr(1, 0x1000, 4096, float_bits(0.25f), 2 | (1ull << 32));
  ASSERT_TRUE(s.set(0, 7, w).ok());
  a = attr(1);
  ASSERT_TRUE(s.get(0, 7, a).ok());
  EXPECT_EQ(a.id, 1u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(a.v[i], w.v[i]);
}

TEST(HostStreamAttributes, BadValuesAreRefusedAndKeepTheOldOne) {
  HostStreamAttributes s;
  s.created(1, 5, 0);
  auto refused = [&](const LaunchAttribute& a, const char* words) {
    auto st = s.set(1, 5, a);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message.find(words), std::string::npos) << st.message;
  };
  refused(attr(3, 0), "synchronization policy");
  refused(attr(3, 5), "synchronization policy");
  refused(attr(1, 0x1000, 4096, float_bits(1.5f), 0), "hit ratio");
  refused(attr(1, 0x1000, 4096, float_bits(0.5f), 3), "access property");
  refused(attr(1, 0x1000, 1ull << 30, float_bits(0.5f), 0), "larger");
  refused(attr(9, 2, 0), "domain");
  refused(attr(10, 2), "domain");
  refused(attr(2, 1), "does not exist");  // cooperative: a launch attribute, not a stream's
  LaunchAttribute a = attr(3);
  ASSERT_TRUE(s.get(1, 5, a).ok());
  EXPECT_EQ(a.v[0], 1u);
  a = attr(6);
  EXPECT_FALSE(s.get(1, 5, a).ok());
}

TEST(HostStreamAttributes, ADestroyedStreamsValuesGo) {
  HostStreamAttributes s;
  s.created(0, 9, 0);
  ASSERT_TRUE(s.set(0, 9, attr(10, 1)).ok());
  s.destroyed(0, 9);
  s.created(0, 9, 0);  // the handle used again
  LaunchAttribute a = attr(10);
  ASSERT_TRUE(s.get(0, 9, a).ok());
  EXPECT_EQ(a.v[0], 0u);
}

}  // namespace
