// Per-user limits shared by the session processes of one rgpud (issue 36): the user accounts
// (--mem-limit-per-user, server/user_accounts.h) and the per-user share of the decompression
// slots (--max-decompressions-per-user, server/decompressions.h).  The tables live in MAP_SHARED
// memory, so the tests that matter fork: sessions are processes.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <new>
#include <vector>

#include "server/decompressions.h"
#include "server/quota.h"
#include "server/user_accounts.h"

using namespace rgpu;
using server::UserAccounts;

namespace {

constexpr uint64_t kMiB = 1ull << 20;

TEST(UserAccounts, SessionsOfOneUserShareTheLimitAndOthersAreUntouched) {
  UserAccounts* a = UserAccounts::create();
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->enter(101, 1));
  ASSERT_TRUE(a->enter(102, 1));
  ASSERT_TRUE(a->enter(201, 2));
  const int s1 = a->find(101), s2 = a->find(102), t = a->find(201);
  ASSERT_GE(s1, 0);
  ASSERT_GE(s2, 0);
  ASSERT_GE(t, 0);
  EXPECT_EQ(a->user(s2), 1u);
  uint64_t held = 0;
  int sessions = 0;
  EXPECT_TRUE(a->charge(s1, 300 * kMiB, 400 * kMiB, held, sessions));
  EXPECT_FALSE(a->charge(s2, 200 * kMiB, 400 * kMiB, held, sessions));
  EXPECT_EQ(held, 300 * kMiB);
  EXPECT_EQ(sessions, 2);
  EXPECT_TRUE(a->charge(s2, 100 * kMiB, 400 * kMiB, held, sessions));  // exactly the limit
  EXPECT_TRUE(a->charge(t, 400 * kMiB, 400 * kMiB, held, sessions));   // another user
  EXPECT_EQ(a->held(1), 400 * kMiB);
  // The daemon reaps session 101: what it held goes with it.
  a->leave(101);
  EXPECT_EQ(a->find(101), -1);
  EXPECT_EQ(a->held(1), 100 * kMiB);
  EXPECT_TRUE(a->charge(s2, 300 * kMiB, 400 * kMiB, held, sessions));
  a->release(s2, 1000 * kMiB);  // never below zero
  EXPECT_EQ(a->held(1), 0u);
  munmap(a, sizeof *a);
}

TEST(UserAccounts, AHugeRequestCannotWrapTheAccount) {
  // A client asks for 2^64 - 100 MiB while it holds 300 MiB: were it added first, the entry would
  // wrap to 200 MiB and fit a 400 MiB limit.  Refused, and what the session holds stays charged.
  UserAccounts* a = UserAccounts::create();
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->enter(401, 4));
  server::MemoryQuota q(0, {a, a->find(401), 400 * kMiB});  // no per-session limit
  ASSERT_TRUE(q.charge(server::Hold::Malloc, 0, 300 * kMiB, "allocating").ok());
  EXPECT_FALSE(q.charge(server::Hold::Malloc, 0, UINT64_MAX - 100 * kMiB + 1, "allocating").ok());
  EXPECT_FALSE(q.fits(UINT64_MAX - 100 * kMiB + 1));
  EXPECT_EQ(q.held(), 300 * kMiB);
  EXPECT_EQ(a->held(4), 300 * kMiB);
  EXPECT_FALSE(q.charge(server::Hold::Malloc, 0, 101 * kMiB, "allocating").ok());
  // A second session's huge entry saturates the sum rather than wrapping it.
  ASSERT_TRUE(a->enter(402, 4));
  uint64_t held = 0;
  int sessions = 0;
  EXPECT_TRUE(a->charge(a->find(402), UINT64_MAX - 200 * kMiB, 0, held, sessions));
  EXPECT_EQ(a->held(4), UINT64_MAX);
  EXPECT_FALSE(a->charge(a->find(401), 1, UINT64_MAX - 1, held, sessions));
  munmap(a, sizeof *a);
}

TEST(UserAccounts, ConcurrentSessionsNeverHoldMoreThanTheLimit) {
  // Eight session processes of one user charge 1 MiB at a time as fast as they can, under a
  // 100 MiB limit: together they get exactly 100 MiB at most, and every process gets some.
  UserAccounts* a = UserAccounts::create();
  ASSERT_NE(a, nullptr);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  std::vector<pid_t> kids;
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  for (int i = 0; i < 8; ++i) {
    pid_t p = fork();
    if (p == 0) {
      close(go[1]);
      char c;
      if (read(go[0], &c, 1) != 0) _exit(2);  // wait for the start (the writer's close)
      const int e = a->find(getpid());
      uint64_t held = 0;
      int sessions = 0, got = 0;
      for (int k = 0; k < 1000; ++k) got += a->charge(e, kMiB, 100 * kMiB, held, sessions);
      _exit(write(pipefd[1], &got, sizeof got) == sizeof got ? 0 : 1);
    }
    ASSERT_TRUE(a->enter(p, 7));
    kids.push_back(p);
  }
  close(go[0]);
  close(go[1]);
  for (pid_t p : kids) waitpid(p, nullptr, 0);
  int total = 0;
  for (size_t i = 0; i < kids.size(); ++i) {
    int got = -1;
    ASSERT_EQ(read(pipefd[0], &got, sizeof got), static_cast<ssize_t>(sizeof got));
    total += got;
  }
  EXPECT_LE(total, 100);
  EXPECT_GE(total, 90);  // refusals near the limit are allowed, not a collapse
  EXPECT_EQ(a->held(7), static_cast<uint64_t>(total) * kMiB);
  for (pid_t p : kids) a->leave(p);
  EXPECT_EQ(a->held(7), 0u);
  close(pipefd[0]);
  close(pipefd[1]);
  munmap(a, sizeof *a);
}

TEST(UserAccounts, TheSessionQuotaNamesTheUserLimit) {
  UserAccounts* a = UserAccounts::create();
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->enter(301, 3));
  ASSERT_TRUE(a->enter(302, 3));
  server::MemoryQuota first(0, {a, a->find(301), 256 * kMiB});
  server::MemoryQuota second(512 * kMiB, {a, a->find(302), 256 * kMiB});
  EXPECT_TRUE(first.charge(server::Hold::Malloc, 0, 200 * kMiB, "allocating").ok());
  EXPECT_FALSE(second.fits(100 * kMiB));
  backend::Status s = second.charge(server::Hold::Pool, 0, 100 * kMiB, "allocating 100 MiB");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("--mem-limit-per-user"), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("2 sessions hold 209715200 bytes"), std::string::npos) << s.message;
  EXPECT_TRUE(second.charge(server::Hold::Pool, 0, 56 * kMiB, "allocating").ok());
  // A release gives the user's account back what it gave the session.
  first.release(server::Hold::Malloc, 0, 200 * kMiB);
  EXPECT_EQ(a->held(3), 56 * kMiB);
  first.charge(server::Hold::Array, 1, 10 * kMiB, "array");
  first.release_all(server::Hold::Array, 1);
  EXPECT_EQ(a->held(3), 56 * kMiB);
  munmap(a, sizeof *a);
}

TEST(DecompressionSlots, OneUserHoldsAtMostItsShare) {
  auto* slots = server::DecompressionSlots::create(4);
  ASSERT_NE(slots, nullptr);
  // User 1 holds its share of 2 (from two processes): a third waits, then fails naming its share;
  // user 2 still gets a slot at once.
  EXPECT_GE(slots->acquire(1001, 1, 2, 0), 0);
  int second = slots->acquire(1002, 1, 2, 0);
  EXPECT_GE(second, 0);
  EXPECT_EQ(slots->acquire(1003, 1, 2, 100), -2);
  EXPECT_EQ(slots->held_by(1), 2);
  EXPECT_GE(slots->acquire(2001, 2, 2, 0), 0);
  EXPECT_EQ(slots->in_use(), 3);
  // A free slot beyond the share is still free for user 1 once one of its own is given back.
  slots->release(second, 1002);
  EXPECT_GE(slots->acquire(1003, 1, 2, 0), 0);
  // The total still bounds everyone: with four held, a user under its share gets -1.
  EXPECT_GE(slots->acquire(3001, 3, 2, 0), 0);
  EXPECT_EQ(slots->acquire(4001, 4, 2, 50), -1);
  // A session that dies frees its slot, whichever user it belonged to.
  slots->release_process(1001);
  slots->release_process(1003);
  EXPECT_EQ(slots->held_by(1), 0);
  EXPECT_EQ(slots->in_use(), 2);
  munmap(slots, sizeof *slots);
}

TEST(DecompressionSlots, ConcurrentTakersOfOneUserKeepToTheShare) {
  auto* slots = server::DecompressionSlots::create(8);
  ASSERT_NE(slots, nullptr);
  // Six processes of one user take and give back slots as fast as they can: counted between
  // acquire's return and the release (a slot taken and given back inside acquire is not held),
  // never more than the share of two at once.
  struct Count {
    std::atomic<int> now{0}, most{0};
  };
  void* page =
      mmap(nullptr, sizeof(Count), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  auto* count = new (page) Count();
  std::vector<pid_t> kids;
  for (int i = 0; i < 6; ++i) {
    pid_t p = fork();
    if (p == 0) {
      for (int k = 0; k < 50; ++k) {
        int s = slots->acquire(getpid(), 9, 2, 10000);
        if (s < 0) _exit(3);
        const int n = ++count->now;
        int most = count->most.load();
        while (n > most && !count->most.compare_exchange_weak(most, n)) {
        }
        usleep(200);
        --count->now;
        slots->release(s, getpid());
      }
      _exit(0);
    }
    kids.push_back(p);
  }
  for (pid_t p : kids) {
    int status = -1;
    waitpid(p, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a taker got no slot";
  }
  EXPECT_LE(count->most.load(), 2);
  EXPECT_GE(count->most.load(), 1);
  EXPECT_EQ(slots->in_use(), 0);
  munmap(page, sizeof(Count));
  munmap(slots, sizeof *slots);
}

}  // namespace
