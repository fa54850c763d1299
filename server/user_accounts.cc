#include "server/user_accounts.h"

#include <sys/mman.h>

#include <algorithm>
#include <new>

namespace rgpu::server {

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<int32_t>::is_always_lock_free,
              "the accounts are shared between processes");

UserAccounts* UserAccounts::create() {
  void* p = mmap(nullptr, sizeof(UserAccounts), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* a = new (p) UserAccounts();
  for (Entry& e : a->entries_) {
    e.pid.store(0);
    e.user.store(0);
    e.bytes.store(0);
  }
  return a;
}

bool UserAccounts::enter(pid_t pid, uint32_t user) {
  if (pid <= 0 || user == 0) return false;
  for (Entry& e : entries_) {
    if (e.pid.load() != 0) continue;
    // Only the daemon's loop enters and leaves: no other writer of pid and user.
    e.bytes.store(0);
    e.user.store(user);
    e.pid.store(pid);
    return true;
  }
  return false;
}

void UserAccounts::leave(pid_t pid) {
  if (pid <= 0) return;
  for (Entry& e : entries_) {
    if (e.pid.load() != pid) continue;
    e.user.store(0);  // first: a sum never counts what the dead process held
    e.bytes.store(0);
    e.pid.store(0);
  }
}

int UserAccounts::find(pid_t pid) const {
  for (int i = 0; i < kEntries; ++i)
    if (entries_[i].pid.load() == pid) return i;
  return -1;
}

uint32_t UserAccounts::user(int entry) const {
  return entry >= 0 && entry < kEntries ? entries_[entry].user.load() : 0;
}

uint64_t UserAccounts::held(uint32_t user, int* sessions) const {
  uint64_t sum = 0;
  int n = 0;
  if (user)
    for (const Entry& e : entries_)
      if (e.user.load() == user) {
        const uint64_t b = e.bytes.load();
        sum = sum + b < sum ? UINT64_MAX : sum + b;  // saturates: a wrapped sum would fit
        ++n;
      }
  if (sessions) *sessions = n;
  return sum;
}

bool UserAccounts::charge(int entry, uint64_t bytes, uint64_t limit, uint64_t& held_now,
                          int& sessions) {
  if (entry < 0 || entry >= kEntries) return true;
  Entry& e = entries_[entry];
  if (limit && bytes > limit) {  // before adding: a huge request must not wrap the entry
    held_now = held(e.user.load(), &sessions);
    return false;
  }
  e.bytes.fetch_add(bytes);  // seq_cst: a concurrent charge of the same user sees it, or we see it
  if (!limit) return true;
  const uint64_t sum = held(e.user.load(), &sessions);
  if (sum <= limit) return true;
  e.bytes.fetch_sub(bytes);
  held_now = sum - bytes;
  return false;
}

void UserAccounts::release(int entry, uint64_t bytes) {
  if (entry < 0 || entry >= kEntries) return;
  Entry& e = entries_[entry];
  uint64_t have = e.bytes.load();
  while (!e.bytes.compare_exchange_weak(have, have - std::min(have, bytes))) {
  }
}

}  // namespace rgpu::server
