#include "client/context.h"

namespace rgpu::client {

namespace {

// The calling thread's context stack.  The top (the current context) is kept apart in a trivially
// destructible slot: reading it is one TLS load, and still works from other thread_local
// destructors that call CUDA after the vector below is gone.
thread_local Context* t_top = nullptr;
Context** top_slot() { return &t_top; }
std::vector<Context*>& below_slot() {
  thread_local std::vector<Context*> s;
  return s;
}

}  // namespace

ContextTable::ThreadStack ContextTable::this_library_stack() { return {&top_slot, &below_slot}; }

void ContextTable::push_top(Context* ctx) const {
  Context*& t = top();
  if (t) stack_.below().push_back(t);
  t = ctx;
}

Context* ContextTable::pop_top() const {
  Context*& t = top();
  Context* old = t;
  auto& b = stack_.below();
  if (b.empty()) {
    t = nullptr;
  } else {
    t = b.back();
    b.pop_back();
  }
  return old;
}

void ContextTable::set_devices(int devices) {
  for (int d = 0; d < devices; ++d) {
    auto c = std::make_unique<Context>();
    c->device = d;
    c->primary = true;
    primary_.push_back(c.get());
    known_.insert(c.get());
    all_.push_back(std::move(c));
  }
  retains_.assign(primary_.size(), 0);
}

Context* ContextTable::primary(int dev) const {
  return dev >= 0 && dev < device_count() ? primary_[dev] : nullptr;
}

Error ContextTable::primary_retain(int dev, Context** out) {
  if (!out) return errc::InvalidValue;
  if (!primary(dev)) return errc::InvalidDevice;
  std::lock_guard<std::mutex> lock(mu_);
  ++retains_[dev];
  *out = primary_[dev];
  return errc::Success;
}

Error ContextTable::primary_release(int dev, ContextContents* released) {
  if (!primary(dev)) return errc::InvalidDevice;
  std::lock_guard<std::mutex> lock(mu_);
  if (retains_[dev] == 0) return errc::InvalidContext;
  if (--retains_[dev] == 0) take_contents(primary_[dev], released);
  return errc::Success;
}

Error ContextTable::primary_reset(int dev, ContextContents* released) {
  if (!primary(dev)) return errc::InvalidDevice;
  std::lock_guard<std::mutex> lock(mu_);
  retains_[dev] = 0;
  take_contents(primary_[dev], released);
  return errc::Success;
}

Error ContextTable::primary_state(int dev, unsigned* flags, bool* active) const {
  if (!flags || !active) return errc::InvalidValue;
  if (!primary(dev)) return errc::InvalidDevice;
  std::lock_guard<std::mutex> lock(mu_);
  *flags = primary_[dev]->flags.load(std::memory_order_relaxed);
  *active = retains_[dev] > 0;
  return errc::Success;
}

Error ContextTable::primary_set_flags(int dev, unsigned flags) {
  if (!primary(dev)) return errc::InvalidDevice;
  if (flags & ~kContextFlagsMask) return errc::InvalidValue;
  // One scheduling mode at most: spin (1), yield (2) or blocking sync (4).
  const unsigned sched = flags & kContextSchedMask;
  if (sched & (sched - 1)) return errc::InvalidValue;
  primary_[dev]->flags.store(flags, std::memory_order_relaxed);
  return errc::Success;
}

unsigned ContextTable::primary_retains(int dev) const {
  if (!primary(dev)) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  return retains_[dev];
}

Error ContextTable::create(int dev, unsigned flags, Context** out) {
  if (!out) return errc::InvalidValue;
  if (!primary(dev)) return errc::InvalidDevice;
  const unsigned sched = flags & kContextSchedMask;
  if ((flags & ~kContextFlagsMask) || (sched & (sched - 1))) return errc::InvalidValue;
  auto c = std::make_unique<Context>();
  c->device = dev;
  c->flags = flags;
  Context* ctx = c.get();
  {
    std::lock_guard<std::mutex> lock(mu_);
    known_.insert(ctx);
    all_.push_back(std::move(c));
  }
  push_top(ctx);
  *out = ctx;
  return errc::Success;
}

Error ContextTable::destroy(Context* ctx, ContextContents* released) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ctx || !known_.count(ctx)) return errc::InvalidContext;
    if (ctx->primary) return errc::InvalidContext;  // primary contexts are released, not destroyed
    if (ctx->destroyed.exchange(true)) return errc::ContextIsDestroyed;
    take_contents(ctx, released);
  }
  if (top() == ctx) pop_top();
  return errc::Success;
}

Error ContextTable::set_current(Context* ctx) {
  if (!ctx) {
    if (top()) pop_top();
    return errc::Success;
  }
  if (!valid(ctx)) return errc::InvalidContext;
  top() = ctx;  // replaces the top, or becomes it on an empty stack
  return errc::Success;
}

Context* ContextTable::current() const { return top(); }

bool ContextTable::set_current_primary(int dev) {
  Context* p = primary(dev);
  if (p) top() = p;
  return p != nullptr;
}

Error ContextTable::push(Context* ctx) {
  if (!ctx || !valid(ctx)) return errc::InvalidContext;
  push_top(ctx);
  return errc::Success;
}

Error ContextTable::pop(Context** out) {
  if (!top()) return errc::InvalidContext;
  Context* old = pop_top();
  if (out) *out = old;
  return errc::Success;
}

Error ContextTable::current_or_default(Context** out) const {
  Context* c = current();
  if (!c) {
    if (primary_.empty()) return errc::NoDevice;
    c = primary_[0];
  }
  if (c->destroyed.load(std::memory_order_relaxed)) return errc::ContextIsDestroyed;
  *out = c;
  return errc::Success;
}

bool ContextTable::valid(const Context* ctx) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ctx && known_.count(ctx) && !ctx->destroyed.load(std::memory_order_relaxed);
}

Error ContextTable::adopt(Context* ctx, Stream* s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ctx->destroyed) return errc::ContextIsDestroyed;
  ctx->streams.insert(s);
  return errc::Success;
}

Error ContextTable::adopt(Context* ctx, Event* e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ctx->destroyed) return errc::ContextIsDestroyed;
  ctx->events.insert(e);
  return errc::Success;
}

Error ContextTable::adopt(Context* ctx, Module* m) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ctx->destroyed) return errc::ContextIsDestroyed;
  ctx->modules.insert(m);
  return errc::Success;
}

void ContextTable::disown(Context* ctx, Stream* s) {
  std::lock_guard<std::mutex> lock(mu_);
  ctx->streams.erase(s);
}

void ContextTable::disown(Context* ctx, Event* e) {
  std::lock_guard<std::mutex> lock(mu_);
  ctx->events.erase(e);
}

void ContextTable::disown(Context* ctx, Module* m) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ctx->modules.find(m);
  if (it != ctx->modules.end()) ctx->modules.erase(it);
}

void ContextTable::take_contents(Context* ctx, ContextContents* out) {
  if (out) {
    out->streams.insert(out->streams.end(), ctx->streams.begin(), ctx->streams.end());
    out->events.insert(out->events.end(), ctx->events.begin(), ctx->events.end());
    out->modules.insert(out->modules.end(), ctx->modules.begin(), ctx->modules.end());
  }
  ctx->streams.clear();
  ctx->events.clear();
  ctx->modules.clear();
}

}  // namespace rgpu::client
