// CUDA user objects (frontend/cudart/user_objects.cc): reference-counted client-side objects
// whose destructor runs on the client when the last reference goes.  Graphs and executable
// graphs own references; the graph calls tell this file when such an owner is copied or goes.
#pragma once

namespace rgpu::cudart {

// `to` (a clone or an executable graph) takes a copy of every reference `from` owns.
void user_objects_cloned(const void* from, const void* to);
void user_objects_instantiated(const void* from, const void* to);
// `owner` (a graph or an executable graph) is destroyed: its references are released.
void user_objects_dropped(const void* owner);

}  // namespace rgpu::cudart
