// The graphs3 group's runtime entry points (issue 11, item 1 leftovers): stream attributes,
// cudaGraphAddNode, node removal and enabling, child-graph nodes' graphs, parameter queries of
// kernel, memcpy and memset nodes, and copy nodes to and from symbols.  Thin translations onto
// the client core (client/graphs3.cc, client/graphs.cc).
#include <cstring>

#include "common/log.h"
#include "frontend/common/launch_attributes.h"
#include "frontend/cudart/api.h"
#include "frontend/cudart/graph_nodes.h"

using namespace rgpu;
using rgpu::cudart::core;
using rgpu::cudart::ret;
using rgpu::cudart::stream_arg;

#define RGPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using Attr = client::Client::LaunchAttribute;
client::Graph* G(cudaGraph_t g) { return reinterpret_cast<client::Graph*>(g); }
client::GraphNode* N(cudaGraphNode_t n) { return reinterpret_cast<client::GraphNode*>(n); }
client::GraphExec* X(cudaGraphExec_t x) { return reinterpret_cast<client::GraphExec*>(x); }

// ---- stream attributes: the five a stream has, encoded as launch attributes are on the wire.

bool encode(int id, const cudaStreamAttrValue& v, Attr& a) {
  switch (id) {  // the stream attributes among the launch attributes (same ids, same values)
    case cudaStreamAttributeAccessPolicyWindow:
    case cudaStreamAttributeSynchronizationPolicy:
    case cudaStreamAttributePriority:
    case cudaStreamAttributeMemSyncDomainMap:
    case cudaStreamAttributeMemSyncDomain:
      return frontend::launch_attribute(id, v, a, [](cudaEvent_t) { return nullptr; });
    default:
      return false;
  }
}

void decode(const Attr& a, cudaStreamAttrValue& v) {
  const auto i32 = [](uint64_t x) { return static_cast<int>(static_cast<uint32_t>(x)); };
  switch (a.id) {
    case cudaStreamAttributeAccessPolicyWindow: {
      v.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(a.v[0]);
      v.accessPolicyWindow.num_bytes = a.v[1];
      const uint32_t bits = static_cast<uint32_t>(a.v[2]);
      std::memcpy(&v.accessPolicyWindow.hitRatio, &bits, sizeof bits);
      v.accessPolicyWindow.hitProp = static_cast<cudaAccessProperty>(i32(a.v[3]));
      v.accessPolicyWindow.missProp = static_cast<cudaAccessProperty>(i32(a.v[3] >> 32));
      break;
    }
    case cudaStreamAttributeSynchronizationPolicy:
      v.syncPolicy = static_cast<cudaSynchronizationPolicy>(i32(a.v[0]));
      break;
    case cudaStreamAttributePriority:
      v.priority = i32(a.v[0]);
      break;
    case cudaStreamAttributeMemSyncDomainMap:
      v.memSyncDomainMap.default_ = static_cast<unsigned char>(a.v[0]);
      v.memSyncDomainMap.remote = static_cast<unsigned char>(a.v[1]);
      break;
    case cudaStreamAttributeMemSyncDomain:
      v.memSyncDomain = static_cast<cudaLaunchMemSyncDomain>(i32(a.v[0]));
      break;
    default:
      break;
  }
}

int raw(cudaStreamAttrID id) {
  int v;
  static_assert(sizeof v == sizeof id);
  std::memcpy(&v, &id, sizeof v);
  return v;
}

cudaError_t set_attr(cudaStream_t stream, cudaStreamAttrID id, const cudaStreamAttrValue* v,
                     bool pt) {
  if (!v) return ret(err::InvalidValue);
  Attr a;
  if (!encode(raw(id), *v, a)) {
    LOG_WARN("rgpu: stream attribute %d does not exist", raw(id));
    return ret(err::InvalidValue);
  }
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  return ret(core().stream_attribute(s, 0, a, nullptr));
}

cudaError_t get_attr(cudaStream_t stream, cudaStreamAttrID id, cudaStreamAttrValue* v, bool pt) {
  if (!v) return ret(err::InvalidValue);
  Attr a;
  cudaStreamAttrValue zero{};
  if (!encode(raw(id), zero, a)) {
    LOG_WARN("rgpu: stream attribute %d does not exist", raw(id));
    return ret(err::InvalidValue);
  }
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  if (CudaError e = core().stream_attribute(s, 1, a, nullptr); e != err::Success) return ret(e);
  decode(a, *v);
  return cudaSuccess;
}

cudaError_t copy_attrs(cudaStream_t dst, cudaStream_t src, bool pt) {
  client::Stream d, s;
  if (CudaError e = stream_arg(dst, pt, &d); e != err::Success) return ret(e);
  if (CudaError e = stream_arg(src, pt, &s); e != err::Success) return ret(e);
  Attr unused;
  return ret(core().stream_attribute(d, 2, unused, &s));
}

}  // namespace

cudaError_t cudaStreamSetAttribute(cudaStream_t s, cudaStreamAttrID id,
                                   const cudaStreamAttrValue* v) {
  return set_attr(s, id, v, false);
}
RGPU_EXPORT cudaError_t cudaStreamSetAttribute_ptsz(cudaStream_t s, cudaStreamAttrID id,
                                                    const cudaStreamAttrValue* v) {
  return set_attr(s, id, v, true);
}
cudaError_t cudaStreamGetAttribute(cudaStream_t s, cudaStreamAttrID id, cudaStreamAttrValue* v) {
  return get_attr(s, id, v, false);
}
RGPU_EXPORT cudaError_t cudaStreamGetAttribute_ptsz(cudaStream_t s, cudaStreamAttrID id,
                                                    cudaStreamAttrValue* v) {
  return get_attr(s, id, v, true);
}
cudaError_t cudaStreamCopyAttributes(cudaStream_t dst, cudaStream_t src) {
  return copy_attrs(dst, src, false);
}
RGPU_EXPORT cudaError_t cudaStreamCopyAttributes_ptsz(cudaStream_t dst, cudaStream_t src) {
  return copy_attrs(dst, src, true);
}

// ---- nodes
// ---------------------------------------------------------------------------------------

cudaError_t cudaGraphDestroyNode(cudaGraphNode_t node) {
  return ret(core().graph_destroy_node(N(node)));
}
cudaError_t cudaGraphNodeSetEnabled(cudaGraphExec_t x, cudaGraphNode_t node, unsigned enabled) {
  if (!x || !node) return ret(err::InvalidValue);
  const uint32_t k = N(node)->kind;
  if (k != cudaGraphNodeTypeKernel && k != cudaGraphNodeTypeMemcpy && k != cudaGraphNodeTypeMemset)
    return ret(err::InvalidValue);  // CUDA: only kernel, memcpy and memset nodes
  return ret(core().graph_node_enable(X(x), N(node), enabled != 0));
}
cudaError_t cudaGraphNodeGetEnabled(cudaGraphExec_t x, cudaGraphNode_t node, unsigned* enabled) {
  if (!x || !node || !enabled || !N(node)->listed()) return ret(err::InvalidValue);
  const uint32_t k = N(node)->kind;
  if (k != cudaGraphNodeTypeKernel && k != cudaGraphNodeTypeMemcpy && k != cudaGraphNodeTypeMemset)
    return ret(err::InvalidValue);
  *enabled = X(x)->disabled.count(N(node)->id) ? 0 : 1;
  return cudaSuccess;
}
cudaError_t cudaGraphChildGraphNodeGetGraph(cudaGraphNode_t node, cudaGraph_t* graph) {
  if (!node || !graph || N(node)->kind != cudaGraphNodeTypeGraph || !N(node)->child)
    return ret(err::InvalidValue);
  *graph = reinterpret_cast<cudaGraph_t>(N(node)->child);
  return cudaSuccess;
}
cudaError_t cudaGraphExecChildGraphNodeSetParams(cudaGraphExec_t x, cudaGraphNode_t node,
                                                 cudaGraph_t child) {
  if (!x || !node || !child) return ret(err::InvalidValue);
  return ret(core().graph_exec_child(X(x), N(node), G(child)));
}

// ---- parameter queries: the client's copy of what was last set on the graph's node
// ------------------------------------------------------------------------------------------------

cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node, cudaKernelNodeParams* p) {
  if (!node || !p || N(node)->kind != cudaGraphNodeTypeKernel) return ret(err::InvalidValue);
  const auto* c = cudart::node_params<cudart::KernelNodeCopy>(N(node));
  if (!c) {
    LOG_WARN(
        "rgpu: a captured kernel node's parameters are not known to the client (only nodes "
        "added or set explicitly, and their clones, answer)");
    return ret(err::NotSupported);
  }
  *p = c->params;
  return cudaSuccess;
}
cudaError_t cudaGraphMemcpyNodeGetParams(cudaGraphNode_t node, cudaMemcpy3DParms* p) {
  if (!node || !p || N(node)->kind != cudaGraphNodeTypeMemcpy) return ret(err::InvalidValue);
  const auto* c = cudart::node_params<cudaMemcpy3DParms>(N(node));
  if (!c) {
    LOG_WARN(
        "rgpu: a captured memcpy node's parameters are not known to the client (only nodes "
        "added or set explicitly, and their clones, answer)");
    return ret(err::NotSupported);
  }
  *p = *c;
  return cudaSuccess;
}
cudaError_t cudaGraphMemsetNodeGetParams(cudaGraphNode_t node, cudaMemsetParams* p) {
  if (!node || !p || N(node)->kind != cudaGraphNodeTypeMemset) return ret(err::InvalidValue);
  const auto* c = cudart::node_params<cudaMemsetParams>(N(node));
  if (!c) {
    LOG_WARN(
        "rgpu: a captured memset node's parameters are not known to the client (only nodes "
        "added or set explicitly, and their clones, answer)");
    return ret(err::NotSupported);
  }
  *p = *c;
  return cudaSuccess;
}

// ---- copy nodes to and from symbols: the symbol's address on the graph's device, plus offset
// ------------------------------------------------------------------------------------------------

namespace {

cudaError_t symbol_at(const void* symbol, size_t count, size_t offset, char** addr) {
  void* base = nullptr;
  size_t size = 0;
  if (cudaError_t e = cudaGetSymbolAddress(&base, symbol); e != cudaSuccess) return e;
  if (cudaError_t e = cudaGetSymbolSize(&size, symbol); e != cudaSuccess) return e;
  if (offset > size || count > size - offset) return ret(err::InvalidValue);
  *addr = static_cast<char*>(base) + offset;
  return cudaSuccess;
}

// A copy node's target (a new node of `graph` after `deps`, or `node`'s new parameters).
cudaError_t symbol_copy(const client::NodeTarget& t, bool to, void* ptr, const void* symbol,
                        size_t count, size_t offset, cudaMemcpyKind kind, cudaGraphNode_t* out) {
  char* at = nullptr;
  if (cudaError_t e = symbol_at(symbol, count, offset, &at); e != cudaSuccess) return e;
  if (to && kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault)
    return ret(static_cast<CudaError>(cudaErrorInvalidMemcpyDirection));
  if (!to && kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault)
    return ret(static_cast<CudaError>(cudaErrorInvalidMemcpyDirection));
  client::GraphNode* n = nullptr;
  CudaError e = to ? cudart::memcpy1d_node(t, at, ptr, count, kind, &n)
                   : cudart::memcpy1d_node(t, ptr, at, count, kind, &n);
  if (e == err::Success && out) *out = reinterpret_cast<cudaGraphNode_t>(n);
  return ret(e);
}

std::vector<client::GraphNode*> deps_of(const cudaGraphNode_t* deps, size_t n) {
  std::vector<client::GraphNode*> out;
  for (size_t i = 0; i < n; ++i) out.push_back(deps ? N(deps[i]) : nullptr);
  return out;
}

bool memcpy_target(cudaGraphExec_t x, cudaGraphNode_t node, client::NodeTarget* t) {
  if (!node || N(node)->kind != cudaGraphNodeTypeMemcpy) return false;
  t->graph = N(node)->graph;
  t->node = N(node);
  t->exec = x ? X(x) : nullptr;
  return true;
}

}  // namespace

cudaError_t cudaGraphAddMemcpyNodeToSymbol(cudaGraphNode_t* node, cudaGraph_t graph,
                                           const cudaGraphNode_t* deps, size_t n,
                                           const void* symbol, const void* src, size_t count,
                                           size_t offset, cudaMemcpyKind kind) {
  if (!node || !graph) return ret(err::InvalidValue);
  return symbol_copy({G(graph), deps_of(deps, n)}, true, const_cast<void*>(src), symbol, count,
                     offset, kind, node);
}
cudaError_t cudaGraphAddMemcpyNodeFromSymbol(cudaGraphNode_t* node, cudaGraph_t graph,
                                             const cudaGraphNode_t* deps, size_t n, void* dst,
                                             const void* symbol, size_t count, size_t offset,
                                             cudaMemcpyKind kind) {
  if (!node || !graph) return ret(err::InvalidValue);
  return symbol_copy({G(graph), deps_of(deps, n)}, false, dst, symbol, count, offset, kind, node);
}
cudaError_t cudaGraphMemcpyNodeSetParamsToSymbol(cudaGraphNode_t node, const void* symbol,
                                                 const void* src, size_t count, size_t offset,
                                                 cudaMemcpyKind kind) {
  client::NodeTarget t;
  if (!memcpy_target(nullptr, node, &t)) return ret(err::InvalidValue);
  return symbol_copy(t, true, const_cast<void*>(src), symbol, count, offset, kind, nullptr);
}
cudaError_t cudaGraphMemcpyNodeSetParamsFromSymbol(cudaGraphNode_t node, void* dst,
                                                   const void* symbol, size_t count, size_t offset,
                                                   cudaMemcpyKind kind) {
  client::NodeTarget t;
  if (!memcpy_target(nullptr, node, &t)) return ret(err::InvalidValue);
  return symbol_copy(t, false, dst, symbol, count, offset, kind, nullptr);
}
cudaError_t cudaGraphExecMemcpyNodeSetParamsToSymbol(cudaGraphExec_t x, cudaGraphNode_t node,
                                                     const void* symbol, const void* src,
                                                     size_t count, size_t offset,
                                                     cudaMemcpyKind kind) {
  client::NodeTarget t;
  if (!x || !memcpy_target(x, node, &t)) return ret(err::InvalidValue);
  return symbol_copy(t, true, const_cast<void*>(src), symbol, count, offset, kind, nullptr);
}
cudaError_t cudaGraphExecMemcpyNodeSetParamsFromSymbol(cudaGraphExec_t x, cudaGraphNode_t node,
                                                       void* dst, const void* symbol, size_t count,
                                                       size_t offset, cudaMemcpyKind kind) {
  client::NodeTarget t;
  if (!x || !memcpy_target(x, node, &t)) return ret(err::InvalidValue);
  return symbol_copy(t, false, dst, symbol, count, offset, kind, nullptr);
}

// ---- cudaGraphAddNode: every node kind rgpu records, through the cudaGraphAdd*Node calls
// ------------------------------------------------------------------------------------------------

cudaError_t cudaGraphAddNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                             const cudaGraphEdgeData* edges, size_t n, cudaGraphNodeParams* p) {
  if (!node || !graph || !p) return ret(err::InvalidValue);
  if (edges)
    for (size_t i = 0; i < n; ++i)
      if (edges[i].from_port || edges[i].to_port || edges[i].type) {
        LOG_WARN("rgpu: graph edges with ports or types (programmatic edges) are not supported");
        return ret(err::NotSupported);
      }
  switch (p->type) {
    case cudaGraphNodeTypeKernel: {
      cudaKernelNodeParams k{};
      k.func = p->kernel.func;
      k.gridDim = p->kernel.gridDim;
      k.blockDim = p->kernel.blockDim;
      k.sharedMemBytes = p->kernel.sharedMemBytes;
      k.kernelParams = p->kernel.kernelParams;
      k.extra = p->kernel.extra;
      return cudaGraphAddKernelNode(node, graph, deps, n, &k);
    }
    case cudaGraphNodeTypeMemcpy:
      if (p->memcpy.flags) return ret(err::InvalidValue);
      return cudaGraphAddMemcpyNode(node, graph, deps, n, &p->memcpy.copyParams);
    case cudaGraphNodeTypeMemset: {
      cudaMemsetParams m{};
      m.dst = p->memset.dst;
      m.pitch = p->memset.pitch;
      m.value = p->memset.value;
      m.elementSize = p->memset.elementSize;
      m.width = p->memset.width;
      m.height = p->memset.height;
      return cudaGraphAddMemsetNode(node, graph, deps, n, &m);
    }
    case cudaGraphNodeTypeHost: {
      cudaHostNodeParams h{p->host.fn, p->host.userData};
      return cudaGraphAddHostNode(node, graph, deps, n, &h);
    }
    case cudaGraphNodeTypeGraph: {
      // Clone: the node embeds a copy; move: the node takes the graph itself (the parent's now).
      const auto own = p->graph.ownership;
      if (own != cudaGraphChildGraphOwnershipClone && own != cudaGraphChildGraphOwnershipMove)
        return ret(err::InvalidValue);
      client::GraphNode* out = nullptr;
      if (CudaError e = core().graph_add_child(G(graph), deps_of(deps, n), G(p->graph.graph), &out,
                                               own == cudaGraphChildGraphOwnershipMove);
          e != err::Success)
        return ret(e);
      *node = reinterpret_cast<cudaGraphNode_t>(out);
      p->graph.graph = reinterpret_cast<cudaGraph_t>(out->child);  // the embedded graph
      return cudaSuccess;
    }
    case cudaGraphNodeTypeEmpty:
      return cudaGraphAddEmptyNode(node, graph, deps, n);
    case cudaGraphNodeTypeWaitEvent:
      return cudaGraphAddEventWaitNode(node, graph, deps, n, p->eventWait.event);
    case cudaGraphNodeTypeEventRecord:
      return cudaGraphAddEventRecordNode(node, graph, deps, n, p->eventRecord.event);
    case cudaGraphNodeTypeMemAlloc: {
      static_assert(sizeof(cudaMemAllocNodeParams) == sizeof(cudaMemAllocNodeParamsV2));
      cudaMemAllocNodeParams a{};
      std::memcpy(&a, &p->alloc, sizeof a);
      cudaError_t e = cudaGraphAddMemAllocNode(node, graph, deps, n, &a);
      p->alloc.dptr = a.dptr;
      return e;
    }
    case cudaGraphNodeTypeMemFree:
      return cudaGraphAddMemFreeNode(node, graph, deps, n, p->free.dptr);
    case cudaGraphNodeTypeConditional: {
      // The node owns its body graphs; phGraph_out points at its array of them.
      const cudaConditionalNodeParams& c = p->conditional;
      client::GraphNode* out = nullptr;
      if (CudaError e = core().graph_add_conditional(G(graph), deps_of(deps, n), c.handle,
                                                     static_cast<unsigned>(c.type), c.size, &out);
          e != err::Success)
        return ret(e);
      *node = reinterpret_cast<cudaGraphNode_t>(out);
      p->conditional.phGraph_out = reinterpret_cast<cudaGraph_t*>(out->bodies.data());
      return cudaSuccess;
    }
    default:
      LOG_WARN(
          "rgpu: cudaGraphAddNode with a node of type %d (external semaphore) is not supported",
          static_cast<int>(p->type));
      return ret(err::NotSupported);
  }
}

cudaError_t cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle* out, cudaGraph_t graph,
                                             unsigned value, unsigned flags) {
  if (!out || !graph) return ret(err::InvalidValue);
  uint64_t h = 0;
  if (CudaError e = core().graph_cond_handle(G(graph), value, flags, &h); e != err::Success)
    return ret(e);
  *out = h;
  return cudaSuccess;
}

// ---- capture into an existing graph; a capturing stream's dependencies
// ------------------------------------------------------------------------------------------------

namespace {

bool plain_edges(const cudaGraphEdgeData* edges, size_t n) {
  if (edges)
    for (size_t i = 0; i < n; ++i)
      if (edges[i].from_port || edges[i].to_port || edges[i].type) {
        LOG_WARN("rgpu: graph edges with ports or types (programmatic edges) are not supported");
        return false;
      }
  return true;
}

cudaError_t capture_to(cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t* deps,
                       const cudaGraphEdgeData* edges, size_t n, cudaStreamCaptureMode mode,
                       bool pt) {
  if (!graph || (n && !deps)) return ret(err::InvalidValue);
  if (!plain_edges(edges, n)) return ret(err::NotSupported);
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  return ret(core().capture_to(s, G(graph), deps_of(deps, n), static_cast<unsigned>(mode)));
}

cudaError_t update_deps(cudaStream_t stream, cudaGraphNode_t* deps, const cudaGraphEdgeData* edges,
                        size_t n, unsigned flags, bool pt) {
  if ((n && !deps) || flags > cudaStreamSetCaptureDependencies) return ret(err::InvalidValue);
  if (!plain_edges(edges, n)) return ret(err::NotSupported);
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  return ret(core().capture_deps(s, deps_of(deps, n), flags == cudaStreamSetCaptureDependencies));
}

}  // namespace

cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                          const cudaGraphNode_t* deps,
                                          const cudaGraphEdgeData* edges, size_t n,
                                          cudaStreamCaptureMode mode) {
  return capture_to(stream, graph, deps, edges, n, mode, false);
}
RGPU_EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                                           const cudaGraphNode_t* deps,
                                                           const cudaGraphEdgeData* edges, size_t n,
                                                           cudaStreamCaptureMode mode) {
  return capture_to(stream, graph, deps, edges, n, mode, true);
}
cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t stream, cudaGraphNode_t* deps,
                                                const cudaGraphEdgeData* edges, size_t n,
                                                unsigned flags) {
  return update_deps(stream, deps, edges, n, flags, false);
}
RGPU_EXPORT cudaError_t cudaStreamUpdateCaptureDependencies_ptsz(cudaStream_t stream,
                                                                 cudaGraphNode_t* deps,
                                                                 const cudaGraphEdgeData* edges,
                                                                 size_t n, unsigned flags) {
  return update_deps(stream, deps, edges, n, flags, true);
}
