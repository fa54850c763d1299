// Capacity accounting for the host backend, shared by every session process of one rgpud (it lives
// in a MAP_SHARED mapping made before the first fork).  Like a GPU's memory, it is one pool:
// cudaMemGetInfo in one client sees what the others hold, and what a session held is returned when
// its process ends, however it ends (the daemon releases a dead session's slot).
//
// There is no shared running total: what is in use is the sum of the slots, and each slot is
// written only by its session (and zeroed by the daemon once that session is gone).  A session
// that dies in the middle of an update therefore cannot leave the pool short, and a slot the
// daemon releases takes exactly what that session held with it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

namespace rgpu::backend {

class HostLedger {
 public:
  static constexpr int kSlots = 1024;

  // Creates the shared ledger (in the daemon, before forking sessions).
  static HostLedger* create(uint64_t capacity);

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const;

  // In a session, after the client authenticated: claims a slot for this process.  Returns -1
  // when all slots are taken.
  int claim(pid_t pid);
  // Reserves `bytes` for slot `slot`; false when the pool has too little left.
  bool reserve(int slot, uint64_t bytes);
  void release(int slot, uint64_t bytes);
  // In the daemon, after a session process ended: returns whatever it still held.
  void release_process(pid_t pid);
  // The session processes holding a slot and what each holds (NVML's running processes).
  std::vector<std::pair<pid_t, uint64_t>> holders() const;

 private:
  struct Slot {
    std::atomic<int32_t> pid;
    std::atomic<uint64_t> bytes;
  };
  uint64_t capacity_ = 0;
  Slot slots_[kSlots];
};

}  // namespace rgpu::backend
