// The page-state tracker behind managed memory (client/managed_pages.h).
#include "client/managed_pages.h"

#include <gtest/gtest.h>

using rgpu::client::PageRun;
using rgpu::client::PageState;
using rgpu::client::PageTracker;

namespace {
constexpr uint64_t G = PageTracker::kGranule;
}

TEST(ManagedPages, SendsOnlyDirtyGranulesCoalesced) {
  PageTracker t(10 * G, PageState::Clean);
  t.set({1 * G, G}, PageState::Dirty);
  t.set({2 * G, G}, PageState::Dirty);
  t.set({7 * G, G}, PageState::Dirty);
  std::vector<PageRun> send, protect;
  t.to_device(0, 10 * G, &send, &protect);
  ASSERT_EQ(send.size(), 2u);
  EXPECT_EQ(send[0], (PageRun{1 * G, 2 * G}));
  EXPECT_EQ(send[1], (PageRun{7 * G, G}));
  ASSERT_EQ(protect.size(), 1u);  // every granule changed: one run
  EXPECT_EQ(protect[0], (PageRun{0, 10 * G}));
  EXPECT_EQ(t.count(PageState::Device), 10u);
  // Nothing changes twice.
  send.clear(), protect.clear();
  t.to_device(0, 10 * G, &send, &protect);
  EXPECT_TRUE(send.empty());
  EXPECT_TRUE(protect.empty());
}

TEST(ManagedPages, PartialRangeTouchesOnlyItsGranules) {
  PageTracker t(4 * G, PageState::Dirty);
  std::vector<PageRun> send, protect;
  t.to_device(G + 10, 20, &send, &protect);  // inside granule 1
  ASSERT_EQ(send.size(), 1u);
  EXPECT_EQ(send[0], (PageRun{G, G}));
  EXPECT_EQ(t.at(0), PageState::Dirty);
  EXPECT_EQ(t.at(G), PageState::Device);
  EXPECT_EQ(t.at(2 * G), PageState::Dirty);
}

TEST(ManagedPages, LastGranuleIsClippedToTheSize) {
  PageTracker t(2 * G + 100, PageState::Dirty);
  std::vector<PageRun> send;
  t.flush(0, 3 * G, &send);
  ASSERT_EQ(send.size(), 1u);
  EXPECT_EQ(send[0], (PageRun{0, 2 * G + 100}));
  EXPECT_EQ(t.count(PageState::Clean), 3u);
}

TEST(ManagedPages, FlushKeepsTheHostCopy) {
  PageTracker t(3 * G, PageState::Clean);
  t.set({G, G}, PageState::Dirty);
  std::vector<PageRun> send;
  t.flush(0, 3 * G, &send);
  ASSERT_EQ(send.size(), 1u);
  EXPECT_EQ(t.count(PageState::Clean), 3u);
  EXPECT_EQ(t.count(PageState::Device), 0u);
}

TEST(ManagedPages, DiscardDropsDirtyBytes) {
  PageTracker t(2 * G, PageState::Dirty);
  std::vector<PageRun> protect;
  t.to_device(0, 2 * G, nullptr, &protect);
  EXPECT_EQ(t.count(PageState::Device), 2u);
  ASSERT_EQ(protect.size(), 1u);
}

TEST(ManagedPages, FetchRunsAreBoundedAndStartAtTheFault) {
  PageTracker t(40 * G, PageState::Device);
  t.set({5 * G, G}, PageState::Clean);
  auto runs = t.device_runs(0, 40 * G, 16 * G);
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0], (PageRun{0, 5 * G}));
  EXPECT_EQ(runs[1], (PageRun{6 * G, 16 * G}));
  EXPECT_EQ(runs[2], (PageRun{22 * G, 16 * G}));
  EXPECT_EQ(runs[3], (PageRun{38 * G, 2 * G}));
  EXPECT_EQ(t.device_run_at(3 * G + 7, 16 * G), (PageRun{3 * G, 2 * G}));
  EXPECT_EQ(t.device_run_at(5 * G, 16 * G).size, 0u);  // not the device's
  t.set(runs[1], PageState::Clean);
  EXPECT_EQ(t.count(PageState::Device), 40u - 17u);
}
