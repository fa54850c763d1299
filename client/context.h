// Contexts on the client, with the CUDA driver's semantics: each virtual device has one primary
// context (retained and released by count, reset, flags settable at any time), programs may
// create more contexts, and each thread has a stack of current contexts.  The runtime's current
// device IS its primary context (Client::set_current_device makes it current, retained once for
// the runtime, as NVIDIA's runtime does).
//
// Context objects are never freed: a destroyed context is marked so, and a handle to it held by
// another thread (or still on its stack) yields errc::ContextIsDestroyed instead of a dangling
// pointer.  What belongs to a context (streams, events, modules) is listed in it so that
// destroying or resetting it can release them (Client::context_destroy).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "client/errors.h"

namespace rgpu::client {

struct Stream;
struct Event;
struct Module;

// CU_CTX_* / cudaDevice* flags: scheduling (low 3 bits), map host, local memory resize, and the
// coredump/sync-memops bits; anything else is refused.
constexpr unsigned kContextFlagsMask = 0xff;
constexpr unsigned kContextSchedMask = 0x7;

struct Context {
  int device = 0;
  bool primary = false;
  std::atomic<unsigned> flags{0};
  std::atomic<bool> destroyed{false};
  // What belongs to it; guarded by ContextTable's lock.
  std::set<Stream*> streams;
  std::set<Event*> events;
  std::multiset<Module*> modules;
};

// What a destroyed or reset context owned, for the caller to release (server calls happen there,
// outside the table's lock).
struct ContextContents {
  std::vector<Stream*> streams;
  std::vector<Event*> events;
  std::vector<Module*> modules;
};

class ContextTable {
 public:
  ContextTable() = default;
  explicit ContextTable(int devices) { set_devices(devices); }
  // Once, before any other use: one primary context per virtual device.
  void set_devices(int devices);
  int device_count() const { return static_cast<int>(primary_.size()); }

  // ---- primary contexts (cuDevicePrimaryCtx*)
  Context* primary(int dev) const;  // nullptr for an invalid device; does not retain
  Error primary_retain(int dev, Context** out);
  // Dropping the last reference makes it inactive; its contents go to `released`.
  Error primary_release(int dev, ContextContents* released);
  // Inactive, count 0, contents released; the handle stays the same.
  Error primary_reset(int dev, ContextContents* released);
  Error primary_state(int dev, unsigned* flags, bool* active) const;
  Error primary_set_flags(int dev, unsigned flags);
  unsigned primary_retains(int dev) const;

  // ---- created contexts (cuCtxCreate / cuCtxDestroy)
  // Made current on the calling thread (pushed), as cuCtxCreate does.
  Error create(int dev, unsigned flags, Context** out);
  // Popped from the calling thread's stack if current there; contents go to `released`.
  Error destroy(Context* ctx, ContextContents* released);

  // ---- the calling thread's stack (cuCtxSetCurrent/GetCurrent/PushCurrent/PopCurrent)
  Error set_current(Context* ctx);  // replaces the top; nullptr pops (no-op when empty)
  Context* current() const;         // top, or nullptr
  // set_current(primary(dev)) without the lookup (cudaSetDevice); false for an invalid device.
  bool set_current_primary(int dev);
  Error push(Context* ctx);
  Error pop(Context** out);
  // The context a call without one uses: the current context, else device 0's primary one
  // (the runtime's implicit initialisation).  ContextIsDestroyed when the current one was.
  Error current_or_default(Context** out) const;

  // ---- ownership
  Error adopt(Context* ctx, Stream* s);
  Error adopt(Context* ctx, Event* e);
  Error adopt(Context* ctx, Module* m);
  void disown(Context* ctx, Stream* s);
  void disown(Context* ctx, Event* e);
  void disown(Context* ctx, Module* m);  // one reference

  bool valid(const Context* ctx) const;  // known and not destroyed

 private:
  // The calling thread's stack: thread_locals of the library that made this table (the one
  // client core, client/core_table.h), bound at construction so that code linked into another
  // library uses the same ones.  The top is apart in a trivially destructible slot.
  struct ThreadStack {
    Context** (*top)();
    std::vector<Context*>& (*below)();
  };
  static ThreadStack this_library_stack();
  ThreadStack stack_ = this_library_stack();
  Context*& top() const { return *stack_.top(); }
  void push_top(Context* ctx) const;
  Context* pop_top() const;
  static void take_contents(Context* ctx, ContextContents* out);
  mutable std::mutex mu_;
  std::vector<Context*> primary_;
  std::vector<unsigned> retains_;
  std::set<const Context*> known_;
  std::vector<std::unique_ptr<Context>> all_;  // never shrinks (see above)
};

}  // namespace rgpu::client
