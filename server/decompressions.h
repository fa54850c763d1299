// Slots for decompressing module images, shared by every session process of one rgpud
// (--max-decompressions): it lives in a MAP_SHARED mapping the daemon makes before the first fork,
// like the host backend's ledger (backend/host/host_ledger.h).  A session takes a slot before it
// decompresses a client's image (and keeps it while the backend loads the image, which
// decompresses it again in the driver), so however many clients send compressed images at once,
// at most that many are being decompressed on the machine, each within its per-image budget.
//
// A slot is the pid of the process holding it and that process's user (server/user_accounts.h),
// taken by compare-and-swap; a session that dies holding one cannot leak it: the daemon frees a
// reaped process's slots (release_process).  One user holds at most --max-decompressions-per-user
// slots at once, so one tenant's images never keep everyone else's waiting.  A waiter sleeps on a
// futex word that every release bumps, at most until its deadline.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>

namespace rgpu::server {

class DecompressionSlots {
 public:
  static constexpr int kMaxSlots = 256;

  // In the daemon, before forking sessions: `slots` in 1..kMaxSlots.  Null when mmap fails.
  static DecompressionSlots* create(int slots);

  int slots() const { return count_; }
  // Takes a slot for `pid` of `user` (0: none), of which `user` may hold at most `per_user` (0:
  // no limit but the total), waiting at most `wait_ms` for one to come free; -1 when none did,
  // -2 when `user` holding its share stood in the way during the wait.
  int acquire(pid_t pid, uint32_t user, int per_user, int wait_ms);
  void release(int slot, pid_t pid);
  // In the daemon, once a session process ended: frees whatever slot it still held.
  void release_process(pid_t pid);
  int in_use() const;
  int held_by(uint32_t user) const;

 private:
  static uint64_t holder(pid_t pid, uint32_t user) {
    return static_cast<uint64_t>(user) << 32 | static_cast<uint32_t>(pid);
  }
  static pid_t pid_of(uint64_t h) { return static_cast<pid_t>(h & 0xffffffffu); }
  int try_take(uint64_t holder);
  void wake();
  int count_ = 0;
  std::atomic<uint32_t> released_;  // futex word: bumped (and waiters woken) at each release
  std::atomic<uint64_t> holder_[kMaxSlots];  // holder(pid, user); 0: free
};

// A slot held for one scope (or none, when `slots` is null: no daemon, no limit).  Its release
// logs, at info level, "decompression slot N of M held A..B us" (CLOCK_MONOTONIC).
class DecompressionSlot {
 public:
  DecompressionSlot() = default;
  DecompressionSlot(const DecompressionSlot&) = delete;
  DecompressionSlot& operator=(const DecompressionSlot&) = delete;
  ~DecompressionSlot() { reset(); }
  // False when no slot came free within `wait_ms`; `by_user` then says whether the user's share
  // (`per_user` slots) was what stood in the way.
  bool take(DecompressionSlots* slots, int wait_ms, uint32_t user = 0, int per_user = 0,
            bool* by_user = nullptr);
  void reset();
  bool held() const { return slot_ >= 0; }
  int index() const { return slot_; }
  // When it was taken: microseconds of CLOCK_MONOTONIC, one clock for every process.
  int64_t taken_us() const { return taken_us_; }

 private:
  DecompressionSlots* slots_ = nullptr;
  int slot_ = -1;
  pid_t pid_ = 0;
  int64_t taken_us_ = 0;
};

}  // namespace rgpu::server
