// Graph queries of the driver API answered from the client's copy of a graph's shape
// (client/graph_shape.h, shared with the runtime front-end): nodes, roots, edges, dependencies,
// node types, clones' counterparts, the parameter getters of nodes added or set explicitly,
// enabled state, the DOT description, and user objects (client/user_objects.h).
#include <algorithm>
#include <cstring>

#include "client/graph_shape.h"
#include "client/user_objects.h"
#include "common/log.h"
#include "frontend/cuda/graph_nodes.h"

using namespace rgpu;
using rgpu::cuda_fe::cu;
using rgpu::cuda_fe::exec_of;
using rgpu::cuda_fe::graph_of;
using rgpu::cuda_fe::node_of;
using rgpu::cuda_fe::to_driver;

namespace {

// Fills `out` (room for *count) and sets *count to the number there is; `edges` get plain edges.
CUresult answer(const std::vector<client::GraphNode*>& nodes, CUgraphNode* out,
                CUgraphEdgeData* edges, size_t* count) {
  if (out)
    for (size_t i = 0; i < std::min(*count, nodes.size()); ++i) {
      out[i] = cu(nodes[i]);
      if (edges) edges[i] = CUgraphEdgeData{};
    }
  *count = nodes.size();
  return CUDA_SUCCESS;
}

CUresult get_edges(CUgraph g, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* edges,
                   size_t* count) {
  RGPU_INIT();
  if (!g || !count || (!from) != (!to)) return CUDA_ERROR_INVALID_VALUE;
  const auto all = client::graph_edges_of(graph_of(g));
  if (!from) {
    *count = all.size();
    return CUDA_SUCCESS;
  }
  for (size_t i = 0; i < *count; ++i) {
    const bool have = i < all.size();
    from[i] = have ? cu(all[i].first) : nullptr;
    to[i] = have ? cu(all[i].second) : nullptr;
    if (edges) edges[i] = CUgraphEdgeData{};
  }
  // Entries past the graph's edges are NULL; the count says how many were returned.
  *count = std::min(*count, all.size());
  return CUDA_SUCCESS;
}
CUresult get_deps(CUgraphNode node, CUgraphNode* out, CUgraphEdgeData* edges, size_t* count) {
  RGPU_INIT();
  if (!node || !count) return CUDA_ERROR_INVALID_VALUE;
  return answer(node_of(node)->deps, out, edges, count);
}
CUresult get_dependents(CUgraphNode node, CUgraphNode* out, CUgraphEdgeData* edges, size_t* count) {
  RGPU_INIT();
  if (!node || !count) return CUDA_ERROR_INVALID_VALUE;
  return answer(client::graph_dependents(node_of(node)), out, edges, count);
}

// A node's kept parameters of type T, or NOT_SUPPORTED (logged) for a captured node.
template <class T>
CUresult kept(CUgraphNode node, CUgraphNodeType kind, const char* what, const T** out) {
  RGPU_INIT();
  if (!node || node_of(node)->kind != static_cast<uint32_t>(kind)) return CUDA_ERROR_INVALID_VALUE;
  *out = static_cast<const T*>(node_of(node)->params.get());
  if (*out) return CUDA_SUCCESS;
  LOG_WARN(
      "rgpu: a captured %s node's parameters are not known to the client (only nodes added "
      "or set explicitly, and their clones, answer)",
      what);
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult event_of_node(CUgraphNode node, CUevent* out, CUgraphNodeType kind) {
  RGPU_INIT();
  if (!node || !out || node_of(node)->kind != static_cast<uint32_t>(kind))
    return CUDA_ERROR_INVALID_VALUE;
  if (!node_of(node)->event) {
    LOG_WARN(
        "rgpu: the event of a captured graph node is not known to the client (only nodes "
        "added with cuGraphAddEvent*Node, and their clones, answer)");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  *out = reinterpret_cast<CUevent>(node_of(node)->event);
  return CUDA_SUCCESS;
}

bool enablable(uint32_t kind) {  // CUDA: only kernel, memcpy and memset nodes
  return kind == CU_GRAPH_NODE_TYPE_KERNEL || kind == CU_GRAPH_NODE_TYPE_MEMCPY ||
         kind == CU_GRAPH_NODE_TYPE_MEMSET;
}

client::UserObject* U(CUuserObject o) { return reinterpret_cast<client::UserObject*>(o); }

}  // namespace

// ---- shape --------------------------------------------------------------------------------------

RGPU_CU CUresult cuGraphGetNodes(CUgraph g, CUgraphNode* nodes, size_t* count) {
  RGPU_INIT();
  if (!g || !count) return CUDA_ERROR_INVALID_VALUE;
  return answer(client::graph_nodes(graph_of(g), false), nodes, nullptr, count);
}
RGPU_CU CUresult cuGraphGetRootNodes(CUgraph g, CUgraphNode* nodes, size_t* count) {
  RGPU_INIT();
  if (!g || !count) return CUDA_ERROR_INVALID_VALUE;
  return answer(client::graph_nodes(graph_of(g), true), nodes, nullptr, count);
}
RGPU_CU CUresult cuGraphGetEdges_v2(CUgraph g, CUgraphNode* from, CUgraphNode* to,
                                    CUgraphEdgeData* edges, size_t* count) {
  return get_edges(g, from, to, edges, count);
}
#undef cuGraphGetEdges
RGPU_CU CUresult cuGraphGetEdges(CUgraph g, CUgraphNode* from, CUgraphNode* to, size_t* count) {
  return get_edges(g, from, to, nullptr, count);
}
RGPU_CU CUresult cuGraphNodeGetDependencies_v2(CUgraphNode node, CUgraphNode* deps,
                                               CUgraphEdgeData* edges, size_t* count) {
  return get_deps(node, deps, edges, count);
}
#undef cuGraphNodeGetDependencies
RGPU_CU CUresult cuGraphNodeGetDependencies(CUgraphNode node, CUgraphNode* deps, size_t* count) {
  return get_deps(node, deps, nullptr, count);
}
RGPU_CU CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode node, CUgraphNode* out,
                                                 CUgraphEdgeData* edges, size_t* count) {
  return get_dependents(node, out, edges, count);
}
#undef cuGraphNodeGetDependentNodes
RGPU_CU CUresult cuGraphNodeGetDependentNodes(CUgraphNode node, CUgraphNode* out, size_t* count) {
  return get_dependents(node, out, nullptr, count);
}
RGPU_CU CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  RGPU_INIT();
  if (!node || !type) return CUDA_ERROR_INVALID_VALUE;
  *type = static_cast<CUgraphNodeType>(node_of(node)->kind);
  return CUDA_SUCCESS;
}
RGPU_CU CUresult cuGraphNodeFindInClone(CUgraphNode* out, CUgraphNode original, CUgraph clone) {
  RGPU_INIT();
  if (!out || !original || !clone) return CUDA_ERROR_INVALID_VALUE;
  client::GraphNode* n = client::graph_node_in_clone(node_of(original), graph_of(clone));
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *out = cu(n);
  return CUDA_SUCCESS;
}
RGPU_CU CUresult cuGraphDebugDotPrint(CUgraph g, const char* path, unsigned int flags) {
  RGPU_INIT();
  if (!g || !path) return CUDA_ERROR_INVALID_VALUE;
  const bool handles =
      flags & (CU_GRAPH_DEBUG_DOT_FLAGS_HANDLES | CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE);
  return to_driver(client::graph_dot_print(graph_of(g), path, handles));
}

// ---- parameter getters: the client's copy of what was last set on the graph's node -------------

RGPU_CU CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* p) {
  const cuda_fe::KernelNodeCopy* c = nullptr;
  if (CUresult r = kept(node, CU_GRAPH_NODE_TYPE_KERNEL, "kernel", &c); r != CUDA_SUCCESS) return r;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  *p = c->params;
  return CUDA_SUCCESS;
}
#undef cuGraphKernelNodeGetParams
RGPU_CU CUresult cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v1* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS k{};
  CUresult r = cuGraphKernelNodeGetParams_v2(node, &k);
  if (r == CUDA_SUCCESS) std::memcpy(p, &k, sizeof *p);  // v1 is v2 without kern and ctx
  return r;
}
RGPU_CU CUresult cuGraphMemcpyNodeGetParams(CUgraphNode node, CUDA_MEMCPY3D* p) {
  const cuda_fe::MemcpyNodeCopy* c = nullptr;
  if (CUresult r = kept(node, CU_GRAPH_NODE_TYPE_MEMCPY, "memcpy", &c); r != CUDA_SUCCESS) return r;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  *p = c->params;
  return CUDA_SUCCESS;
}
RGPU_CU CUresult cuGraphMemsetNodeGetParams(CUgraphNode node, CUDA_MEMSET_NODE_PARAMS* p) {
  const cuda_fe::MemsetNodeCopy* c = nullptr;
  if (CUresult r = kept(node, CU_GRAPH_NODE_TYPE_MEMSET, "memset", &c); r != CUDA_SUCCESS) return r;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  *p = c->params;
  return CUDA_SUCCESS;
}
RGPU_CU CUresult cuGraphHostNodeGetParams(CUgraphNode node, CUDA_HOST_NODE_PARAMS* p) {
  RGPU_INIT();
  if (!node || !p || node_of(node)->kind != CU_GRAPH_NODE_TYPE_HOST)
    return CUDA_ERROR_INVALID_VALUE;
  if (!node_of(node)->host_fn) {
    LOG_WARN(
        "rgpu: the function of a captured host node is not known to the client (only nodes "
        "added with cuGraphAddHostNode, and their clones, answer)");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  p->fn = node_of(node)->host_fn;
  p->userData = node_of(node)->host_data;
  return CUDA_SUCCESS;
}
RGPU_CU CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph* out) {
  RGPU_INIT();
  if (!node || !out || node_of(node)->kind != CU_GRAPH_NODE_TYPE_GRAPH || !node_of(node)->child)
    return CUDA_ERROR_INVALID_VALUE;
  *out = cu(node_of(node)->child);
  return CUDA_SUCCESS;
}
RGPU_CU CUresult cuGraphEventRecordNodeGetEvent(CUgraphNode node, CUevent* out) {
  return event_of_node(node, out, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}
RGPU_CU CUresult cuGraphEventWaitNodeGetEvent(CUgraphNode node, CUevent* out) {
  return event_of_node(node, out, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

// ---- enabling nodes of an executable graph ------------------------------------------------------

RGPU_CU CUresult cuGraphNodeSetEnabled(CUgraphExec x, CUgraphNode node, unsigned int enabled) {
  RGPU_INIT();
  if (!x || !node || !enablable(node_of(node)->kind)) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(cuda_fe::core().graph_node_enable(exec_of(x), node_of(node), enabled != 0));
}
RGPU_CU CUresult cuGraphNodeGetEnabled(CUgraphExec x, CUgraphNode node, unsigned int* enabled) {
  RGPU_INIT();
  if (!x || !node || !enabled || !node_of(node)->listed() || !enablable(node_of(node)->kind))
    return CUDA_ERROR_INVALID_VALUE;
  *enabled = exec_of(x)->disabled.count(node_of(node)->id) ? 0 : 1;
  return CUDA_SUCCESS;
}

// ---- user objects -------------------------------------------------------------------------------

RGPU_CU CUresult cuUserObjectCreate(CUuserObject* out, void* ptr, CUhostFn destroy,
                                    unsigned int initial, unsigned int flags) {
  RGPU_INIT();
  // CUDA requires CU_USER_OBJECT_NO_DESTRUCTOR_SYNC: nothing waits on the destructor.
  if (!out || flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) return CUDA_ERROR_INVALID_VALUE;
  client::UserObject* o = nullptr;
  CUresult r = to_driver(client::user_object_create(ptr, destroy, initial, &o));
  if (r == CUDA_SUCCESS) *out = reinterpret_cast<CUuserObject>(o);
  return r;
}
RGPU_CU CUresult cuUserObjectRetain(CUuserObject o, unsigned int count) {
  RGPU_INIT();
  return to_driver(client::user_object_retain(U(o), count));
}
RGPU_CU CUresult cuUserObjectRelease(CUuserObject o, unsigned int count) {
  RGPU_INIT();
  return to_driver(client::user_object_release(U(o), count));
}
RGPU_CU CUresult cuGraphRetainUserObject(CUgraph g, CUuserObject o, unsigned int count,
                                         unsigned int flags) {
  RGPU_INIT();
  if (flags & ~CU_GRAPH_USER_OBJECT_MOVE) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(client::user_object_owner_retain(graph_of(g), U(o), count,
                                                    (flags & CU_GRAPH_USER_OBJECT_MOVE) != 0));
}
RGPU_CU CUresult cuGraphReleaseUserObject(CUgraph g, CUuserObject o, unsigned int count) {
  RGPU_INIT();
  return to_driver(client::user_object_owner_release(graph_of(g), U(o), count));
}
