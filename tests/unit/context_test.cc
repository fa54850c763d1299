// The client's contexts: primary contexts (retain/release/reset/state/flags), created contexts,
// and each thread's current-context stack.  Every scenario runs on its own thread, so stacks
// start empty.
#include "client/context.h"

#include <gtest/gtest.h>

#include <thread>

namespace rgpu::client {
namespace {

template <typename F>
void on_thread(F f) {
  std::thread t(f);
  t.join();
}

TEST(Contexts, PrimaryRetainReleaseCountsAndState) {
  ContextTable t(2);
  on_thread([&] {
    unsigned flags = 99;
    bool active = true;
    ASSERT_EQ(t.primary_state(1, &flags, &active), errc::Success);
    EXPECT_FALSE(active);
    EXPECT_EQ(flags, 0u);
    Context* a = nullptr;
    Context* b = nullptr;
    ASSERT_EQ(t.primary_retain(1, &a), errc::Success);
    ASSERT_EQ(t.primary_retain(1, &b), errc::Success);
    EXPECT_EQ(a, b);  // one primary context per device, always the same handle
    EXPECT_NE(a, t.primary(0));
    EXPECT_TRUE(a->primary);
    EXPECT_EQ(a->device, 1);
    EXPECT_EQ(t.primary_retains(1), 2u);
    ASSERT_EQ(t.primary_state(1, &flags, &active), errc::Success);
    EXPECT_TRUE(active);
    ContextContents released;
    EXPECT_EQ(t.primary_release(1, &released), errc::Success);
    ASSERT_EQ(t.primary_state(1, &flags, &active), errc::Success);
    EXPECT_TRUE(active);
    EXPECT_EQ(t.primary_release(1, &released), errc::Success);
    ASSERT_EQ(t.primary_state(1, &flags, &active), errc::Success);
    EXPECT_FALSE(active);
    EXPECT_EQ(t.primary_release(1, &released), errc::InvalidContext);  // nothing to release
    EXPECT_EQ(t.primary_retain(2, &a), errc::InvalidDevice);
    EXPECT_EQ(t.primary_retain(-1, &a), errc::InvalidDevice);
  });
}

TEST(Contexts, PrimaryFlagsAndReset) {
  ContextTable t(1);
  on_thread([&] {
    Context* p = nullptr;
    ASSERT_EQ(t.primary_retain(0, &p), errc::Success);
    EXPECT_EQ(t.primary_set_flags(0, 4), errc::Success);       // blocking sync, while active
    EXPECT_EQ(t.primary_set_flags(0, 3), errc::InvalidValue);  // two scheduling modes
    EXPECT_EQ(t.primary_set_flags(0, 0x100), errc::InvalidValue);
    unsigned flags = 0;
    bool active = false;
    ASSERT_EQ(t.primary_state(0, &flags, &active), errc::Success);
    EXPECT_EQ(flags, 4u);
    auto* s = reinterpret_cast<Stream*>(0x1000);
    ASSERT_EQ(t.adopt(p, s), errc::Success);
    ContextContents released;
    ASSERT_EQ(t.primary_reset(0, &released), errc::Success);
    ASSERT_EQ(released.streams.size(), 1u);
    EXPECT_EQ(released.streams[0], s);
    ASSERT_EQ(t.primary_state(0, &flags, &active), errc::Success);
    EXPECT_FALSE(active);
    EXPECT_EQ(t.primary_retains(0), 0u);
    EXPECT_TRUE(t.valid(p));  // the handle outlives a reset
  });
}

TEST(Contexts, LastPrimaryReleaseHandsBackWhatBelongsToIt) {
  ContextTable t(1);
  on_thread([&] {
    Context* p = nullptr;
    ASSERT_EQ(t.primary_retain(0, &p), errc::Success);
    auto* e = reinterpret_cast<Event*>(0x2000);
    auto* m = reinterpret_cast<Module*>(0x3000);
    ASSERT_EQ(t.adopt(p, e), errc::Success);
    ASSERT_EQ(t.adopt(p, m), errc::Success);
    ASSERT_EQ(t.adopt(p, m), errc::Success);  // loaded twice: two references
    t.disown(p, m);
    ContextContents released;
    ASSERT_EQ(t.primary_release(0, &released), errc::Success);
    ASSERT_EQ(released.events.size(), 1u);
    EXPECT_EQ(released.events[0], e);
    ASSERT_EQ(released.modules.size(), 1u);
    EXPECT_EQ(released.modules[0], m);
  });
}

TEST(Contexts, StackIsPerThread) {
  ContextTable t(2);
  Context* created = nullptr;
  on_thread([&] {
    ASSERT_EQ(t.create(1, 0, &created), errc::Success);
    EXPECT_EQ(t.current(), created);  // cuCtxCreate makes it current
  });
  on_thread([&] { EXPECT_EQ(t.current(), nullptr); });
  on_thread([&] {
    ASSERT_EQ(t.set_current(t.primary(0)), errc::Success);
    std::thread other([&] {
      ASSERT_EQ(t.set_current(created), errc::Success);
      EXPECT_EQ(t.current(), created);
    });
    other.join();
    EXPECT_EQ(t.current(), t.primary(0));
  });
}

TEST(Contexts, PushPopAndSetCurrent) {
  ContextTable t(2);
  on_thread([&] {
    Context* popped = nullptr;
    EXPECT_EQ(t.pop(&popped), errc::InvalidContext);   // empty stack
    EXPECT_EQ(t.set_current(nullptr), errc::Success);  // no-op when empty
    Context* c = nullptr;
    ASSERT_EQ(t.create(1, 0, &c), errc::Success);
    ASSERT_EQ(t.push(t.primary(0)), errc::Success);
    EXPECT_EQ(t.current(), t.primary(0));
    ASSERT_EQ(t.set_current(t.primary(1)), errc::Success);  // replaces the top
    EXPECT_EQ(t.current(), t.primary(1));
    ASSERT_EQ(t.pop(&popped), errc::Success);
    EXPECT_EQ(popped, t.primary(1));
    EXPECT_EQ(t.current(), c);                         // what was under it
    ASSERT_EQ(t.set_current(nullptr), errc::Success);  // pops
    EXPECT_EQ(t.current(), nullptr);
    Context* d = nullptr;
    ASSERT_EQ(t.current_or_default(&d), errc::Success);
    EXPECT_EQ(d, t.primary(0));  // the runtime's implicit device 0
    EXPECT_EQ(t.push(nullptr), errc::InvalidContext);
    EXPECT_EQ(t.push(reinterpret_cast<Context*>(0x10)), errc::InvalidContext);
  });
}

TEST(Contexts, CreateRefusesBadArguments) {
  ContextTable t(1);
  on_thread([&] {
    Context* c = nullptr;
    EXPECT_EQ(t.create(1, 0, &c), errc::InvalidDevice);
    EXPECT_EQ(t.create(0, 0x6, &c), errc::InvalidValue);  // yield and blocking sync
    EXPECT_EQ(t.create(0, 0x200, &c), errc::InvalidValue);
    EXPECT_EQ(t.create(0, 0, nullptr), errc::InvalidValue);
    EXPECT_EQ(t.current(), nullptr);  // nothing was pushed
    ASSERT_EQ(t.create(0, 0x1 | 0x8, &c), errc::Success);
    EXPECT_EQ(c->flags.load(), 0x9u);
    EXPECT_FALSE(c->primary);
  });
}

TEST(Contexts, DestroyWhileCurrentPopsItAndReleasesItsObjects) {
  ContextTable t(1);
  on_thread([&] {
    Context* c = nullptr;
    ASSERT_EQ(t.push(t.primary(0)), errc::Success);
    ASSERT_EQ(t.create(0, 0, &c), errc::Success);
    auto* s = reinterpret_cast<Stream*>(0x1000);
    auto* m = reinterpret_cast<Module*>(0x3000);
    ASSERT_EQ(t.adopt(c, s), errc::Success);
    ASSERT_EQ(t.adopt(c, m), errc::Success);
    ContextContents released;
    ASSERT_EQ(t.destroy(c, &released), errc::Success);
    EXPECT_EQ(released.streams, std::vector<Stream*>{s});
    EXPECT_EQ(released.modules, std::vector<Module*>{m});
    EXPECT_EQ(t.current(), t.primary(0));  // popped, as cuCtxPopCurrent would
    EXPECT_FALSE(t.valid(c));
    EXPECT_EQ(t.destroy(c, &released), errc::ContextIsDestroyed);
    EXPECT_EQ(t.adopt(c, s), errc::ContextIsDestroyed);
    EXPECT_EQ(t.set_current(c), errc::InvalidContext);
    EXPECT_EQ(t.destroy(t.primary(0), &released), errc::InvalidContext);
    EXPECT_EQ(t.destroy(nullptr, &released), errc::InvalidContext);
  });
}

TEST(Contexts, DestroyedWhileCurrentOnAnotherThreadIsAnErrorThere) {
  ContextTable t(1);
  Context* c = nullptr;
  on_thread([&] {
    ASSERT_EQ(t.create(0, 0, &c), errc::Success);
    std::thread other([&] {
      ContextContents released;
      ASSERT_EQ(t.destroy(c, &released), errc::Success);
    });
    other.join();
    EXPECT_EQ(t.current(), c);  // not popped from another thread's stack
    Context* d = nullptr;
    EXPECT_EQ(t.current_or_default(&d), errc::ContextIsDestroyed);
    EXPECT_EQ(c->device, 0);  // still readable: handles are never freed
  });
}

TEST(Contexts, SetCurrentPrimaryReplacesTheTop) {
  ContextTable t(2);
  on_thread([&] {
    Context* c = nullptr;
    ASSERT_EQ(t.create(0, 0, &c), errc::Success);
    ASSERT_EQ(t.push(t.primary(0)), errc::Success);
    EXPECT_TRUE(t.set_current_primary(1));
    EXPECT_EQ(t.current(), t.primary(1));
    EXPECT_FALSE(t.set_current_primary(2));
    EXPECT_EQ(t.current(), t.primary(1));
    Context* popped = nullptr;
    ASSERT_EQ(t.pop(&popped), errc::Success);
    EXPECT_EQ(t.current(), c);  // the stack below is untouched
  });
}

}  // namespace
}  // namespace rgpu::client
