// The drvlibs group's logic without a GPU: the stream wait comparisons (GEQ is cyclic, 32 and 64
// bits, EQ, AND, NOR, the FLUSH bit ignored), the host backend's tensor map test double (arguments
// kept, checksum checked by ReplaceAddress, bad arguments refused), and its occupancy with dynamic
// shared memory.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/host/host_drvlibs.h"
#include "backend/host/host_executor.h"
#include "backend/host/host_ledger.h"

using namespace rgpu::backend;

namespace {

constexpr uint32_t kGeq = 0, kEq = 1, kAnd = 2, kNor = 3, kFlush = 1u << 30;

TEST(MemWait, Comparisons) {
  EXPECT_TRUE(mem_wait_satisfied(5, 5, kGeq, false));
  EXPECT_TRUE(mem_wait_satisfied(6, 5, kGeq, false));
  EXPECT_FALSE(mem_wait_satisfied(4, 5, kGeq, false));
  // Cyclic: 1 is "after" 0xfffffff0 in 32 bits, not in 64.
  EXPECT_TRUE(mem_wait_satisfied(1, 0xfffffff0u, kGeq, false));
  EXPECT_FALSE(mem_wait_satisfied(0xfffffff0u, 1, kGeq, false));
  EXPECT_FALSE(mem_wait_satisfied(1, 0xfffffff0u, kGeq, true));
  EXPECT_TRUE(mem_wait_satisfied(0, ~0ull, kGeq, true));
  EXPECT_FALSE(mem_wait_satisfied(~0ull, 0, kGeq, true));
  // 32-bit waits look at 32 bits only.
  EXPECT_TRUE(mem_wait_satisfied(0x100000005ull, 5, kEq, false));
  EXPECT_FALSE(mem_wait_satisfied(0x100000005ull, 5, kEq, true));
  EXPECT_TRUE(mem_wait_satisfied(0x6, 0x4, kAnd, false));
  EXPECT_FALSE(mem_wait_satisfied(0x3, 0x4, kAnd, false));
  EXPECT_FALSE(mem_wait_satisfied(0xf, 0xfffffff0u, kNor, false));
  EXPECT_TRUE(mem_wait_satisfied(0x0, 0xfffffff0u, kNor, false));
  EXPECT_TRUE(mem_wait_satisfied(0xf, 0xfffffff0u, kNor, true));  // the high 32 bits are 0
  EXPECT_TRUE(mem_wait_satisfied(7, 7, kEq | kFlush, false));
}

Executor::TensorMapArgs tiled() {
  Executor::TensorMapArgs a;
  a.kind = 0, a.data_type = 7, a.rank = 2, a.address = 0x7f0000001000ull;
  a.dims = {64, 32};
  a.strides = {256};
  a.box = {32, 16};
  a.elem_strides = {1, 2};
  a.swizzle = 3, a.l2_promotion = 2;
  return a;
}

uint64_t word(const uint8_t (&m)[128], int i) {
  uint64_t v;
  std::memcpy(&v, m + 8 * i, 8);
  return v;
}

TEST(HostTensorMap, KeepsArgumentsAndChecksReplace) {
  uint8_t m[128], n[128];
  ASSERT_TRUE(host_tensor_map_encode(tiled(), m).ok());
  EXPECT_EQ(word(m, 0), kHostTensorMapMagic);
  EXPECT_EQ(word(m, 1), 0x7f0000001000ull);
  EXPECT_EQ(word(m, 2), 7ull << 8 | 2ull << 16 | 3ull << 32 | 2ull << 40);
  EXPECT_EQ(word(m, 3), 64u);
  EXPECT_EQ(word(m, 8), 256u);
  EXPECT_EQ(word(m, 12), 32ull | 16ull << 12);
  EXPECT_EQ(word(m, 13), 1ull | 2ull << 4);
  Executor::TensorMapArgs moved = tiled();
  moved.address += 4096;
  ASSERT_TRUE(host_tensor_map_encode(moved, n).ok());
  ASSERT_TRUE(host_tensor_map_replace_address(m, moved.address).ok());
  EXPECT_EQ(std::memcmp(m, n, 128), 0);
  EXPECT_FALSE(host_tensor_map_replace_address(m, moved.address + 8).ok());  // unaligned
  m[40] ^= 1;  // any change breaks the checksum
  EXPECT_EQ(host_tensor_map_replace_address(m, moved.address).code, rgpu::err::InvalidValue);
}

TEST(HostTensorMap, RefusesWhatTheDriverDocuments) {
  uint8_t m[128];
  auto a = tiled();
  a.strides = {250};
  EXPECT_EQ(host_tensor_map_encode(a, m).code, rgpu::err::InvalidValue);
  a = tiled();
  a.box = {0, 16};
  EXPECT_FALSE(host_tensor_map_encode(a, m).ok());
  a = tiled();
  a.elem_strides = {1, 9};
  EXPECT_FALSE(host_tensor_map_encode(a, m).ok());
  a = tiled();
  a.dims = {64};  // fewer than the rank
  EXPECT_FALSE(host_tensor_map_encode(a, m).ok());
  a = tiled();
  a.kind = 1;  // im2col: rank 3 at least
  EXPECT_FALSE(host_tensor_map_encode(a, m).ok());
}

TEST(HostOccupancy, CountsDynamicSharedMemory) {
  int32_t blocks = -1;
  ASSERT_TRUE(host_occupancy(256, 0, blocks).ok());
  EXPECT_EQ(blocks, 8);
  ASSERT_TRUE(host_occupancy(64, 0, blocks).ok());
  EXPECT_EQ(blocks, 32);
  ASSERT_TRUE(host_occupancy(64, 40000, blocks).ok());
  EXPECT_EQ(blocks, 5);  // 233472 / 40000
  ASSERT_TRUE(host_occupancy(64, 232449, blocks).ok());
  EXPECT_EQ(blocks, 0);  // beyond the opt-in maximum per block (227 KiB)
  EXPECT_FALSE(host_occupancy(0, 0, blocks).ok());
}

// The potential block size search over the host backend's occupancy (132 SMs, 2048 threads and
// 32 blocks per SM, 228 KiB of shared memory per SM, 227 KiB per block).
TEST(OccupancySearch, DocumentedChoiceAndMissingSize) {
  HostLedger* ledger = HostLedger::create(64 << 20);
  ASSERT_NE(ledger, nullptr);
  auto exec = make_host_executor({ledger});
  int32_t grid = 0, block = 0, need = 0;
  auto none = [](int32_t, uint64_t& s) {
    s = 0;
    return true;
  };
  ASSERT_TRUE(occupancy_search(*exec, 0, 0, 0, 0, none, grid, block, need).ok());
  EXPECT_EQ(block, 1024);  // 2 blocks fill the SM: the largest block wins
  EXPECT_EQ(grid, 2 * 132);
  EXPECT_EQ(need, 0);
  auto per_thread = [](int32_t bs, uint64_t& s) {
    s = uint64_t(bs) * 64;
    return true;
  };
  ASSERT_TRUE(occupancy_search(*exec, 0, 0, 0, 0, per_thread, grid, block, need).ok());
  EXPECT_EQ(block, 1024);  // 2 blocks of 64 KiB fill the SM (2048 threads): the largest wins
  EXPECT_EQ(grid, 2 * 132);
  // A limit that is no multiple of the warp: 100 (20 blocks), 96 (21), then 64 fills the SM.
  ASSERT_TRUE(occupancy_search(*exec, 0, 0, 100, 0, none, grid, block, need).ok());
  EXPECT_EQ(block, 64);
  EXPECT_EQ(grid, 32 * 132);
  // A size the caller's table lacks is named, nothing else answered.
  auto warps_only = [](int32_t bs, uint64_t& s) {
    s = 0;
    return bs % 32 == 0;
  };
  block = grid = -1;
  ASSERT_TRUE(occupancy_search(*exec, 0, 0, 100, 0, warps_only, grid, block, need).ok());
  EXPECT_EQ(need, 100);
  EXPECT_EQ(block, -1);
}

}  // namespace
