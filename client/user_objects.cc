// CUDA user objects (client/user_objects.h).  Entirely client-side: the object is the program's
// pointer and destructor, so its reference counts live here.  The destructor is called, on the
// releasing thread, once the last reference is released (outside this file's lock, so it may
// call back into the libraries).
#include "client/user_objects.h"

#include <map>
#include <mutex>
#include <vector>

namespace rgpu::client {

struct UserObject {
  void* ptr = nullptr;
  void (*destroy)(void*) = nullptr;
  unsigned long long refs = 0;
};

namespace {

std::mutex& mu() {
  static std::mutex m;
  return m;
}
// References owned by graphs and executable graphs, by owner.
std::map<const void*, std::map<UserObject*, unsigned long long>>& owned() {
  static auto* m = new std::map<const void*, std::map<UserObject*, unsigned long long>>;
  return *m;
}

// Drops `count` references (the lock held); returns the object to destroy once unlocked, if any.
UserObject* drop_locked(UserObject* o, unsigned long long count) {
  o->refs -= count;
  return o->refs == 0 ? o : nullptr;
}

void destroy_all(const std::vector<UserObject*>& dead) {
  for (UserObject* o : dead) {
    o->destroy(o->ptr);
    delete o;
  }
}

}  // namespace

Error user_object_create(void* ptr, void (*destroy)(void*), unsigned initial, UserObject** out) {
  if (!out || !destroy || initial == 0) return err::InvalidValue;
  *out = new UserObject{ptr, destroy, initial};
  return err::Success;
}

Error user_object_retain(UserObject* o, unsigned count) {
  if (!o || count == 0) return err::InvalidValue;
  std::lock_guard<std::mutex> lock(mu());
  o->refs += count;
  return err::Success;
}

Error user_object_release(UserObject* o, unsigned count) {
  if (!o || count == 0) return err::InvalidValue;
  UserObject* dead = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu());
    if (o->refs < count) return err::InvalidValue;  // more than the caller holds
    dead = drop_locked(o, count);
  }
  if (dead) destroy_all({dead});
  return err::Success;
}

Error user_object_owner_retain(const void* owner, UserObject* o, unsigned count, bool move) {
  if (!owner || !o || count == 0) return err::InvalidValue;
  std::lock_guard<std::mutex> lock(mu());
  // Move: the caller's references become the owner's; otherwise new ones are taken.
  if (!move) o->refs += count;
  owned()[owner][o] += count;
  return err::Success;
}

Error user_object_owner_release(const void* owner, UserObject* o, unsigned count) {
  if (!owner || !o || count == 0) return err::InvalidValue;
  UserObject* dead = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu());
    auto it = owned().find(owner);
    if (it == owned().end()) return err::InvalidValue;
    auto ref = it->second.find(o);
    if (ref == it->second.end() || ref->second < count) return err::InvalidValue;
    ref->second -= count;
    if (ref->second == 0) it->second.erase(ref);
    dead = drop_locked(o, count);
  }
  if (dead) destroy_all({dead});
  return err::Success;
}

void user_objects_copied(const void* from, const void* to) {
  std::lock_guard<std::mutex> lock(mu());
  auto it = owned().find(from);
  if (it == owned().end()) return;
  auto copy = it->second;
  for (auto& [o, n] : copy) o->refs += n;
  auto& dst = owned()[to];
  for (auto& [o, n] : copy) dst[o] += n;
}

void user_objects_dropped(const void* owner) {
  std::vector<UserObject*> dead;
  {
    std::lock_guard<std::mutex> lock(mu());
    auto it = owned().find(owner);
    if (it == owned().end()) return;
    for (auto& [o, n] : it->second)
      if (UserObject* d = drop_locked(o, n)) dead.push_back(d);
    owned().erase(it);
  }
  destroy_all(dead);
}

}  // namespace rgpu::client
