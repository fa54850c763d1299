#include "backend/host/host_ledger.h"

#include <sys/mman.h>

#include <new>

namespace rgpu::backend {

HostLedger* HostLedger::create(uint64_t capacity) {
  void* p =
      mmap(nullptr, sizeof(HostLedger), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* l = new (p) HostLedger();
  l->capacity_ = capacity;
  l->used_.store(0);
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

bool HostLedger::reserve(int slot, uint64_t bytes) {
  uint64_t cur = used_.load();
  do {
    if (bytes > capacity_ || cur > capacity_ - bytes) return false;
  } while (!used_.compare_exchange_weak(cur, cur + bytes));
  slots_[slot].bytes.fetch_add(bytes);
  return true;
}

void HostLedger::release(int slot, uint64_t bytes) {
  slots_[slot].bytes.fetch_sub(bytes);
  used_.fetch_sub(bytes);
}

void HostLedger::release_process(pid_t pid) {
  for (auto& s : slots_) {
    if (s.pid.load() == pid) {
      used_.fetch_sub(s.bytes.exchange(0));
      s.pid.store(0);
    }
  }
}

}  // namespace rgpu::backend
