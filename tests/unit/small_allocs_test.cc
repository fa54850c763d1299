// The client's small-allocation bookkeeping (client/small_allocs.h): chunk sizes and alignment, a
// freed chunk held back until a reclaim that began after its free, idle slabs given back only
// when their class keeps a slab's worth of chunks, a device reset forgetting its slabs.
#include "client/small_allocs.h"

#include <gtest/gtest.h>

#include <set>

using rgpu::client::SmallAllocations;

namespace {

constexpr uint64_t kSlab = SmallAllocations::kSlabBytes;
constexpr uint64_t kBase = 0x7f0000000000ull;

TEST(SmallAllocations, ChunkSizesAreAlignedPowersOfTwo) {
  EXPECT_EQ(SmallAllocations::chunk_bytes(1), 512u);
  EXPECT_EQ(SmallAllocations::chunk_bytes(512), 512u);
  EXPECT_EQ(SmallAllocations::chunk_bytes(513), 1024u);
  EXPECT_EQ(SmallAllocations::chunk_bytes(65536), 65536u);
  SmallAllocations a(64 << 10);
  EXPECT_FALSE(a.serves(0));
  EXPECT_TRUE(a.serves(65536));
  EXPECT_FALSE(a.serves(65537));
  EXPECT_FALSE(SmallAllocations(0).serves(1));
  EXPECT_FALSE(SmallAllocations(1 << 30).serves(kSlab));  // capped: a slab holds 8 at least
}

TEST(SmallAllocations, ChunksOfOneSlabAreDistinctAndInside) {
  SmallAllocations a(64 << 10);
  bool reclaimable = true;
  EXPECT_EQ(a.take(0, 1000, &reclaimable), 0u);
  EXPECT_FALSE(reclaimable);  // nothing to reclaim: a new slab is needed
  std::set<uint64_t> seen{a.add_slab(0, kBase, 1000)};
  const uint64_t n = kSlab / 1024;
  for (uint64_t i = 1; i < n; ++i) {
    const uint64_t p = a.take(0, 1000, nullptr);
    ASSERT_NE(p, 0u) << i;
    EXPECT_EQ(p % 1024, 0u);
    EXPECT_GE(p, kBase);
    EXPECT_LT(p, kBase + kSlab);
    EXPECT_TRUE(seen.insert(p).second) << "chunk handed out twice";
  }
  EXPECT_EQ(a.take(0, 1000, nullptr), 0u);  // full
  EXPECT_EQ(a.take(0, 100, nullptr), 0u);   // another class has no slab
  EXPECT_EQ(a.take(1, 1000, nullptr), 0u);  // another device neither
  EXPECT_EQ(a.counts(0).in_use, n);
}

TEST(SmallAllocations, AFreedChunkComesBackOnlyAfterAReclaimBegunAfterItsFree) {
  SmallAllocations a(64 << 10);
  const uint64_t first = a.add_slab(0, kBase, 64 << 10);  // 32 chunks
  std::vector<uint64_t> held{first};
  while (uint64_t p = a.take(0, 64 << 10, nullptr)) held.push_back(p);
  ASSERT_EQ(held.size(), 32u);
  uint64_t slab = 1;
  ASSERT_TRUE(a.release(held[5], &slab));
  EXPECT_EQ(slab, 0u);
  EXPECT_FALSE(a.release(held[5], &slab)) << "a chunk freed twice";
  EXPECT_FALSE(a.release(held[5] + 512, &slab)) << "not a chunk's start";
  EXPECT_FALSE(a.release(kBase + kSlab, &slab)) << "outside every slab";
  bool reclaimable = false;
  EXPECT_EQ(a.take(0, 64 << 10, &reclaimable), 0u) << "handed out before the GPU is past it";
  EXPECT_TRUE(reclaimable);
  const uint64_t epoch = a.begin_reclaim(0);
  ASSERT_TRUE(a.release(held[6], &slab));  // freed while the reclaim is under way
  a.finish_reclaim(0, epoch);              // the server: that epoch's work is not done yet
  EXPECT_EQ(a.take(0, 64 << 10, nullptr), 0u) << "handed out while the GPU may still use it";
  a.finish_reclaim(0, epoch + 1);  // now it is
  EXPECT_EQ(a.take(0, 64 << 10, nullptr), held[5]);
  EXPECT_EQ(a.take(0, 64 << 10, nullptr), 0u) << "a chunk freed after the reclaim began";
  a.finish_reclaim(0, a.begin_reclaim(0) + 1);
  EXPECT_EQ(a.take(0, 64 << 10, nullptr), held[6]);
  uint64_t at = 0;
  EXPECT_TRUE(a.slab_of(held[7] + 100, &at));
  EXPECT_EQ(at, kBase);
  EXPECT_FALSE(a.slab_of(kBase - 1, &at));
}

TEST(SmallAllocations, AnIdleSlabGoesBackWhenItsClassHasASlabsWorthElsewhere) {
  SmallAllocations a(64 << 10);
  const uint64_t b2 = kBase + 16 * kSlab;
  std::vector<uint64_t> one{a.add_slab(0, kBase, 65536)};
  while (uint64_t p = a.take(0, 65536, nullptr)) one.push_back(p);
  std::vector<uint64_t> two{a.add_slab(0, b2, 65536)};
  uint64_t slab = 0;
  ASSERT_TRUE(a.release(two[0], &slab));
  EXPECT_EQ(slab, 0u) << "the class's only chunks to spare: kept";
  for (size_t i = 0; i + 1 < one.size(); ++i) {
    ASSERT_TRUE(a.release(one[i], &slab));
    EXPECT_EQ(slab, 0u);
  }
  ASSERT_TRUE(a.release(one.back(), &slab));
  EXPECT_EQ(slab, kBase) << "idle, and the other slab has 32 chunks to spare";
  EXPECT_EQ(a.counts(0).slabs, 1u);
  uint64_t at = 0;
  EXPECT_FALSE(a.slab_of(kBase, &at));
  a.forget_device(0);
  EXPECT_EQ(a.counts(0).slabs, 0u);
  EXPECT_FALSE(a.release(two[0], &slab));
}

// An importer's kernels reach the exported chunk's whole slab: the slab hands out nothing more
// (neither its free chunks nor those freed later), and goes back once its last chunk is freed.
TEST(SmallAllocations, AnExportedChunkRetiresItsSlab) {
  SmallAllocations a(64 << 10);
  const uint64_t p = a.add_slab(0, kBase, 64 << 10);
  const uint64_t q = a.take(0, 64 << 10, nullptr);
  ASSERT_NE(q, 0u);
  EXPECT_FALSE(a.mark_exported(p + 512)) << "not a chunk's start";
  bool fresh = false;
  ASSERT_TRUE(a.mark_exported(p, &fresh));
  EXPECT_TRUE(fresh);
  ASSERT_TRUE(a.mark_exported(p, &fresh));
  EXPECT_FALSE(fresh) << "exported twice: the same handle";
  EXPECT_EQ(a.counts(0).retired, 1u);
  bool reclaimable = true;
  EXPECT_EQ(a.take(0, 64 << 10, &reclaimable), 0u) << "a chunk of an exported slab handed out";
  EXPECT_FALSE(reclaimable);
  uint64_t slab = 0;
  bool exported = false;
  ASSERT_TRUE(a.release(q, &slab, &exported));
  EXPECT_FALSE(exported);
  EXPECT_EQ(slab, 0u) << "the exported chunk still holds it";
  a.finish_reclaim(0, a.begin_reclaim(0) + 1);
  EXPECT_EQ(a.take(0, 64 << 10, nullptr), 0u) << "a freed chunk of an exported slab came back";
  ASSERT_TRUE(a.release(p, &slab, &exported));
  EXPECT_TRUE(exported) << "its handle is withdrawn";
  EXPECT_EQ(slab, kBase) << "a retired slab goes back once idle";
  EXPECT_EQ(a.counts(0).slabs, 0u);
  EXPECT_FALSE(a.mark_exported(p)) << "not in use";
  // A failed export leaves the chunk unexported (its free withdraws nothing); the slab stays
  // retired.
  const uint64_t r = a.add_slab(0, kBase + kSlab, 512);
  ASSERT_TRUE(a.mark_exported(r, &fresh));
  a.unmark_exported(r);
  ASSERT_TRUE(a.release(r, &slab, &exported));
  EXPECT_FALSE(exported);
  EXPECT_EQ(slab, kBase + kSlab);
}

}  // namespace
