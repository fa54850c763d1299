// The integrity-check answer rgpu's libcuda.so.1 gives NVIDIA's runtime
// (frontend/cuda/integrity.*).
#include "frontend/cuda/integrity.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace {

using rgpu::cuda_fe::hmac_md2;
using rgpu::cuda_fe::integrity_answer;
using rgpu::cuda_fe::IntegrityInput;
using rgpu::cuda_fe::Md2;

std::string hex(const uint8_t* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", p[i]);
    s += b;
  }
  return s;
}

std::string md2(const std::string& text) {
  Md2 h;
  h.update(text.data(), text.size());
  auto d = h.finish();
  return hex(d.data(), d.size());
}

TEST(Integrity, Md2MatchesRfc1319) {
  EXPECT_EQ(md2(""), "8350e5a3e24c153df2275c9f80692773");
  EXPECT_EQ(md2("a"), "32ec01ec4a6dac72c0ab96fb34c0b5d1");
  EXPECT_EQ(md2("abc"), "da853b0d3f88d99b30283a69e6ded6bb");
  EXPECT_EQ(md2("message digest"), "ab4f496bfb2a530b219ff33031fe06b0");
  EXPECT_EQ(md2("abcdefghijklmnopqrstuvwxyz"), "4e8ddff3650292ab5a4108c3aa47940b");
  EXPECT_EQ(md2("12345678901234567890123456789012345678901234567890123456789012345678901234567890"),
            "d5976f79d83d3a0dc9806c3c66f3efd8");
}

TEST(Integrity, Md2FedInPiecesEqualsFedWhole) {
  const std::string text = "the quick brown fox jumps over the lazy dog, seventeen+ bytes";
  Md2 h;
  for (char c : text) h.update(&c, 1);
  auto d = h.finish();
  EXPECT_EQ(hex(d.data(), d.size()), md2(text));
}

TEST(Integrity, HmacIsTheTwoPassConstruction) {
  const uint8_t key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  const std::string msg = "rgpu";
  Md2 inner;
  uint8_t pad[16];
  for (int i = 0; i < 16; ++i) pad[i] = key[i] ^ 0x36;
  inner.update(pad, 16);
  inner.update(msg.data(), msg.size());
  auto first = inner.finish();
  Md2 outer;
  for (int i = 0; i < 16; ++i) pad[i] = key[i] ^ 0x5c;
  outer.update(pad, 16);
  outer.update(first.data(), 16);
  auto want = outer.finish();
  auto got = hmac_md2(key, msg.data(), msg.size());
  EXPECT_EQ(hex(got.data(), 16), hex(want.data(), 16));
}

TEST(Integrity, VersionsEndingInZeroAndOneAreConstants) {
  IntegrityInput in{};
  in.check_version = 13000;
  auto a = integrity_answer(in);
  EXPECT_EQ(a[0], 0x3341181c03cb675cull);
  EXPECT_EQ(a[1], 0x8ed383aa1f4cd1e8ull);
  in.check_version = 13001;
  a = integrity_answer(in);
  EXPECT_EQ(a[0], 0x1841181c03cb675cull);
  EXPECT_EQ(a[1], 0x8ed383aa1f4cd1e8ull);
}

TEST(Integrity, VersionTwoDependsOnEveryInput) {
  IntegrityInput in{};
  in.driver_version = 13000;
  in.check_version = 13002;
  in.pid = 1234;
  in.thread = 0xf79c1000;
  in.unix_seconds = 0x682b9cee;
  in.devices.push_back({{1, 2, 3}, 0, 2, 0});
  const auto base = integrity_answer(in);
  EXPECT_EQ(integrity_answer(in), base);  // deterministic
  auto changed = [&](auto mutate) {
    IntegrityInput c = in;
    mutate(c);
    return integrity_answer(c) != base;
  };
  EXPECT_TRUE(changed([](IntegrityInput& c) { c.driver_version = 13020; }));
  EXPECT_TRUE(changed([](IntegrityInput& c) { c.pid = 1235; }));
  EXPECT_TRUE(changed([](IntegrityInput& c) { c.unix_seconds += 1; }));
  EXPECT_TRUE(changed([](IntegrityInput& c) { c.cudart_table = &c; }));
  EXPECT_TRUE(changed([](IntegrityInput& c) { c.devices[0].pci_bus = 3; }));
  EXPECT_TRUE(changed([](IntegrityInput& c) { c.devices.push_back(c.devices[0]); }));
}

}  // namespace
