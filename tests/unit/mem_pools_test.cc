// The session's memory pools (server/mem_pools.h) against a fake GPU: stream-ordered reuse rules,
// release threshold and trimming, attributes, out-of-memory paths, destroyed pools.
#include "server/mem_pools.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

using rgpu::backend::Status;
using rgpu::server::MemPools;
using rgpu::server::PoolOps;
namespace err = rgpu::err;

namespace {

struct FakeGpu {
  uint64_t next = 0x500000000000ull;
  uint64_t capacity = 64ull << 20, used = 0;
  std::map<uint64_t, uint64_t> heap;  // live heap allocations
  std::map<uint64_t, bool> events;    // event -> completed
  uint64_t next_event = 1;
  std::vector<std::pair<uint64_t, uint64_t>> waits;  // (stream, event)

  PoolOps ops() {
    PoolOps o;
    o.heap_alloc = [this](uint32_t, uint64_t, uint64_t size, uint64_t& ptr) {
      if (used + size > capacity) return Status::fail(err::MemoryAllocation, "out of memory");
      ptr = next;
      next += (size + 255) / 256 * 256;
      heap[ptr] = size;
      used += size;
      return Status::success();
    };
    o.heap_free = [this](uint32_t, uint64_t ptr, uint64_t size) {
      ASSERT_TRUE(heap.count(ptr)) << "double or bad heap free";
      EXPECT_EQ(heap[ptr], size) << "the heap free names another size than its allocation";
      used -= heap[ptr];
      heap.erase(ptr);
    };
    o.record = [this](uint32_t, uint64_t, uint64_t& ev) {
      ev = next_event++;
      events[ev] = false;
      return Status::success();
    };
    o.done = [this](uint32_t, uint64_t ev) { return events.at(ev); };
    o.release = [this](uint32_t, uint64_t ev) {
      ASSERT_TRUE(events.count(ev)) << "event released twice";
      events.erase(ev);
    };
    o.wait = [this](uint32_t, uint64_t stream, uint64_t ev) {
      waits.emplace_back(stream, ev);
      return Status::success();
    };
    return o;
  }
  void complete_all() {
    for (auto& [e, done] : events) done = true;
  }
};

constexpr uint64_t kS1 = 11, kS2 = 22;

uint64_t attr(MemPools& p, uint64_t id, uint32_t a) {
  uint64_t v = 0;
  EXPECT_TRUE(p.get_attr(0, id, a, v).ok());
  return v;
}

TEST(MemPools, SameStreamReusesAtOnceOtherStreamsAfterCompletion) {
  FakeGpu gpu;
  MemPools pools(gpu.ops());
  uint64_t a = 0, b = 0, c = 0, size = 0;
  ASSERT_TRUE(pools.alloc(0, 0, 0, kS1, 4096, a).ok());
  ASSERT_TRUE(pools.free(0, a, kS1, size).ok());
  EXPECT_EQ(size, 4096u);
  // Another stream may not take it while the free is pending: new memory.
  ASSERT_TRUE(pools.alloc(0, 0, 0, kS2, 4096, b).ok());
  EXPECT_NE(b, a);
  // The freeing stream takes it back at once.
  ASSERT_TRUE(pools.alloc(0, 0, 0, kS1, 4096, c).ok());
  EXPECT_EQ(c, a);
  ASSERT_TRUE(pools.free(0, c, kS1, size).ok());
  gpu.complete_all();
  uint64_t d = 0;
  ASSERT_TRUE(pools.alloc(0, 0, 0, kS2, 4000, d).ok());
  EXPECT_EQ(d, a) << "a completed free serves any stream";
  EXPECT_TRUE(gpu.events.empty()) << "events go back once used";
  EXPECT_TRUE(gpu.waits.empty());
}

TEST(MemPools, ADestroyedStreamsHandleDoesNotInheritItsPendingFrees) {
  FakeGpu gpu;
  MemPools pools(gpu.ops());
  uint64_t a = 0, b = 0, size = 0;
  ASSERT_TRUE(pools.alloc(0, 0, 0, kS1, 4096, a).ok());
  ASSERT_TRUE(pools.free(0, a, kS1, size).ok());
  pools.forget_stream(0, kS1);  // a new stream may get the same handle
  ASSERT_TRUE(pools.alloc(0, 0, 0, kS1, 4096, b).ok());
  EXPECT_NE(b, a) << "the free is still pending";
}

TEST(MemPools, OpportunisticReuseCanBeTurnedOff) {
  FakeGpu gpu;
  MemPools pools(gpu.ops());
  uint64_t a = 0, b = 0, size = 0;
  ASSERT_TRUE(pools.set_attr(0, 0, MemPools::kAllowOpportunistic, 0).ok());
  ASSERT_TRUE(pools.alloc(0, 0, 0, kS1, 4096, a).ok());
  ASSERT_TRUE(pools.free(0, a, kS1, size).ok());
  gpu.complete_all();
  ASSERT_TRUE(pools.alloc(0, 0, 0, kS2, 4096, b).ok());
  EXPECT_NE(b, a);
}

TEST(MemPools, OutOfMemoryReleasesIdleMemoryThenWaitsForAPendingFree) {
  FakeGpu gpu;
  gpu.capacity = 8 << 20;
  MemPools pools(gpu.ops());
  ASSERT_TRUE(pools.create(0, 5, 0, 0).ok());
  uint64_t a = 0, b = 0, c = 0, size = 0;
  // Pool 5 keeps an idle, completed block; the default pool then needs the memory.
  ASSERT_TRUE(pools.set_attr(0, 5, MemPools::kReleaseThreshold, UINT64_MAX).ok());
  ASSERT_TRUE(pools.alloc(0, 5, 0, kS1, 6 << 20, a).ok());
  ASSERT_TRUE(pools.free(0, a, kS1, size).ok());
  gpu.complete_all();
  ASSERT_TRUE(pools.alloc(0, 0, 0, kS1, 6 << 20, b).ok()) << "pool 5's idle memory was released";
  EXPECT_EQ(attr(pools, 5, MemPools::kReservedCurrent), 0u);
  // A pending free on another stream: the allocating stream waits for it.
  ASSERT_TRUE(pools.free(0, b, kS1, size).ok());
  ASSERT_TRUE(pools.alloc(0, 0, 0, kS2, 6 << 20, c).ok());
  EXPECT_EQ(c, b);
  ASSERT_EQ(gpu.waits.size(), 1u);
  EXPECT_EQ(gpu.waits[0].first, kS2);
  // Without internal dependencies: out of memory.
  ASSERT_TRUE(pools.free(0, c, kS2, size).ok());
  ASSERT_TRUE(pools.set_attr(0, 0, MemPools::kAllowInternalDependencies, 0).ok());
  uint64_t d = 0;
  EXPECT_EQ(pools.alloc(0, 0, 0, kS1, 6 << 20, d).code, err::MemoryAllocation);
}

TEST(MemPools, ThresholdTrimAndHighWaterMarks) {
  FakeGpu gpu;
  MemPools pools(gpu.ops());
  ASSERT_TRUE(pools.create(0, 7, 0, 0).ok());
  ASSERT_TRUE(pools.set_attr(0, 7, MemPools::kReleaseThreshold, 3 << 20).ok());
  uint64_t p[3], size = 0;
  for (auto& x : p) ASSERT_TRUE(pools.alloc(0, 7, 0, kS1, 2 << 20, x).ok());
  EXPECT_EQ(attr(pools, 7, MemPools::kUsedCurrent), 6u << 20);
  for (auto& x : p) ASSERT_TRUE(pools.free(0, x, kS1, size).ok());
  EXPECT_EQ(attr(pools, 7, MemPools::kUsedCurrent), 0u);
  EXPECT_EQ(attr(pools, 7, MemPools::kReservedCurrent), 6u << 20) << "frees still pending";
  gpu.complete_all();
  pools.trim_device(0);  // a synchronization: down to the threshold
  EXPECT_EQ(attr(pools, 7, MemPools::kReservedCurrent), 2u << 20);
  ASSERT_TRUE(pools.trim(0, 7, 0).ok());
  EXPECT_EQ(attr(pools, 7, MemPools::kReservedCurrent), 0u);
  EXPECT_EQ(attr(pools, 7, MemPools::kReservedHigh), 6u << 20);
  EXPECT_EQ(attr(pools, 7, MemPools::kUsedHigh), 6u << 20);
  EXPECT_FALSE(pools.set_attr(0, 7, MemPools::kUsedHigh, 5).ok());
  EXPECT_FALSE(pools.set_attr(0, 7, MemPools::kUsedCurrent, 0).ok());
  EXPECT_FALSE(pools.set_attr(0, 7, 99, 0).ok());
  ASSERT_TRUE(pools.set_attr(0, 7, MemPools::kReservedHigh, 0).ok());
  EXPECT_EQ(attr(pools, 7, MemPools::kReservedHigh), 0u);
  EXPECT_TRUE(gpu.heap.empty());
}

TEST(MemPools, DestroyedPoolKeepsOutstandingAllocationsUntilFreed) {
  FakeGpu gpu;
  MemPools pools(gpu.ops());
  ASSERT_TRUE(pools.create(0, 3, 0, 0).ok());
  EXPECT_FALSE(pools.create(0, 3, 0, 0).ok()) << "ids are unique";
  EXPECT_FALSE(pools.create(0, 0, 0, 0).ok()) << "0 is the default pool";
  EXPECT_FALSE(pools.destroy(0, 0).ok()) << "the default pool stays";
  uint64_t a = 0, size = 0;
  ASSERT_TRUE(pools.alloc(0, 3, 0, kS1, 1000, a).ok());
  ASSERT_TRUE(pools.destroy(0, 3).ok());
  uint64_t b = 0;
  EXPECT_FALSE(pools.alloc(0, 3, 0, kS1, 1000, b).ok()) << "a destroyed pool allocates nothing";
  EXPECT_TRUE(pools.owns(0, a));
  ASSERT_TRUE(pools.free(0, a, kS1, size).ok());
  EXPECT_EQ(gpu.heap.size(), 1u) << "the free is still pending";
  gpu.complete_all();
  pools.trim_device(0);
  EXPECT_TRUE(gpu.heap.empty());
  EXPECT_EQ(pools.reserved_bytes(), 0u);
  EXPECT_FALSE(pools.free(0, a, kS1, size).ok()) << "double free";
  EXPECT_FALSE(pools.free(0, 0x1234, kS1, size).ok()) << "not a pool allocation";
}

TEST(MemPools, MaximumSizeAndDeviceReset) {
  FakeGpu gpu;
  MemPools pools(gpu.ops());
  ASSERT_TRUE(pools.create(0, 9, 0, 1 << 20).ok());
  uint64_t a = 0, b = 0;
  ASSERT_TRUE(pools.alloc(0, 9, 0, kS1, 768 << 10, a).ok());
  EXPECT_EQ(pools.alloc(0, 9, 0, kS1, 512 << 10, b).code, err::MemoryAllocation);
  pools.forget_device(0);
  EXPECT_FALSE(pools.owns(0, a));
  EXPECT_FALSE(pools.alloc(0, 9, 0, kS1, 1, b).ok()) << "a reset destroys the device's pools";
  EXPECT_EQ(pools.reserved_bytes(), 0u);
}

}  // namespace

// A block whose memory was shared through CUDA IPC (the heap says it may not be reused) is
// never handed out again, on its own stream or any other, and goes back to the heap once its
// free completed, whatever the release threshold (issue 36).
TEST(MemPools, SharedBlocksAreNotReusedAndGoBackToTheHeap) {
  FakeGpu gpu;
  std::set<uint64_t> shared;
  PoolOps ops = gpu.ops();
  ops.reusable = [&](uint32_t, uint64_t ptr) { return !shared.count(ptr); };
  MemPools pools(std::move(ops));
  ASSERT_TRUE(pools.set_attr(0, 0, MemPools::kReleaseThreshold, UINT64_MAX).ok());
  uint64_t a = 0, b = 0, c = 0, size = 0;
  ASSERT_TRUE(pools.alloc(0, 0, 0, kS1, 4096, a).ok());
  shared.insert(a);
  ASSERT_TRUE(pools.free(0, a, kS1, size).ok());
  ASSERT_TRUE(pools.alloc(0, 0, 0, kS1, 4096, b).ok());  // the same stream: not a
  EXPECT_NE(b, a);
  gpu.complete_all();
  ASSERT_TRUE(pools.alloc(0, 0, 0, kS2, 4096, c).ok());  // another, after completion: not a
  EXPECT_NE(c, a);
  EXPECT_TRUE(gpu.heap.count(a)) << "still the pool's until a synchronization point";
  pools.trim_device(0);  // the threshold keeps everything else, not a
  EXPECT_FALSE(gpu.heap.count(a));
  EXPECT_TRUE(gpu.heap.count(b) && gpu.heap.count(c));
  EXPECT_EQ(attr(pools, 0, MemPools::kReservedCurrent), 8192u);
  // Pressure: with the heap full, a pending shared block is not waited for either.
  ASSERT_TRUE(pools.free(0, b, kS1, size).ok());
  shared.insert(c);
  ASSERT_TRUE(pools.free(0, c, kS2, size).ok());
  gpu.capacity = gpu.used;
  uint64_t d = 0;
  ASSERT_TRUE(pools.alloc(0, 0, 0, kS2, 4096, d).ok());  // b, after waiting for its free
  EXPECT_EQ(d, b);
}
