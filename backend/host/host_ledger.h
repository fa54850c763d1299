// Capacity accounting for the host backend, shared by every session process of one rgpud (it lives
// in a MAP_SHARED mapping made before the first fork).  Like a GPU's memory, it is one pool:
// cudaMemGetInfo in one client sees what the others hold, and what a session held is returned when
// its process ends, however it ends (the daemon releases a dead session's slot).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>

namespace rgpu::backend {

class HostLedger {
 public:
  static constexpr int kSlots = 1024;

  // Creates the shared ledger (in the daemon, before forking sessions).
  static HostLedger* create(uint64_t capacity);

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_.load(); }

  // In a session: claims a slot for this process.  Returns -1 when all slots are taken.
  int claim(pid_t pid);
  // Reserves `bytes` for slot `slot`; false when the pool has too little left.
  bool reserve(int slot, uint64_t bytes);
  void release(int slot, uint64_t bytes);
  // In the daemon, after a session process ended: returns whatever it still held.
  void release_process(pid_t pid);

 private:
  struct Slot {
    std::atomic<int32_t> pid;
    std::atomic<uint64_t> bytes;
  };
  uint64_t capacity_ = 0;
  std::atomic<uint64_t> used_;
  Slot slots_[kSlots];
};

}  // namespace rgpu::backend
