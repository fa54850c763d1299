// CUDA graphs in the driver API: stream capture, building graphs node by node, instantiating,
// updating and launching them.  Thin translations onto the client core's graphs
// (client/graphs.cc), which the runtime front-end uses too: the graph lives on the server, the
// client keeps node kinds and edges.  Handles are the runtime's (frontend/cuda/graph_nodes.h).
#include <cstdio>
#include <cstring>
#include <utility>

#include "client/user_objects.h"
#include "common/log.h"
#include "frontend/cuda/graph_nodes.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::cu;
using rgpu::cuda_fe::exec_of;
using rgpu::cuda_fe::graph_of;
using rgpu::cuda_fe::node_of;
using rgpu::cuda_fe::nodes_of;
using rgpu::cuda_fe::to_driver;

namespace {

CUresult with_stream(CUstream st, bool pt, client::Stream* s) {
  RGPU_INIT();
  return to_driver(cuda_fe::stream_of(st, pt, s));
}

// The calling thread's capture mode (cuThreadExchangeStreamCaptureMode).
CUstreamCaptureMode& thread_mode() {
  thread_local CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  return mode;
}

CUresult begin_capture(CUstream st, CUstreamCaptureMode mode, bool pt) {
  if (mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  client::Stream s;
  if (CUresult r = with_stream(st, pt, &s); r != CUDA_SUCCESS) return r;
  return to_driver(core().capture_begin(s, static_cast<unsigned>(mode)));
}
CUresult begin_capture_to(CUstream st, CUgraph g, const CUgraphNode* deps,
                          const CUgraphEdgeData* edges, size_t n, CUstreamCaptureMode mode,
                          bool pt) {
  if (!g || (n && !deps) || mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  if (!cuda_fe::plain_edges(edges, n)) return CUDA_ERROR_NOT_SUPPORTED;
  client::Stream s;
  if (CUresult r = with_stream(st, pt, &s); r != CUDA_SUCCESS) return r;
  return to_driver(
      core().capture_to(s, graph_of(g), nodes_of(deps, n), static_cast<unsigned>(mode)));
}
CUresult end_capture(CUstream st, CUgraph* out, bool pt) {
  client::Stream s;
  if (CUresult r = with_stream(st, pt, &s); r != CUDA_SUCCESS) return r;
  client::Graph* g = nullptr;
  CUresult r =
      to_driver(core().capture_end(s, out ? &g : nullptr));  // null: a capture into a graph
  if (out) *out = cu(g);
  return r;
}
CUresult capture_info(CUstream st, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                      const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* count,
                      bool pt) {
  client::Stream s;
  if (CUresult r = with_stream(st, pt, &s); r != CUDA_SUCCESS) return r;
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  unsigned state = 0;
  unsigned long long seq = 0;
  client::Graph* g = nullptr;
  std::vector<client::GraphNode*> nodes;
  if (CUresult r = to_driver(core().capture_info(s, &state, &seq, &g, &nodes)); r != CUDA_SUCCESS)
    return r;
  *status = static_cast<CUstreamCaptureStatus>(state);
  if (id) *id = seq;
  if (graph) *graph = cu(g);
  // The arrays stay valid until this thread's next query (CUDA: until the next capture call).
  thread_local std::vector<CUgraphNode> handles;
  thread_local std::vector<CUgraphEdgeData> edge_data;
  handles.clear();
  for (client::GraphNode* n : nodes) handles.push_back(reinterpret_cast<CUgraphNode>(n));
  edge_data.assign(handles.size(), CUgraphEdgeData{});
  if (deps) *deps = handles.empty() ? nullptr : handles.data();
  if (edges) *edges = edge_data.empty() ? nullptr : edge_data.data();
  if (count) *count = handles.size();
  return CUDA_SUCCESS;
}
CUresult update_deps(CUstream st, CUgraphNode* deps, const CUgraphEdgeData* edges, size_t n,
                     unsigned flags, bool pt) {
  if ((n && !deps) || flags > CU_STREAM_SET_CAPTURE_DEPENDENCIES) return CUDA_ERROR_INVALID_VALUE;
  if (!cuda_fe::plain_edges(edges, n)) return CUDA_ERROR_NOT_SUPPORTED;
  client::Stream s;
  if (CUresult r = with_stream(st, pt, &s); r != CUDA_SUCCESS) return r;
  return to_driver(
      core().capture_deps(s, nodes_of(deps, n), flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES));
}

// `n` is read after the call that fills it (arguments are evaluated in no set order).
CUresult finish(CUresult r, client::GraphNode* const* n, CUgraphNode* out) {
  if (r == CUDA_SUCCESS) *out = cu(*n);
  return r;
}

}  // namespace

CUresult rgpu::cuda_fe::unsafe_call() {
  return to_driver(core().unsafe_call(static_cast<unsigned>(thread_mode())));
}

// ---- stream capture -----------------------------------------------------------------------------

#undef cuStreamBeginCapture
RGPU_CU CUresult cuStreamBeginCapture(CUstream st) {
  return begin_capture(st, CU_STREAM_CAPTURE_MODE_GLOBAL, false);
}
RGPU_CU CUresult cuStreamBeginCapture_ptsz(CUstream st) {
  return begin_capture(st, CU_STREAM_CAPTURE_MODE_GLOBAL, true);
}
RGPU_CU CUresult cuStreamBeginCapture_v2(CUstream st, CUstreamCaptureMode mode) {
  return begin_capture(st, mode, false);
}
RGPU_CU CUresult cuStreamBeginCapture_v2_ptsz(CUstream st, CUstreamCaptureMode mode) {
  return begin_capture(st, mode, true);
}
#undef cuStreamBeginCaptureToGraph
RGPU_CU CUresult cuStreamBeginCaptureToGraph(CUstream st, CUgraph g, const CUgraphNode* deps,
                                             const CUgraphEdgeData* edges, size_t n,
                                             CUstreamCaptureMode mode) {
  return begin_capture_to(st, g, deps, edges, n, mode, false);
}
RGPU_CU CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream st, CUgraph g, const CUgraphNode* deps,
                                                  const CUgraphEdgeData* edges, size_t n,
                                                  CUstreamCaptureMode mode) {
  return begin_capture_to(st, g, deps, edges, n, mode, true);
}
#undef cuStreamEndCapture
RGPU_CU CUresult cuStreamEndCapture(CUstream st, CUgraph* g) { return end_capture(st, g, false); }
RGPU_CU CUresult cuStreamEndCapture_ptsz(CUstream st, CUgraph* g) {
  return end_capture(st, g, true);
}
#undef cuStreamIsCapturing
RGPU_CU CUresult cuStreamIsCapturing(CUstream st, CUstreamCaptureStatus* status) {
  return capture_info(st, status, nullptr, nullptr, nullptr, nullptr, nullptr, false);
}
RGPU_CU CUresult cuStreamIsCapturing_ptsz(CUstream st, CUstreamCaptureStatus* status) {
  return capture_info(st, status, nullptr, nullptr, nullptr, nullptr, nullptr, true);
}
#undef cuStreamGetCaptureInfo
RGPU_CU CUresult cuStreamGetCaptureInfo(CUstream st, CUstreamCaptureStatus* status,
                                        cuuint64_t* id) {
  return capture_info(st, status, id, nullptr, nullptr, nullptr, nullptr, false);
}
RGPU_CU CUresult cuStreamGetCaptureInfo_ptsz(CUstream st, CUstreamCaptureStatus* status,
                                             cuuint64_t* id) {
  return capture_info(st, status, id, nullptr, nullptr, nullptr, nullptr, true);
}
RGPU_CU CUresult cuStreamGetCaptureInfo_v2(CUstream st, CUstreamCaptureStatus* status,
                                           cuuint64_t* id, CUgraph* g, const CUgraphNode** deps,
                                           size_t* n) {
  return capture_info(st, status, id, g, deps, nullptr, n, false);
}
RGPU_CU CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream st, CUstreamCaptureStatus* status,
                                                cuuint64_t* id, CUgraph* g,
                                                const CUgraphNode** deps, size_t* n) {
  return capture_info(st, status, id, g, deps, nullptr, n, true);
}
RGPU_CU CUresult cuStreamGetCaptureInfo_v3(CUstream st, CUstreamCaptureStatus* status,
                                           cuuint64_t* id, CUgraph* g, const CUgraphNode** deps,
                                           const CUgraphEdgeData** edges, size_t* n) {
  return capture_info(st, status, id, g, deps, edges, n, false);
}
RGPU_CU CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream st, CUstreamCaptureStatus* status,
                                                cuuint64_t* id, CUgraph* g,
                                                const CUgraphNode** deps,
                                                const CUgraphEdgeData** edges, size_t* n) {
  return capture_info(st, status, id, g, deps, edges, n, true);
}
#undef cuStreamUpdateCaptureDependencies
RGPU_CU CUresult cuStreamUpdateCaptureDependencies(CUstream st, CUgraphNode* deps, size_t n,
                                                   unsigned int flags) {
  return update_deps(st, deps, nullptr, n, flags, false);
}
RGPU_CU CUresult cuStreamUpdateCaptureDependencies_ptsz(CUstream st, CUgraphNode* deps, size_t n,
                                                        unsigned int flags) {
  return update_deps(st, deps, nullptr, n, flags, true);
}
RGPU_CU CUresult cuStreamUpdateCaptureDependencies_v2(CUstream st, CUgraphNode* deps,
                                                      const CUgraphEdgeData* edges, size_t n,
                                                      unsigned int flags) {
  return update_deps(st, deps, edges, n, flags, false);
}
RGPU_CU CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream st, CUgraphNode* deps,
                                                           const CUgraphEdgeData* edges, size_t n,
                                                           unsigned int flags) {
  return update_deps(st, deps, edges, n, flags, true);
}
RGPU_CU CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  RGPU_INIT();
  if (!mode || *mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, thread_mode());
  return CUDA_SUCCESS;
}

// ---- building graphs ----------------------------------------------------------------------------

RGPU_CU CUresult cuGraphCreate(CUgraph* out, unsigned int flags) {
  RGPU_INIT();
  if (!out || flags) return CUDA_ERROR_INVALID_VALUE;
  client::Graph* g = nullptr;
  CUresult r = to_driver(core().graph_create(&g));
  if (r == CUDA_SUCCESS) *out = cu(g);
  return r;
}
RGPU_CU CUresult cuGraphDestroy(CUgraph g) {
  RGPU_INIT();
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  client::user_objects_dropped(graph_of(g));
  return to_driver(core().graph_destroy(graph_of(g)));
}
RGPU_CU CUresult cuGraphClone(CUgraph* out, CUgraph g) {
  RGPU_INIT();
  if (!out || !g) return CUDA_ERROR_INVALID_VALUE;
  client::Graph* c = nullptr;
  CUresult r = to_driver(core().graph_clone(graph_of(g), &c));
  if (r == CUDA_SUCCESS) {
    client::user_objects_copied(graph_of(g), c);
    *out = cu(c);
  }
  return r;
}

RGPU_CU CUresult cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                                         size_t n, const CUDA_KERNEL_NODE_PARAMS* p) {
  RGPU_INIT();
  if (!node || !g) return CUDA_ERROR_INVALID_VALUE;
  client::GraphNode* out = nullptr;
  return finish(cuda_fe::kernel_node({graph_of(g), nodes_of(deps, n)}, p, &out), &out, node);
}
#undef cuGraphAddKernelNode
RGPU_CU CUresult cuGraphAddKernelNode(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                                      size_t n, const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS k{};
  std::memcpy(&k, p, sizeof *p);  // v1 is v2 without kern and ctx
  return cuGraphAddKernelNode_v2(node, g, deps, n, &k);
}
// The context argument names where the node runs; rgpu's nodes run on their graph's device.
RGPU_CU CUresult cuGraphAddMemcpyNode(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                                      size_t n, const CUDA_MEMCPY3D* p, CUcontext) {
  RGPU_INIT();
  if (!node || !g) return CUDA_ERROR_INVALID_VALUE;
  client::GraphNode* out = nullptr;
  return finish(cuda_fe::memcpy_node({graph_of(g), nodes_of(deps, n)}, p, &out), &out, node);
}
RGPU_CU CUresult cuGraphAddMemsetNode(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                                      size_t n, const CUDA_MEMSET_NODE_PARAMS* p, CUcontext) {
  RGPU_INIT();
  if (!node || !g) return CUDA_ERROR_INVALID_VALUE;
  client::GraphNode* out = nullptr;
  return finish(cuda_fe::memset_node({graph_of(g), nodes_of(deps, n)}, p, &out), &out, node);
}
RGPU_CU CUresult cuGraphAddHostNode(CUgraphNode* node, CUgraph g, const CUgraphNode* deps, size_t n,
                                    const CUDA_HOST_NODE_PARAMS* p) {
  RGPU_INIT();
  if (!node || !g) return CUDA_ERROR_INVALID_VALUE;
  client::GraphNode* out = nullptr;
  return finish(cuda_fe::host_node({graph_of(g), nodes_of(deps, n)}, p, &out), &out, node);
}
RGPU_CU CUresult cuGraphAddChildGraphNode(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                                          size_t n, CUgraph child) {
  RGPU_INIT();
  if (!node || !g || !child) return CUDA_ERROR_INVALID_VALUE;
  client::GraphNode* out = nullptr;
  return finish(
      to_driver(core().graph_add_child(graph_of(g), nodes_of(deps, n), graph_of(child), &out)),
      &out, node);
}
RGPU_CU CUresult cuGraphAddEmptyNode(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                                     size_t n) {
  RGPU_INIT();
  if (!node || !g) return CUDA_ERROR_INVALID_VALUE;
  client::GraphNode* out = nullptr;
  return finish(
      to_driver(core().graph_add(graph_of(g), nodes_of(deps, n), 0, {}, nullptr, 0, &out)), &out,
      node);
}
RGPU_CU CUresult cuGraphAddEventRecordNode(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                                           size_t n, CUevent event) {
  RGPU_INIT();
  if (!node || !g) return CUDA_ERROR_INVALID_VALUE;
  client::GraphNode* out = nullptr;
  return finish(cuda_fe::event_node({graph_of(g), nodes_of(deps, n)}, event, false, &out), &out,
                node);
}
RGPU_CU CUresult cuGraphAddEventWaitNode(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                                         size_t n, CUevent event) {
  RGPU_INIT();
  if (!node || !g) return CUDA_ERROR_INVALID_VALUE;
  client::GraphNode* out = nullptr;
  return finish(cuda_fe::event_node({graph_of(g), nodes_of(deps, n)}, event, true, &out), &out,
                node);
}
RGPU_CU CUresult cuGraphAddNode_v2(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                                   const CUgraphEdgeData* edges, size_t n, CUgraphNodeParams* p) {
  RGPU_INIT();
  if (!node || !g || !p) return CUDA_ERROR_INVALID_VALUE;
  if (!cuda_fe::plain_edges(edges, n)) return CUDA_ERROR_NOT_SUPPORTED;
  client::GraphNode* out = nullptr;
  return finish(cuda_fe::any_node({graph_of(g), nodes_of(deps, n)}, p, &out), &out, node);
}
RGPU_CU CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle* out, CUgraph g, CUcontext,
                                                unsigned value, unsigned flags) {
  RGPU_INIT();
  if (!out || !g) return CUDA_ERROR_INVALID_VALUE;
  uint64_t h = 0;
  CUresult r = to_driver(core().graph_cond_handle(graph_of(g), value, flags, &h));
  if (r == CUDA_SUCCESS) *out = h;
  return r;
}
#undef cuGraphAddNode
RGPU_CU CUresult cuGraphAddNode(CUgraphNode* node, CUgraph g, const CUgraphNode* deps, size_t n,
                                CUgraphNodeParams* p) {
  return cuGraphAddNode_v2(node, g, deps, nullptr, n, p);
}

namespace {
CUresult edges_op(CUgraph g, const CUgraphNode* from, const CUgraphNode* to,
                  const CUgraphEdgeData* edges, size_t n, bool remove) {
  RGPU_INIT();
  if (!g || (n && (!from || !to))) return CUDA_ERROR_INVALID_VALUE;
  if (!cuda_fe::plain_edges(edges, n)) return CUDA_ERROR_NOT_SUPPORTED;
  return to_driver(core().graph_edges(graph_of(g), nodes_of(from, n), nodes_of(to, n), remove));
}
}  // namespace

RGPU_CU CUresult cuGraphAddDependencies_v2(CUgraph g, const CUgraphNode* from,
                                           const CUgraphNode* to, const CUgraphEdgeData* edges,
                                           size_t n) {
  return edges_op(g, from, to, edges, n, false);
}
#undef cuGraphAddDependencies
RGPU_CU CUresult cuGraphAddDependencies(CUgraph g, const CUgraphNode* from, const CUgraphNode* to,
                                        size_t n) {
  return edges_op(g, from, to, nullptr, n, false);
}
RGPU_CU CUresult cuGraphRemoveDependencies_v2(CUgraph g, const CUgraphNode* from,
                                              const CUgraphNode* to, const CUgraphEdgeData* edges,
                                              size_t n) {
  return edges_op(g, from, to, edges, n, true);
}
#undef cuGraphRemoveDependencies
RGPU_CU CUresult cuGraphRemoveDependencies(CUgraph g, const CUgraphNode* from,
                                           const CUgraphNode* to, size_t n) {
  return edges_op(g, from, to, nullptr, n, true);
}
RGPU_CU CUresult cuGraphDestroyNode(CUgraphNode node) {
  RGPU_INIT();
  if (!node) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().graph_destroy_node(node_of(node)));
}

// ---- executable graphs --------------------------------------------------------------------------

namespace {
CUresult instantiate(CUgraphExec* out, CUgraph g, unsigned long long flags) {
  RGPU_INIT();
  if (!out || !g) return CUDA_ERROR_INVALID_VALUE;
  // auto-free on launch, upload, device launch, priority: nothing to do remotely
  client::GraphExec* x = nullptr;
  CUresult r = to_driver(core().graph_instantiate(graph_of(g), &x));
  if (r == CUDA_SUCCESS) {
    x->flags = flags;
    client::user_objects_copied(graph_of(g), x);
    *out = reinterpret_cast<CUgraphExec>(x);
  }
  return r;
}
CUresult instantiate_params(CUgraphExec* out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = instantiate(out, g, p->flags);
  p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  p->hErrNode_out = nullptr;
  return r;
}
// The old form: an error node and a log buffer (rgpu names no node; the log says why).
CUresult instantiate_log(CUgraphExec* out, CUgraph g, CUgraphNode* err_node, char* log,
                         size_t size) {
  CUresult r = instantiate(out, g, 0);
  if (err_node) *err_node = nullptr;
  if (log && size) {
    const char* text = nullptr;
    if (r != CUDA_SUCCESS && cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
    std::snprintf(log, size, "%s", r == CUDA_SUCCESS ? "" : text ? text : "instantiation failed");
  }
  return r;
}
CUresult launch(CUgraphExec x, CUstream st, bool pt) {
  client::Stream s;
  if (CUresult r = with_stream(st, pt, &s); r != CUDA_SUCCESS) return r;
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().graph_launch(exec_of(x), s));
}
// The executable graph already lives on the server: nothing to upload.
CUresult upload(CUgraphExec x, CUstream st, bool pt) {
  client::Stream s;
  if (CUresult r = with_stream(st, pt, &s); r != CUDA_SUCCESS) return r;
  return x ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
}  // namespace

RGPU_CU CUresult cuGraphInstantiateWithFlags(CUgraphExec* out, CUgraph g,
                                             unsigned long long flags) {
  return instantiate(out, g, flags);
}
#undef cuGraphInstantiate
RGPU_CU CUresult cuGraphInstantiate(CUgraphExec* out, CUgraph g, CUgraphNode* err_node, char* log,
                                    size_t size) {
  return instantiate_log(out, g, err_node, log, size);
}
RGPU_CU CUresult cuGraphInstantiate_v2(CUgraphExec* out, CUgraph g, CUgraphNode* err_node,
                                       char* log, size_t size) {
  return instantiate_log(out, g, err_node, log, size);
}
#undef cuGraphInstantiateWithParams
RGPU_CU CUresult cuGraphInstantiateWithParams(CUgraphExec* out, CUgraph g,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  return instantiate_params(out, g, p);
}
RGPU_CU CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* out, CUgraph g,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  return instantiate_params(out, g, p);
}
RGPU_CU CUresult cuGraphExecDestroy(CUgraphExec x) {
  RGPU_INIT();
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  client::user_objects_dropped(exec_of(x));
  return to_driver(core().graph_exec_destroy(exec_of(x)));
}
#undef cuGraphLaunch
RGPU_CU CUresult cuGraphLaunch(CUgraphExec x, CUstream st) { return launch(x, st, false); }
RGPU_CU CUresult cuGraphLaunch_ptsz(CUgraphExec x, CUstream st) { return launch(x, st, true); }
#undef cuGraphUpload
RGPU_CU CUresult cuGraphUpload(CUgraphExec x, CUstream st) { return upload(x, st, false); }
RGPU_CU CUresult cuGraphUpload_ptsz(CUgraphExec x, CUstream st) { return upload(x, st, true); }

RGPU_CU CUresult cuGraphExecUpdate_v2(CUgraphExec x, CUgraph g, CUgraphExecUpdateResultInfo* info) {
  RGPU_INIT();
  if (!x || !g) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = to_driver(core().graph_exec_update(exec_of(x), graph_of(g)));
  if (info) {
    *info = CUgraphExecUpdateResultInfo{};
    info->result = r == CUDA_SUCCESS ? CU_GRAPH_EXEC_UPDATE_SUCCESS
                                     : CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
  }
  return r;
}
#undef cuGraphExecUpdate
RGPU_CU CUresult cuGraphExecUpdate(CUgraphExec x, CUgraph g, CUgraphNode* err_node,
                                   CUgraphExecUpdateResult* result) {
  CUgraphExecUpdateResultInfo info{};
  CUresult r = cuGraphExecUpdate_v2(x, g, &info);
  if (err_node) *err_node = info.errorNode;
  if (result) *result = info.result;
  return r;
}
RGPU_CU CUresult cuGraphExecGetFlags(CUgraphExec x, cuuint64_t* flags) {
  RGPU_INIT();
  if (!x || !flags) return CUDA_ERROR_INVALID_VALUE;
  *flags = exec_of(x)->flags;
  return CUDA_SUCCESS;
}
