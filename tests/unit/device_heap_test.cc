// The server's per-window sub-allocator, driven with a fake mapper (no GPU).
#include "server/device_heap.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

using rgpu::backend::Status;
using rgpu::server::DeviceHeap;
using rgpu::server::Mapper;

namespace {

constexpr uint64_t kBase = 0x500000000000ull;
constexpr uint64_t kMiB = 1 << 20;

// Records what is mapped; refuses overlapping maps, unmaps of what is not mapped, and maps beyond
// `capacity` bytes (a GPU out of memory).
class FakeMapper : public Mapper {
 public:
  Status map(uint64_t addr, uint64_t size) override {
    ++maps;
    if (mapped_bytes + size > capacity) return Status::fail(2, "fake GPU out of memory");
    auto next = ranges.lower_bound(addr);
    EXPECT_TRUE(next == ranges.end() || next->first >= addr + size) << "overlapping map";
    if (next != ranges.begin()) {
      EXPECT_LE(std::prev(next)->first + std::prev(next)->second, addr);
    }
    EXPECT_EQ(addr % (2 * kMiB), 0u);
    EXPECT_EQ(size % (2 * kMiB), 0u);
    ranges[addr] = size;
    mapped_bytes += size;
    return Status::success();
  }
  Status unmap(uint64_t addr, uint64_t size) override {
    ++unmaps;
    auto it = ranges.find(addr);
    EXPECT_TRUE(it != ranges.end() && it->second == size) << "unmap of what is not mapped";
    if (it != ranges.end()) {
      mapped_bytes -= it->second;
      ranges.erase(it);
    }
    return Status::success();
  }
  bool mapped(uint64_t p, uint64_t n) const {
    auto it = ranges.upper_bound(p);
    if (it == ranges.begin()) return false;
    --it;
    return p >= it->first && p + n <= it->first + it->second;
  }
  std::map<uint64_t, uint64_t> ranges;
  uint64_t mapped_bytes = 0, capacity = UINT64_MAX;
  int maps = 0, unmaps = 0;
};

}  // namespace

TEST(DeviceHeap, SmallAllocationsShareASlabAndAreAligned) {
  FakeMapper m;
  DeviceHeap h(kBase, 1ull << 40, 2 * kMiB, m);
  std::set<uint64_t> ptrs;
  for (int i = 0; i < 100; ++i) {
    uint64_t p = 0;
    ASSERT_TRUE(h.alloc(1 + i * 37, p).ok());
    EXPECT_EQ(p % DeviceHeap::kAlign, 0u);
    EXPECT_TRUE(h.contains(p));
    EXPECT_TRUE(m.mapped(p, 1 + i * 37));
    EXPECT_TRUE(ptrs.insert(p).second) << "address handed out twice";
  }
  // 100 small allocations of a few KiB: a handful of slabs, not 100 granules.
  EXPECT_LE(m.mapped_bytes, 8 * 2 * kMiB);
  for (uint64_t p : ptrs) EXPECT_TRUE(h.free(p).ok());
  EXPECT_EQ(h.live_allocations(), 0u);
  // What stays mapped is the spares, within their limit; trim gives them back.
  EXPECT_EQ(m.mapped_bytes, h.spare_bytes());
  EXPECT_LE(h.spare_bytes(), DeviceHeap::kSpareMax);
  EXPECT_TRUE(h.has_spare());
  h.trim();
  EXPECT_EQ(m.mapped_bytes, 0u);
  EXPECT_FALSE(h.has_spare());
}

TEST(DeviceHeap, ReuseDoesNotMapAgain) {
  FakeMapper m;
  DeviceHeap h(kBase, 1ull << 40, 2 * kMiB, m);
  uint64_t first = 0;
  ASSERT_TRUE(h.alloc(4096, first).ok());
  ASSERT_TRUE(h.free(first).ok());
  int maps = m.maps;
  for (int i = 0; i < 1000; ++i) {
    uint64_t p = 0;
    ASSERT_TRUE(h.alloc(4096, p).ok());
    ASSERT_TRUE(h.free(p).ok());
  }
  EXPECT_EQ(m.maps, maps);  // the spare slab serves the loop
  EXPECT_EQ(m.unmaps, 0);
  // A 2 MiB allocation loop uses the spare too.
  for (int i = 0; i < 100; ++i) {
    uint64_t p = 0;
    ASSERT_TRUE(h.alloc(2 * kMiB, p).ok());
    EXPECT_EQ(p % (2 * kMiB), 0u);
    ASSERT_TRUE(h.free(p).ok());
  }
  EXPECT_EQ(m.maps, maps);
}

TEST(DeviceHeap, LargeAllocationsGetTheirOwnMapping) {
  FakeMapper m;
  DeviceHeap h(kBase, 1ull << 40, 2 * kMiB, m);
  uint64_t a = 0, b = 0;
  ASSERT_TRUE(h.alloc(kMiB + 1, a).ok());
  ASSERT_TRUE(h.alloc(64 * kMiB, b).ok());
  EXPECT_EQ(m.ranges.at(a), 2 * kMiB);
  EXPECT_EQ(m.ranges.at(b), 64 * kMiB);
  EXPECT_TRUE(h.free(b).ok());
  EXPECT_EQ(m.ranges.count(b), 1u);  // kept as a spare
  const int maps = m.maps;
  uint64_t again = 0;
  ASSERT_TRUE(h.alloc(64 * kMiB, again).ok());  // the same length reuses it without mapping
  EXPECT_EQ(again, b);
  EXPECT_EQ(m.maps, maps);
  EXPECT_TRUE(h.free(again).ok());
  EXPECT_TRUE(h.free(a).ok());
  EXPECT_TRUE(h.has_spare());
  // The address space comes back and coalesces: the whole window is one range again.
  uint64_t c = 0;
  ASSERT_TRUE(h.alloc((1ull << 40) - 0, c).ok());
  EXPECT_EQ(c, kBase);  // the spares were given back to make room
  EXPECT_FALSE(h.has_spare());
  EXPECT_TRUE(h.free(c).ok());
}

TEST(DeviceHeap, EmptySlabsAreKeptAsSparesUntilTrimmed) {
  FakeMapper m;
  DeviceHeap h(kBase, 1ull << 40, 2 * kMiB, m);
  // Three slabs of 1 MiB blocks (two per slab).
  std::vector<uint64_t> p(6);
  for (auto& x : p) ASSERT_TRUE(h.alloc(kMiB, x).ok());
  EXPECT_EQ(m.mapped_bytes, 6 * kMiB);
  for (auto& x : p) ASSERT_TRUE(h.free(x).ok());
  EXPECT_EQ(m.mapped_bytes, 6 * kMiB);  // the empty slabs are spares now
  EXPECT_EQ(m.unmaps, 0);
  h.trim();
  EXPECT_EQ(m.mapped_bytes, 0u);
  EXPECT_EQ(m.unmaps, 3);
}

TEST(DeviceHeap, SparesStayWithinTheirLimit) {
  FakeMapper m;
  DeviceHeap h(kBase, 1ull << 40, 2 * kMiB, m);
  std::vector<uint64_t> p(6);
  for (auto& x : p) ASSERT_TRUE(h.alloc(64 * kMiB, x).ok());
  for (auto& x : p) ASSERT_TRUE(h.free(x).ok());
  EXPECT_EQ(h.spare_bytes(), DeviceHeap::kSpareMax);  // four of the six
  EXPECT_EQ(m.mapped_bytes, DeviceHeap::kSpareMax);
  uint64_t big = 0;  // more than the limit: never kept
  ASSERT_TRUE(h.alloc(DeviceHeap::kSpareMax + 2 * kMiB, big).ok());
  ASSERT_TRUE(h.free(big).ok());
  EXPECT_EQ(m.ranges.count(big), 0u);
}

TEST(DeviceHeap, SparesAreGivenBackWhenTheGpuIsOutOfMemory) {
  FakeMapper m;
  m.capacity = 128 * kMiB;
  DeviceHeap h(kBase, 1ull << 40, 2 * kMiB, m);
  uint64_t a = 0, b = 0;
  ASSERT_TRUE(h.alloc(64 * kMiB, a).ok());
  ASSERT_TRUE(h.free(a).ok());
  EXPECT_EQ(h.spare_bytes(), 64 * kMiB);
  ASSERT_TRUE(h.alloc(96 * kMiB, b).ok());  // fits only once the spare is unmapped
  EXPECT_FALSE(h.has_spare());
  EXPECT_EQ(m.mapped_bytes, 96 * kMiB);
  ASSERT_TRUE(h.free(b).ok());
}

TEST(DeviceHeap, OutOfMemoryAndWindowFull) {
  FakeMapper m;
  m.capacity = 8 * kMiB;
  DeviceHeap h(kBase, 64 * kMiB, 2 * kMiB, m);
  uint64_t p = 0;
  Status s = h.alloc(16 * kMiB, p);
  EXPECT_EQ(s.code, rgpu::err::MemoryAllocation);
  EXPECT_EQ(m.mapped_bytes, 0u);
  s = h.alloc(65 * kMiB, p);  // larger than the window
  EXPECT_EQ(s.code, rgpu::err::MemoryAllocation);
  EXPECT_NE(s.message.find("window"), std::string::npos) << s.message;
  m.capacity = UINT64_MAX;
  uint64_t a = 0, b = 0;
  ASSERT_TRUE(h.alloc(40 * kMiB, a).ok());
  s = h.alloc(40 * kMiB, b);  // the window has 24 MiB left
  EXPECT_EQ(s.code, rgpu::err::MemoryAllocation);
  EXPECT_NE(s.message.find("0x500000000000"), std::string::npos) << s.message;
  ASSERT_TRUE(h.alloc(24 * kMiB, b).ok());
  EXPECT_TRUE(h.free(a).ok());
  EXPECT_TRUE(h.free(b).ok());
}

TEST(DeviceHeap, BadFrees) {
  FakeMapper m;
  DeviceHeap h(kBase, 1ull << 40, 2 * kMiB, m);
  uint64_t small = 0, large = 0;
  ASSERT_TRUE(h.alloc(1000, small).ok());
  ASSERT_TRUE(h.alloc(4 * kMiB, large).ok());
  EXPECT_EQ(h.free(small + 256).code, rgpu::err::InvalidValue);  // inside, not the start
  EXPECT_EQ(h.free(large + 4096).code, rgpu::err::InvalidValue);
  EXPECT_EQ(h.free(0x1234).code, rgpu::err::InvalidValue);
  uint64_t neighbour = 0;  // a free block of a live slab is not an allocation either
  ASSERT_TRUE(h.alloc(1000, neighbour).ok());
  ASSERT_TRUE(h.free(neighbour).ok());
  EXPECT_EQ(h.free(neighbour).code, rgpu::err::InvalidValue);  // double free
  ASSERT_TRUE(h.free(small).ok());
  EXPECT_EQ(h.free(small).code, rgpu::err::InvalidValue);
  ASSERT_TRUE(h.free(large).ok());
  EXPECT_EQ(h.free(large).code, rgpu::err::InvalidValue);
  EXPECT_EQ(h.live_allocations(), 0u);
}

TEST(DeviceHeap, RandomSmallAllocationsNeverOverlap) {
  FakeMapper m;
  DeviceHeap h(kBase, 1ull << 40, 2 * kMiB, m);
  std::mt19937_64 rng(7);
  std::map<uint64_t, uint64_t> live;  // ptr -> size
  for (int i = 0; i < 20000; ++i) {
    if (!live.empty() && rng() % 3 == 0) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      ASSERT_TRUE(h.free(it->first).ok());
      live.erase(it);
      continue;
    }
    uint64_t size = 1 + rng() % (rng() % 8 == 0 ? 3 * kMiB : 4096);
    uint64_t p = 0;
    ASSERT_TRUE(h.alloc(size, p).ok());
    ASSERT_EQ(p % 256, 0u);
    ASSERT_TRUE(m.mapped(p, size));
    auto next = live.lower_bound(p);
    if (next != live.end()) {
      ASSERT_GE(next->first, p + size);
    }
    if (next != live.begin()) {
      ASSERT_LE(std::prev(next)->first + std::prev(next)->second, p);
    }
    live[p] = size;
  }
  for (auto& [p, size] : live) ASSERT_TRUE(h.free(p).ok());
  EXPECT_EQ(m.mapped_bytes, h.spare_bytes());  // nothing but spares
  EXPECT_LE(h.spare_bytes(), DeviceHeap::kSpareMax);
  h.trim();
  EXPECT_EQ(m.mapped_bytes, 0u);
}

TEST(DeviceHeap, ReleaseAllUnmapsEverything) {
  FakeMapper m;
  {
    DeviceHeap h(kBase, 1ull << 40, 2 * kMiB, m);
    uint64_t p = 0;
    ASSERT_TRUE(h.alloc(100, p).ok());
    ASSERT_TRUE(h.alloc(10 * kMiB, p).ok());
    h.release_all();
    EXPECT_TRUE(m.ranges.empty());
    ASSERT_TRUE(h.alloc(100, p).ok());
    EXPECT_EQ(p, kBase);
  }  // the destructor unmaps what is left
  EXPECT_TRUE(m.ranges.empty());
}

TEST(DeviceHeap, ReservedRangesMapNothingAndAreNotHandedOut) {
  // An IPC import: address space of the window with nothing mapped by the heap.
  FakeMapper m;
  DeviceHeap h(kBase, 64 * kMiB, 2 * kMiB, m);
  uint64_t r = 0, a = 0;
  ASSERT_TRUE(h.reserve(3 * kMiB, r).ok());
  EXPECT_EQ(r % (2 * kMiB), 0u);
  EXPECT_EQ(m.maps, 0);
  ASSERT_TRUE(h.alloc(8 * kMiB, a).ok());
  EXPECT_TRUE(a >= r + 4 * kMiB || a + 8 * kMiB <= r) << "an allocation inside a reserved range";
  EXPECT_FALSE(h.free(r).ok());  // a reservation is not an allocation
  // The reservation takes 4 MiB (rounded to the granule) until it is given back.
  uint64_t r2 = 0;
  ASSERT_TRUE(h.reserve(kMiB, r2).ok());
  EXPECT_TRUE(r2 >= r + 4 * kMiB || r2 + 2 * kMiB <= r) << "two reservations overlap";
  h.unreserve(r, 3 * kMiB);
  uint64_t again = 0;
  ASSERT_TRUE(h.reserve(4 * kMiB, again).ok());
  EXPECT_EQ(again, r);  // first fit: the range given back
  EXPECT_FALSE(h.reserve(0, r).ok());
  EXPECT_FALSE(h.reserve(128 * kMiB, r).ok());
}

// An IPC export shares a mapping with other processes: nothing allocated after it may lie there,
// and none of its memory comes back to this process (issue 36).
TEST(DeviceHeap, ASharedSlabHandsOutNoBlockAgain) {
  FakeMapper m;
  DeviceHeap h(kBase, 1ull << 40, 2 * kMiB, m);
  uint64_t a = 0, b = 0, c = 0;
  ASSERT_TRUE(h.alloc(256, a).ok());
  ASSERT_TRUE(h.alloc(256, b).ok());
  ASSERT_TRUE(h.alloc(256, c).ok());
  uint64_t slab = 0, len = 0;
  ASSERT_TRUE(h.share(b, slab, len).ok());
  EXPECT_EQ(len, 2 * kMiB);
  EXPECT_TRUE(b >= slab && b + 256 <= slab + len);
  EXPECT_TRUE(a >= slab && a < slab + len);  // allocated before: in the slab
  EXPECT_TRUE(h.shared(a) && h.shared(b) && h.shared(c));
  auto outside = [&](uint64_t p) { return p + 256 <= slab || p >= slab + len; };
  // Allocated after the export, same size class: never in the exported slab.
  uint64_t d = 0;
  ASSERT_TRUE(h.alloc(256, d).ok());
  EXPECT_TRUE(outside(d)) << "a block carved from a shared slab";
  EXPECT_FALSE(h.shared(d));
  // A block freed after the export is not handed out again either.
  ASSERT_TRUE(h.free(c).ok());
  for (int i = 0; i < 64; ++i) {
    uint64_t e = 0;
    ASSERT_TRUE(h.alloc(256, e).ok());
    EXPECT_TRUE(outside(e)) << "a freed block of a shared slab handed out again";
  }
  // Its last allocation freed, the slab is unmapped, not kept as a spare.
  ASSERT_TRUE(h.free(a).ok());
  EXPECT_TRUE(m.mapped(slab, len));
  const uint64_t spares = h.spare_bytes();
  ASSERT_TRUE(h.free(b).ok());
  EXPECT_FALSE(m.mapped(slab, 1)) << "a shared slab stayed mapped";
  EXPECT_EQ(h.spare_bytes(), spares);
  EXPECT_FALSE(h.shared(b));
  // Sharing names live allocations by their start.
  EXPECT_EQ(h.share(b, slab, len).code, rgpu::err::InvalidValue);
  EXPECT_EQ(h.share(d + 1, slab, len).code, rgpu::err::InvalidValue);
}

TEST(DeviceHeap, ASharedLargeMappingIsNotKeptAsASpare) {
  FakeMapper m;
  DeviceHeap h(kBase, 1ull << 40, 2 * kMiB, m);
  uint64_t a = 0, mapping = 0, len = 0;
  ASSERT_TRUE(h.alloc(3 * kMiB, a).ok());
  ASSERT_TRUE(h.share(a, mapping, len).ok());
  EXPECT_EQ(mapping, a);  // its own mapping: nothing else lies in it
  EXPECT_EQ(len, 4 * kMiB);
  ASSERT_TRUE(h.free(a).ok());
  EXPECT_FALSE(m.mapped(a, 1)) << "a shared mapping was kept as a spare";
  EXPECT_FALSE(h.has_spare());
  // The same length again is new memory (mapped anew), never the shared one.
  const int maps = m.maps;
  uint64_t b = 0;
  ASSERT_TRUE(h.alloc(3 * kMiB, b).ok());
  EXPECT_EQ(m.maps, maps + 1);
  EXPECT_FALSE(h.shared(b));
  // Unshared, the usual reuse.
  ASSERT_TRUE(h.free(b).ok());
  EXPECT_TRUE(h.has_spare());
}
