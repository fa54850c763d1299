#include "server/decompressions.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <new>

#include "common/log.h"

namespace rgpu::server {
namespace {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
              std::atomic<uint32_t>::is_always_lock_free);

uint32_t* word(std::atomic<uint32_t>& a) { return reinterpret_cast<uint32_t*>(&a); }

// Not FUTEX_PRIVATE_FLAG: the word is shared between processes.
void futex_wait(std::atomic<uint32_t>& a, uint32_t seen, std::chrono::milliseconds ms) {
  timespec ts{static_cast<time_t>(ms.count() / 1000),
              static_cast<long>(ms.count() % 1000) * 1000000};
  syscall(SYS_futex, word(a), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>& a) {
  syscall(SYS_futex, word(a), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

int64_t monotonic_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

}  // namespace

DecompressionSlots* DecompressionSlots::create(int slots) {
  if (slots < 1 || slots > kMaxSlots) return nullptr;
  void* p = mmap(nullptr, sizeof(DecompressionSlots), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* s = new (p) DecompressionSlots();
  s->count_ = slots;
  s->released_.store(0);
  for (auto& h : s->holder_) h.store(0);
  return s;
}

int DecompressionSlots::try_take(uint64_t h) {
  for (int i = 0; i < count_; ++i) {
    uint64_t expect = 0;
    if (holder_[i].compare_exchange_strong(expect, h)) return i;
  }
  return -1;
}

int DecompressionSlots::held_by(uint32_t user) const {
  int n = 0;
  for (int i = 0; i < count_; ++i) n += holder_[i].load() >> 32 == user;
  return n;
}

void DecompressionSlots::wake() {
  released_.fetch_add(1);
  futex_wake_all(released_);
}

int DecompressionSlots::acquire(pid_t pid, uint32_t user, int per_user, int wait_ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(0, wait_ms));
  const bool shares = user && per_user > 0;
  bool by_user = false;  // the user's share stood in the way at some point of the wait
  for (;;) {
    const uint32_t seen = released_.load();
    if (shares && held_by(user) >= per_user) {
      by_user = true;
    } else if (int slot = try_take(holder(pid, user)); slot >= 0) {
      // Another session of the user may have taken one at the same moment: the one that sees
      // the share exceeded gives its slot back (both may, near the share; never both keep it).
      if (!shares || held_by(user) <= per_user) return slot;
      holder_[slot].store(0);
      wake();
      by_user = true;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return by_user ? -2 : -1;
    // Woken by a release; the cap makes a lost wakeup cost at most 50 ms.
    futex_wait(released_, seen, std::min(left, std::chrono::milliseconds(50)));
  }
}

void DecompressionSlots::release(int slot, pid_t pid) {
  if (slot < 0 || slot >= count_) return;
  uint64_t h = holder_[slot].load();
  if (h == 0 || pid_of(h) != pid) return;  // the daemon freed it already
  if (!holder_[slot].compare_exchange_strong(h, 0)) return;
  wake();
}

void DecompressionSlots::release_process(pid_t pid) {
  if (pid <= 0) return;
  bool any = false;
  for (int i = 0; i < count_; ++i) {
    uint64_t h = holder_[i].load();
    if (h != 0 && pid_of(h) == pid) any |= holder_[i].compare_exchange_strong(h, 0);
  }
  if (any) wake();
}

int DecompressionSlots::in_use() const {
  int n = 0;
  for (int i = 0; i < count_; ++i) n += holder_[i].load() != 0;
  return n;
}

bool DecompressionSlot::take(DecompressionSlots* slots, int wait_ms, uint32_t user, int per_user,
                             bool* by_user) {
  reset();
  if (by_user) *by_user = false;
  if (!slots) return true;
  pid_ = getpid();
  slot_ = slots->acquire(pid_, user, per_user, wait_ms);
  if (slot_ < 0) {
    if (by_user) *by_user = slot_ == -2;
    slot_ = -1;
    return false;
  }
  slots_ = slots;
  taken_us_ = monotonic_us();
  return true;
}

void DecompressionSlot::reset() {
  if (slots_ && slot_ >= 0) {
    // Read before the release: another process may take the slot at once.  One clock for every
    // session process: their lines in the daemon's log compare.
    const int64_t end_us = monotonic_us();
    slots_->release(slot_, pid_);
    LOG_INFO("decompression slot %d of %d held %lld..%lld us", slot_, slots_->slots(),
             static_cast<long long>(taken_us_), static_cast<long long>(end_us));
  }
  slots_ = nullptr;
  slot_ = -1;
}

}  // namespace rgpu::server
