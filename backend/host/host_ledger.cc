#include "backend/host/host_ledger.h"

#include <sys/mman.h>

#include <algorithm>
#include <new>

namespace rgpu::backend {

HostLedger* HostLedger::create(uint64_t capacity) {
  void* p =
      mmap(nullptr, sizeof(HostLedger), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* l = new (p) HostLedger();
  l->capacity_ = capacity;
  for (auto& s : l->slots_) {
    s.pid.store(0);
    s.bytes.store(0);
  }
  return l;
}

int HostLedger::claim(pid_t pid) {
  for (int i = 0; i < kSlots; ++i) {
    int32_t expect = 0;
    if (slots_[i].pid.compare_exchange_strong(expect, pid)) {
      slots_[i].bytes.store(0);
      return i;
    }
  }
  return -1;
}

uint64_t HostLedger::used() const {
  uint64_t sum = 0;
  for (const auto& s : slots_)
    if (s.pid.load()) sum += s.bytes.load();
  return sum;
}

// Optimistic: add to our slot, then look at the sum.  Of two sessions reserving at once, at least
// one sees both additions, so the pool is never over-committed (both may back off; the caller
// fails as a GPU would when memory is short).
bool HostLedger::reserve(int slot, uint64_t bytes) {
  if (slot < 0 || slot >= kSlots || bytes > capacity_) return false;
  slots_[slot].bytes.fetch_add(bytes);
  if (used() > capacity_) {
    slots_[slot].bytes.fetch_sub(bytes);
    return false;
  }
  return true;
}

void HostLedger::release(int slot, uint64_t bytes) {
  if (slot < 0 || slot >= kSlots) return;
  uint64_t cur = slots_[slot].bytes.load();
  while (!slots_[slot].bytes.compare_exchange_weak(cur, cur - std::min(cur, bytes))) {
  }
}

void HostLedger::release_process(pid_t pid) {
  for (auto& s : slots_) {
    if (pid > 0 && s.pid.load() == pid) {
      s.bytes.store(0);
      s.pid.store(0);
    }
  }
}

std::vector<std::pair<pid_t, uint64_t>> HostLedger::holders() const {
  std::vector<std::pair<pid_t, uint64_t>> out;
  for (const auto& s : slots_)
    if (pid_t pid = s.pid.load(); pid > 0) out.push_back({pid, s.bytes.load()});
  return out;
}

}  // namespace rgpu::backend
