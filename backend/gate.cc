#include "backend/gate.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <ctime>

namespace rgpu::backend {

namespace {
std::atomic_ref<uint32_t> ref(uint32_t* word) { return std::atomic_ref<uint32_t>(*word); }
bool passed(uint32_t current, uint32_t value) { return static_cast<int32_t>(current - value) >= 0; }
}  // namespace

// Shared (not FUTEX_*_PRIVATE) futex operations: a gate word may lie in memory two processes map
// (server/peer_ipc.h, PeerFencePage), and a private wakeup would not reach the other one.

bool gate_passed(const uint32_t* word, uint32_t value) {
  return passed(ref(const_cast<uint32_t*>(word)).load(std::memory_order_acquire), value);
}

void open_gate(uint32_t* word, uint32_t value) {
  auto w = ref(word);
  uint32_t cur = w.load(std::memory_order_relaxed);
  while (!passed(cur, value) && !w.compare_exchange_weak(cur, value, std::memory_order_release,
                                                         std::memory_order_relaxed)) {
  }
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void wait_gate(uint32_t* word, uint32_t value) {
  for (;;) {
    uint32_t cur = ref(word).load(std::memory_order_acquire);
    if (passed(cur, value)) return;
    // A timeout as well as the wakeup: a store the futex missed is seen within 50 ms.
    timespec ts{0, 50 * 1000 * 1000};
    syscall(SYS_futex, word, FUTEX_WAIT, cur, &ts, nullptr, 0);
  }
}

}  // namespace rgpu::backend
