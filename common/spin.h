// Brief busy-waiting before sleeping: on a fast link a reply or the next request arrives within
// microseconds, and catching it while spinning saves a thread wakeup (several microseconds) from
// the round trip.  The spin is bounded; then the caller blocks as usual.
#pragma once

#include <chrono>
#include <thread>

namespace rgpu {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() or `limit` passed; returns done().  On machines with few cores spinning would
// take the CPU from the very thread that is to answer, so it is skipped there.
template <class F>
bool spin_until(F done, std::chrono::microseconds limit = std::chrono::microseconds(50)) {
  static const bool worth_it = std::thread::hardware_concurrency() > 4;
  if (!worth_it) return done();
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    cpu_relax();
  }
  return true;
}

}  // namespace rgpu
