// What each user's sessions hold together, for the per-user limits (--mem-limit-per-user): one
// table shared by every session process of one rgpud, in a MAP_SHARED mapping the daemon makes
// before the first fork (like the decompression slots, server/decompressions.h).
//
// A user is what --max-sessions-per-user counts by (client_identity: a shared-memory client's uid,
// a TCP client's address), numbered by the daemon.  The daemon gives each admitted session an
// entry (its pid and its user's number) before it admits it, and clears the entry when it reaps
// the process, so a session that dies (kill -9 included) cannot leave its user charged.  Only the
// session writes its entry's bytes; a charge adds first, then sums the user's entries, and takes
// its bytes back when the sum is over the limit: two sessions of one user charging at once may
// both be refused near the limit, but their sum never exceeds it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>

namespace rgpu::server {

class UserAccounts {
 public:
  static constexpr int kEntries = 4096;

  // In the daemon, before forking sessions.  Null when mmap fails.
  static UserAccounts* create();

  // In the daemon: session process `pid` of user `user` (non-zero) gets an entry; false when the
  // table is full.
  bool enter(pid_t pid, uint32_t user);
  // In the daemon, once the process ended: its entry and what it held go.
  void leave(pid_t pid);

  // In the session process: its entry (-1: none) and its user (0: none).
  int find(pid_t pid) const;
  uint32_t user(int entry) const;
  // Adds `bytes` to `entry` unless its user's sessions would then hold more than `limit` (0: no
  // limit) together; when refused, `held` is what they hold and `sessions` how many they are.
  bool charge(int entry, uint64_t bytes, uint64_t limit, uint64_t& held, int& sessions);
  void release(int entry, uint64_t bytes);
  // What the sessions of `user` hold together, and how many they are.
  uint64_t held(uint32_t user, int* sessions = nullptr) const;

 private:
  struct Entry {
    std::atomic<int32_t> pid;
    std::atomic<uint32_t> user;
    std::atomic<uint64_t> bytes;
  };
  Entry entries_[kEntries];
};

// One session's view: its entry and its user's limit (or nothing: no daemon, no per-user limit).
struct UserAccount {
  UserAccounts* accounts = nullptr;
  int entry = -1;
  uint64_t limit = 0;  // --mem-limit-per-user (0: none)
  bool active() const { return accounts && entry >= 0; }
};

}  // namespace rgpu::server
