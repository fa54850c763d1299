// CUDA user objects (cudaUserObjectCreate/Retain/Release, cudaGraphRetain/ReleaseUserObject).
// Entirely client-side: the object is the client's pointer and destructor, so its reference
// counts live here.  The destructor is called, on the releasing thread, once the last
// reference is released (outside this file's lock, so it may call back into the runtime).
#include "frontend/cudart/user_objects.h"

#include <map>
#include <mutex>
#include <vector>

#include "frontend/cudart/api.h"

using namespace rgpu;
using rgpu::cudart::ret;

namespace {

struct UserObject {
  void* ptr = nullptr;
  cudaHostFn_t destroy = nullptr;
  unsigned long long refs = 0;
};

std::mutex& mu() {
  static std::mutex m;
  return m;
}
// References owned by graphs and executable graphs, by owner.
std::map<const void*, std::map<UserObject*, unsigned long long>>& owned() {
  static auto* m = new std::map<const void*, std::map<UserObject*, unsigned long long>>;
  return *m;
}

UserObject* U(cudaUserObject_t o) { return reinterpret_cast<UserObject*>(o); }

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

void copy_refs(const void* from, const void* to) {
  std::lock_guard<std::mutex> lock(mu());
  auto it = owned().find(from);
  if (it == owned().end()) return;
  auto copy = it->second;
  for (auto& [o, n] : copy) o->refs += n;
  auto& dst = owned()[to];
  for (auto& [o, n] : copy) dst[o] += n;
}

}  // namespace

namespace rgpu::cudart {
void user_objects_cloned(const void* from, const void* to) { copy_refs(from, to); }
void user_objects_instantiated(const void* from, const void* to) { copy_refs(from, to); }
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
}  // namespace rgpu::cudart

cudaError_t cudaUserObjectCreate(cudaUserObject_t* out, void* ptr, cudaHostFn_t destroy,
                                 unsigned int initial, unsigned int flags) {
  // CUDA requires cudaUserObjectNoDestructorSync: nothing waits on the destructor.
  if (!out || !destroy || initial == 0 || flags != cudaUserObjectNoDestructorSync)
    return ret(err::InvalidValue);
  auto* o = new UserObject{ptr, destroy, initial};
  *out = reinterpret_cast<cudaUserObject_t>(o);
  return cudaSuccess;
}

cudaError_t cudaUserObjectRetain(cudaUserObject_t object, unsigned int count) {
  if (!object || count == 0) return ret(err::InvalidValue);
  std::lock_guard<std::mutex> lock(mu());
  U(object)->refs += count;
  return cudaSuccess;
}

cudaError_t cudaUserObjectRelease(cudaUserObject_t object, unsigned int count) {
  if (!object || count == 0) return ret(err::InvalidValue);
  UserObject* dead = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu());
    if (U(object)->refs < count) return ret(err::InvalidValue);  // more than the caller holds
    dead = drop_locked(U(object), count);
  }
  if (dead) destroy_all({dead});
  return cudaSuccess;
}

cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object,
                                      unsigned int count, unsigned int flags) {
  if (!graph || !object || count == 0 || (flags & ~cudaGraphUserObjectMove))
    return ret(err::InvalidValue);
  std::lock_guard<std::mutex> lock(mu());
  // Move: the caller's references become the graph's; otherwise new ones are taken.
  if (!(flags & cudaGraphUserObjectMove)) U(object)->refs += count;
  owned()[graph][U(object)] += count;
  return cudaSuccess;
}

cudaError_t cudaGraphReleaseUserObject(cudaGraph_t graph, cudaUserObject_t object,
                                       unsigned int count) {
  if (!graph || !object || count == 0) return ret(err::InvalidValue);
  UserObject* dead = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu());
    auto it = owned().find(graph);
    if (it == owned().end()) return ret(err::InvalidValue);
    auto ref = it->second.find(U(object));
    if (ref == it->second.end() || ref->second < count) return ret(err::InvalidValue);
    ref->second -= count;
    if (ref->second == 0) it->second.erase(ref);
    dead = drop_locked(U(object), count);
  }
  if (dead) destroy_all({dead});
  return cudaSuccess;
}
