// CUDA graphs: stream capture, the explicit graph API, instantiate / update / launch (issue 11,
// item 1).  Thin translations onto the client core (client/graphs.cc); handles are the core's
// objects.  What rgpu does not do yet stays a stub (unsupported.cc) or answers
// cudaErrorNotSupported naming the case.
#include "frontend/cudart/api.h"
#include "frontend/cudart/graph_nodes.h"
#include "frontend/cudart/user_objects.h"

using namespace rgpu;
using rgpu::cudart::core;
using rgpu::cudart::ret;
using rgpu::cudart::stream_arg;

#define RGPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using rgpu::cudart::event_of;
client::Graph* G(cudaGraph_t g) { return reinterpret_cast<client::Graph*>(g); }
cudaGraph_t H(client::Graph* g) { return reinterpret_cast<cudaGraph_t>(g); }
client::GraphNode* N(cudaGraphNode_t n) { return reinterpret_cast<client::GraphNode*>(n); }
cudaGraphNode_t H(client::GraphNode* n) { return reinterpret_cast<cudaGraphNode_t>(n); }
client::GraphExec* X(cudaGraphExec_t x) { return reinterpret_cast<client::GraphExec*>(x); }

std::vector<client::GraphNode*> deps_of(const cudaGraphNode_t* deps, size_t n) {
  std::vector<client::GraphNode*> out;
  for (size_t i = 0; i < n; ++i) out.push_back(deps ? N(deps[i]) : nullptr);
  return out;
}

// The calling thread's capture mode (cudaThreadExchangeStreamCaptureMode).
cudaStreamCaptureMode& thread_mode() {
  thread_local cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  return mode;
}

cudaError_t finish_node(CudaError e, client::GraphNode* n, cudaGraphNode_t* out) {
  if (e == err::Success) *out = H(n);
  return ret(e);
}

cudaError_t is_capturing(cudaStream_t stream, cudaStreamCaptureStatus* status, bool pt) {
  if (!status) return ret(err::InvalidValue);
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  unsigned st = 0;
  if (CudaError e = core().capture_info(s, &st, nullptr, nullptr); e != err::Success) return ret(e);
  *status = static_cast<cudaStreamCaptureStatus>(st);
  return cudaSuccess;
}

cudaError_t capture_info(cudaStream_t stream, cudaStreamCaptureStatus* status,
                         unsigned long long* id, cudaGraph_t* graph, const cudaGraphNode_t** deps,
                         const cudaGraphEdgeData** edges, size_t* count, bool pt) {
  if (!status) return ret(err::InvalidValue);
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  unsigned st = 0;
  client::Graph* g = nullptr;
  std::vector<client::GraphNode*> nodes;
  if (CudaError e = core().capture_info(s, &st, id, &g, &nodes); e != err::Success) return ret(e);
  *status = static_cast<cudaStreamCaptureStatus>(st);
  if (graph) *graph = H(g);
  // The arrays stay valid until this thread's next query (CUDA: until the next capture call).
  thread_local std::vector<cudaGraphNode_t> handles;
  thread_local std::vector<cudaGraphEdgeData> edge_data;
  handles.clear();
  for (client::GraphNode* n : nodes) handles.push_back(H(n));
  edge_data.assign(handles.size(), cudaGraphEdgeData{});
  if (deps) *deps = handles.empty() ? nullptr : handles.data();
  if (edges) *edges = edge_data.empty() ? nullptr : edge_data.data();
  if (count) *count = handles.size();
  return cudaSuccess;
}

}  // namespace

// ---- stream capture
// -------------------------------------------------------------------------------

namespace {
cudaError_t begin_capture(cudaStream_t stream, cudaStreamCaptureMode mode, bool pt) {
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  return ret(core().capture_begin(s, static_cast<unsigned>(mode)));
}
cudaError_t end_capture(cudaStream_t stream, cudaGraph_t* graph, bool pt) {
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  client::Graph* g = nullptr;
  CudaError e = core().capture_end(s, graph ? &g : nullptr);  // null: a capture into a graph
  if (graph) *graph = H(g);
  return ret(e);
}
}  // namespace

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  return begin_capture(stream, mode, false);
}
RGPU_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream,
                                                    cudaStreamCaptureMode mode) {
  return begin_capture(stream, mode, true);
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  return end_capture(stream, graph, false);
}
RGPU_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* graph) {
  return end_capture(stream, graph, true);
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  return is_capturing(stream, status, false);
}
RGPU_EXPORT cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t s, cudaStreamCaptureStatus* st) {
  return is_capturing(s, st, true);
}
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* status,
                                     unsigned long long* id, cudaGraph_t* graph,
                                     const cudaGraphNode_t** deps, const cudaGraphEdgeData** edges,
                                     size_t* count) {
  return capture_info(stream, status, id, graph, deps, edges, count, false);
}
RGPU_EXPORT cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream,
                                                      cudaStreamCaptureStatus* status,
                                                      unsigned long long* id, cudaGraph_t* graph,
                                                      const cudaGraphNode_t** deps,
                                                      const cudaGraphEdgeData** edges,
                                                      size_t* count) {
  return capture_info(stream, status, id, graph, deps, edges, count, true);
}
cudaError_t rgpu::cudart::unsafe_call() {
  return ret(core().unsafe_call(static_cast<unsigned>(thread_mode())));
}
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (!mode || *mode > cudaStreamCaptureModeRelaxed) return ret(err::InvalidValue);
  std::swap(*mode, thread_mode());
  return cudaSuccess;
}

// ---- building graphs
// ------------------------------------------------------------------------------

cudaError_t cudaGraphCreate(cudaGraph_t* graph, unsigned int flags) {
  if (!graph || flags) return ret(err::InvalidValue);
  client::Graph* g = nullptr;
  CudaError e = core().graph_create(&g);
  if (e == err::Success) *graph = H(g);
  return ret(e);
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (graph) cudart::user_objects_dropped(G(graph));
  return ret(core().graph_destroy(G(graph)));
}

cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                   const cudaGraphNode_t* deps, size_t n,
                                   const cudaKernelNodeParams* p) {
  if (!node) return ret(err::InvalidValue);
  client::GraphNode* out = nullptr;
  CudaError e = cudart::kernel_node({G(graph), deps_of(deps, n)}, p, &out);
  return finish_node(e, out, node);
}
cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t* node, cudaGraph_t graph,
                                     const cudaGraphNode_t* deps, size_t n, void* dst,
                                     const void* src, size_t count, cudaMemcpyKind kind) {
  if (!node) return ret(err::InvalidValue);
  client::GraphNode* out = nullptr;
  CudaError e = cudart::memcpy1d_node({G(graph), deps_of(deps, n)}, dst, src, count, kind, &out);
  return finish_node(e, out, node);
}
cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                   const cudaGraphNode_t* deps, size_t n,
                                   const cudaMemcpy3DParms* p) {
  if (!node) return ret(err::InvalidValue);
  client::GraphNode* out = nullptr;
  CudaError e = cudart::memcpy_node({G(graph), deps_of(deps, n)}, p, &out);
  return finish_node(e, out, node);
}
cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                   const cudaGraphNode_t* deps, size_t n,
                                   const cudaMemsetParams* p) {
  if (!node) return ret(err::InvalidValue);
  client::GraphNode* out = nullptr;
  CudaError e = cudart::memset_node({G(graph), deps_of(deps, n)}, p, &out);
  return finish_node(e, out, node);
}
cudaError_t cudaGraphAddHostNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                 const cudaGraphNode_t* deps, size_t n,
                                 const cudaHostNodeParams* p) {
  if (!node) return ret(err::InvalidValue);
  client::GraphNode* out = nullptr;
  CudaError e = cudart::host_node({G(graph), deps_of(deps, n)}, p, &out);
  return finish_node(e, out, node);
}
cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                  const cudaGraphNode_t* deps, size_t n) {
  if (!node) return ret(err::InvalidValue);
  client::GraphNode* out = nullptr;
  CudaError e = core().graph_add(G(graph), deps_of(deps, n), 0, {}, nullptr, 0, &out);
  return finish_node(e, out, node);
}
cudaError_t cudaGraphAddEventRecordNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                        const cudaGraphNode_t* deps, size_t n, cudaEvent_t event) {
  if (!node) return ret(err::InvalidValue);
  client::GraphNode* out = nullptr;
  CudaError e = cudart::event_node({G(graph), deps_of(deps, n)}, event, false, &out);
  return finish_node(e, out, node);
}
cudaError_t cudaGraphAddEventWaitNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                      const cudaGraphNode_t* deps, size_t n, cudaEvent_t event) {
  if (!node) return ret(err::InvalidValue);
  client::GraphNode* out = nullptr;
  CudaError e = cudart::event_node({G(graph), deps_of(deps, n)}, event, true, &out);
  return finish_node(e, out, node);
}
cudaError_t cudaGraphAddChildGraphNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                       const cudaGraphNode_t* deps, size_t n, cudaGraph_t child) {
  if (!node) return ret(err::InvalidValue);
  client::GraphNode* out = nullptr;
  CudaError e = core().graph_add_child(G(graph), deps_of(deps, n), G(child), &out);
  return finish_node(e, out, node);
}
cudaError_t cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t* from,
                                     const cudaGraphNode_t* to, const cudaGraphEdgeData* edges,
                                     size_t n) {
  if (edges) return ret(err::NotSupported);
  return ret(core().graph_edges(G(graph), deps_of(from, n), deps_of(to, n), false));
}
cudaError_t cudaGraphRemoveDependencies(cudaGraph_t graph, const cudaGraphNode_t* from,
                                        const cudaGraphNode_t* to, const cudaGraphEdgeData* edges,
                                        size_t n) {
  if (edges) return ret(err::NotSupported);
  return ret(core().graph_edges(G(graph), deps_of(from, n), deps_of(to, n), true));
}
cudaError_t cudaGraphClone(cudaGraph_t* clone, cudaGraph_t graph) {
  if (!clone) return ret(err::InvalidValue);
  client::Graph* c = nullptr;
  CudaError e = core().graph_clone(G(graph), &c);
  if (e == err::Success) {
    cudart::user_objects_cloned(G(graph), c);
    *clone = H(c);
  }
  return ret(e);
}

// ---- queries
// -------------------------------------------------------------------------------------

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  if (!graph || !count) return ret(err::InvalidValue);
  size_t k = 0;
  for (const auto& n : G(graph)->nodes)
    if (n->listed()) {
      if (nodes && k < *count) nodes[k] = H(n.get());
      ++k;
    }
  *count = k;
  return cudaSuccess;
}
cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  if (!graph || !count) return ret(err::InvalidValue);
  size_t k = 0;
  for (const auto& n : G(graph)->nodes)
    if (n->deps.empty() && n->listed()) {
      if (nodes && k < *count) nodes[k] = H(n.get());
      ++k;
    }
  *count = k;
  return cudaSuccess;
}
cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* type) {
  if (!node || !type) return ret(err::InvalidValue);
  *type = static_cast<cudaGraphNodeType>(N(node)->kind);
  return cudaSuccess;
}
cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t* deps,
                                         cudaGraphEdgeData* edges, size_t* count) {
  if (!node || !count) return ret(err::InvalidValue);
  const auto& d = N(node)->deps;
  if (deps)
    for (size_t i = 0; i < std::min(*count, d.size()); ++i) {
      deps[i] = H(d[i]);
      if (edges) edges[i] = cudaGraphEdgeData{};
    }
  *count = d.size();
  return cudaSuccess;
}

// ---- executable graphs
// ----------------------------------------------------------------------------

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags) {
  if (!exec) return ret(err::InvalidValue);
  // auto-free on launch, upload, device launch, priority: nothing to do remotely
  client::GraphExec* x = nullptr;
  CudaError e = core().graph_instantiate(G(graph), &x);
  if (e == err::Success) {
    x->flags = flags;
    cudart::user_objects_instantiated(G(graph), x);
    *exec = reinterpret_cast<cudaGraphExec_t>(x);
  }
  return ret(e);
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                          unsigned long long flags) {
  return cudaGraphInstantiate(exec, graph, flags);
}
cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t* exec, cudaGraph_t graph,
                                           cudaGraphInstantiateParams* p) {
  if (!p) return ret(err::InvalidValue);
  cudaError_t e = cudaGraphInstantiate(exec, graph, p->flags);
  p->result_out = e == cudaSuccess ? cudaGraphInstantiateSuccess : cudaGraphInstantiateError;
  p->errNode_out = nullptr;
  return e;
}
// Instantiating names no stream: the per-thread form is the same call.
RGPU_EXPORT cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t* exec,
                                                            cudaGraph_t graph,
                                                            cudaGraphInstantiateParams* p) {
  return cudaGraphInstantiateWithParams(exec, graph, p);
}
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
                                cudaGraphExecUpdateResultInfo* info) {
  CudaError e = core().graph_exec_update(X(exec), G(graph));
  if (info) {
    *info = cudaGraphExecUpdateResultInfo{};
    info->result =
        e == err::Success ? cudaGraphExecUpdateSuccess : cudaGraphExecUpdateErrorTopologyChanged;
  }
  return ret(e);
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (exec) cudart::user_objects_dropped(X(exec));
  return ret(core().graph_exec_destroy(X(exec)));
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  client::Stream s;
  if (CudaError e = stream_arg(stream, false, &s); e != err::Success) return ret(e);
  return ret(core().graph_launch(X(exec), s));
}
RGPU_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
  client::Stream s;
  if (CudaError e = stream_arg(stream, true, &s); e != err::Success) return ret(e);
  return ret(core().graph_launch(X(exec), s));
}
// The executable graph already lives on the server: nothing to upload.
cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return ret(err::InvalidValue);
  client::Stream s;
  return ret(stream_arg(stream, false, &s));
}
RGPU_EXPORT cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return ret(err::InvalidValue);
  client::Stream s;
  return ret(stream_arg(stream, true, &s));
}
