// CUDA user objects, API-neutral (client/user_objects.cc): reference-counted client-side objects
// (a pointer and its destructor) whose destructor runs on the releasing thread, outside any lock,
// when the last reference goes.  Graphs and executable graphs own references; the front-ends'
// graph calls report when such an owner is copied or destroyed.  Both front-ends
// (cudaUserObject* / cuUserObject*) use these, so a cudaUserObject_t is a CUuserObject.
#pragma once

#include "client/errors.h"

namespace rgpu::client {

struct UserObject;

Error user_object_create(void* ptr, void (*destroy)(void*), unsigned initial, UserObject** out);
Error user_object_retain(UserObject* o, unsigned count);
// InvalidValue for more references than are held.
Error user_object_release(UserObject* o, unsigned count);
// `owner` (a graph) takes `count` references: new ones, or with `move` the caller's.
Error user_object_owner_retain(const void* owner, UserObject* o, unsigned count, bool move);
Error user_object_owner_release(const void* owner, UserObject* o, unsigned count);

// `to` (a clone or an executable graph) takes a copy of every reference `from` owns.
void user_objects_copied(const void* from, const void* to);
// `owner` (a graph or an executable graph) is destroyed: its references are released.
void user_objects_dropped(const void* owner);

}  // namespace rgpu::client
