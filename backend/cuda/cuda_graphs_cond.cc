#include "backend/cuda/cuda_graphs_cond.h"

#include "backend/cuda/cuda_graphs3.h"

namespace rgpu::backend {

namespace {

Status check(const CudaDriver& drv, CUresult r) { return cuda_check(drv, r); }

CUgraph cu_graph(uint64_t g) { return reinterpret_cast<CUgraph>(g); }

}  // namespace

Status cuda_cond_handle_create(const CudaDriver& drv, CUcontext ctx, uint64_t& graph,
                               uint32_t value, uint32_t flags, uint64_t& handle) {
  bool made = false;
  if (!graph) {
    CUgraph g = nullptr;
    if (Status s = check(drv, drv.cuGraphCreate(&g, 0)); !s.ok()) return s;
    graph = reinterpret_cast<uint64_t>(g);
    made = true;
  }
  CUgraphConditionalHandle h = 0;
  Status s = check(drv, drv.cuGraphConditionalHandleCreate(&h, cu_graph(graph), ctx, value, flags));
  if (s.ok()) {
    handle = h;
  } else if (made) {
    drv.cuGraphDestroy(cu_graph(graph));
    graph = 0;
  }
  return s;
}

Status cuda_capture_into(const CudaDriver& drv, CUstream stream, uint64_t graph, bool empty_first) {
  CUgraph g = cu_graph(graph);
  if (empty_first) {
    // A graph is rebuilt at each instantiation: what an earlier one added goes (a conditional
    // node takes its bodies with it; the graph's handles stay).
    size_t n = 0;
    if (Status s = check(drv, drv.cuGraphGetNodes(g, nullptr, &n)); !s.ok()) return s;
    std::vector<CUgraphNode> nodes(n);
    if (n)
      if (Status s = check(drv, drv.cuGraphGetNodes(g, nodes.data(), &n)); !s.ok()) return s;
    for (size_t i = 0; i < n; ++i)
      if (Status s = check(drv, drv.cuGraphDestroyNode(nodes[i])); !s.ok()) return s;
  }
  return check(drv, drv.cuStreamBeginCaptureToGraph(stream, g, nullptr, nullptr, 0,
                                                    CU_STREAM_CAPTURE_MODE_RELAXED));
}

Status cuda_capture_conditional(const CudaDriver& drv, CUcontext ctx, CUstream stream,
                                uint64_t handle, uint32_t type, uint32_t size,
                                std::vector<uint64_t>& bodies) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CUgraph g = nullptr;
  const CUgraphNode* deps = nullptr;
  const CUgraphEdgeData* edges = nullptr;
  size_t n = 0;
  if (Status s =
          check(drv, drv.cuStreamGetCaptureInfo_v3(stream, &st, nullptr, &g, &deps, &edges, &n));
      !s.ok())
    return s;
  if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE)
    return Status::fail(err::InvalidValue, "the stream is not capturing");
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  p.conditional.handle = handle;
  p.conditional.type = static_cast<CUgraphConditionalNodeType>(type);
  p.conditional.size = size;
  p.conditional.ctx = ctx;
  CUgraphNode node = nullptr;
  // The capture's dependencies are copied first: adding a node may move what `deps` points at.
  std::vector<CUgraphNode> after(deps, deps + n);
  std::vector<CUgraphEdgeData> data;
  if (edges) data.assign(edges, edges + n);
  if (Status s = check(
          drv, drv.cuGraphAddNode_v2(&node, g, after.data(), edges ? data.data() : nullptr, n, &p));
      !s.ok())
    return s;
  bodies.clear();
  for (unsigned i = 0; i < size; ++i)
    bodies.push_back(reinterpret_cast<uint64_t>(p.conditional.phGraph_out[i]));
  return check(drv, drv.cuStreamUpdateCaptureDependencies_v2(stream, &node, nullptr, 1,
                                                             CU_STREAM_SET_CAPTURE_DEPENDENCIES));
}

Status cuda_capture_finish(const CudaDriver& drv, CUstream stream) {
  CUgraph g = nullptr;
  return check(drv, drv.cuStreamEndCapture(stream, &g));  // g: the graph captured into, kept
}

Status cuda_native_instantiate(const CudaDriver& drv, uint64_t graph, uint64_t& exec) {
  CUgraphExec x = nullptr;
  Status s = check(drv, drv.cuGraphInstantiateWithFlags(&x, cu_graph(graph), 0));
  exec = s.ok() ? reinterpret_cast<uint64_t>(x) : 0;
  return s;
}

}  // namespace rgpu::backend
