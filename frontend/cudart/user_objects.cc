// CUDA user objects (cudaUserObjectCreate/Retain/Release, cudaGraphRetain/ReleaseUserObject):
// thin translations onto the client core's API-neutral user objects (client/user_objects.h), which
// the driver front-end's cuUserObject* calls share.
#include "frontend/cudart/user_objects.h"

#include "client/user_objects.h"
#include "frontend/cudart/api.h"

using namespace rgpu;
using rgpu::cudart::ret;

namespace {
client::UserObject* U(cudaUserObject_t o) { return reinterpret_cast<client::UserObject*>(o); }
}  // namespace

namespace rgpu::cudart {
void user_objects_cloned(const void* from, const void* to) {
  client::user_objects_copied(from, to);
}
void user_objects_instantiated(const void* from, const void* to) {
  client::user_objects_copied(from, to);
}
void user_objects_dropped(const void* owner) { client::user_objects_dropped(owner); }
}  // namespace rgpu::cudart

cudaError_t cudaUserObjectCreate(cudaUserObject_t* out, void* ptr, cudaHostFn_t destroy,
                                 unsigned int initial, unsigned int flags) {
  // CUDA requires cudaUserObjectNoDestructorSync: nothing waits on the destructor.
  if (!out || flags != cudaUserObjectNoDestructorSync) return ret(err::InvalidValue);
  client::UserObject* o = nullptr;
  CudaError e = client::user_object_create(ptr, destroy, initial, &o);
  if (e == err::Success) *out = reinterpret_cast<cudaUserObject_t>(o);
  return ret(e);
}

cudaError_t cudaUserObjectRetain(cudaUserObject_t object, unsigned int count) {
  return ret(client::user_object_retain(U(object), count));
}

cudaError_t cudaUserObjectRelease(cudaUserObject_t object, unsigned int count) {
  return ret(client::user_object_release(U(object), count));
}

cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object,
                                      unsigned int count, unsigned int flags) {
  if (flags & ~cudaGraphUserObjectMove) return ret(err::InvalidValue);
  return ret(client::user_object_owner_retain(graph, U(object), count,
                                              (flags & cudaGraphUserObjectMove) != 0));
}

cudaError_t cudaGraphReleaseUserObject(cudaGraph_t graph, cudaUserObject_t object,
                                       unsigned int count) {
  return ret(client::user_object_owner_release(graph, U(object), count));
}
