// Graph queries answered from the client's copy of a graph's shape (client/graphs.h): edges,
// dependent nodes, a node's counterpart in a clone, an event node's event, a host node's
// function, an executable graph's flags, a DOT file of the graph, and cudaStreamGetId.
#include <algorithm>

#include "client/graph_shape.h"
#include "common/log.h"
#include "frontend/cudart/api.h"

using namespace rgpu;
using rgpu::cudart::core;
using rgpu::cudart::ret;
using rgpu::cudart::stream_arg;

#define RGPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

client::Graph* G(cudaGraph_t g) { return reinterpret_cast<client::Graph*>(g); }
client::GraphNode* N(cudaGraphNode_t n) { return reinterpret_cast<client::GraphNode*>(n); }
cudaGraphNode_t H(client::GraphNode* n) { return reinterpret_cast<cudaGraphNode_t>(n); }

cudaError_t event_of_node(cudaGraphNode_t node, cudaEvent_t* out, uint32_t kind) {
  if (!node || !out || N(node)->kind != kind) return ret(err::InvalidValue);
  if (!N(node)->event) {
    LOG_WARN(
        "rgpu: the event of a captured graph node is not known to the client (only "
        "nodes added with cudaGraphAddEvent*Node, and their clones, answer)");
    return ret(err::NotSupported);
  }
  *out = reinterpret_cast<cudaEvent_t>(N(node)->event);
  return cudaSuccess;
}

cudaError_t stream_id(cudaStream_t stream, unsigned long long* id, bool pt) {
  if (!id) return ret(err::InvalidValue);
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  // The client's stream id with the device in bits 48..62 (streams of different servers apart);
  // the legacy stream (id 0) gets bit 63.
  const auto dev = static_cast<unsigned long long>(s.device) << 48;
  *id = s.id ? dev | s.id : (1ull << 63) | dev;
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaGraphNodeGetDependentNodes(cudaGraphNode_t node, cudaGraphNode_t* out,
                                           cudaGraphEdgeData* edges, size_t* count) {
  if (!node || !count) return ret(err::InvalidValue);
  size_t k = 0;
  for (const auto& n : N(node)->graph->nodes)
    for (client::GraphNode* d : n->deps)
      if (d == N(node) && n->listed()) {
        if (out && k < *count) {
          out[k] = H(n.get());
          if (edges) edges[k] = cudaGraphEdgeData{};
        }
        ++k;
      }
  *count = k;
  return cudaSuccess;
}

cudaError_t cudaGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t* from, cudaGraphNode_t* to,
                              cudaGraphEdgeData* edges, size_t* count) {
  if (!graph || !count || (!from) != (!to)) return ret(err::InvalidValue);
  size_t k = 0;
  for (const auto& n : G(graph)->nodes)
    for (client::GraphNode* d : n->deps) {
      if (!n->listed()) continue;
      if (from && k < *count) {
        from[k] = H(d);
        to[k] = H(n.get());
        if (edges) edges[k] = cudaGraphEdgeData{};
      }
      ++k;
    }
  if (from) {
    // Entries past the graph's edges are NULL; the count says how many were returned.
    for (size_t i = k; i < *count; ++i) from[i] = to[i] = nullptr;
    *count = std::min(*count, k);
  } else {
    *count = k;
  }
  return cudaSuccess;
}

cudaError_t cudaGraphNodeFindInClone(cudaGraphNode_t* out, cudaGraphNode_t original,
                                     cudaGraph_t clone) {
  if (!out || !original || !clone) return ret(err::InvalidValue);
  // A clone keeps its original's node ids.
  if (G(clone)->origin != N(original)->graph) return ret(err::InvalidValue);
  client::GraphNode* n = G(clone)->node(N(original)->id);
  if (!n) return ret(err::InvalidValue);
  *out = H(n);
  return cudaSuccess;
}

cudaError_t cudaGraphEventRecordNodeGetEvent(cudaGraphNode_t node, cudaEvent_t* out) {
  return event_of_node(node, out, cudaGraphNodeTypeEventRecord);
}
cudaError_t cudaGraphEventWaitNodeGetEvent(cudaGraphNode_t node, cudaEvent_t* out) {
  return event_of_node(node, out, cudaGraphNodeTypeWaitEvent);
}

cudaError_t cudaGraphHostNodeGetParams(cudaGraphNode_t node, cudaHostNodeParams* p) {
  if (!node || !p || N(node)->kind != cudaGraphNodeTypeHost) return ret(err::InvalidValue);
  if (!N(node)->host_fn) {
    LOG_WARN(
        "rgpu: the function of a captured host node is not known to the client (only "
        "nodes added with cudaGraphAddHostNode, and their clones, answer)");
    return ret(err::NotSupported);
  }
  p->fn = N(node)->host_fn;
  p->userData = N(node)->host_data;
  return cudaSuccess;
}

cudaError_t cudaGraphExecGetFlags(cudaGraphExec_t exec, unsigned long long* flags) {
  if (!exec || !flags) return ret(err::InvalidValue);
  *flags = reinterpret_cast<client::GraphExec*>(exec)->flags;
  return cudaSuccess;
}

// The graph's nodes (kind and id) and edges as a DOT digraph (client/graph_shape.cc, shared with
// cuGraphDebugDotPrint); handles with cudaGraphDebugDotFlagsHandles or Verbose.
cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char* path, unsigned int flags) {
  if (!graph || !path) return ret(err::InvalidValue);
  const bool handles = flags & (cudaGraphDebugDotFlagsHandles | cudaGraphDebugDotFlagsVerbose);
  return ret(client::graph_dot_print(G(graph), path, handles));
}

cudaError_t cudaStreamGetId(cudaStream_t stream, unsigned long long* id) {
  return stream_id(stream, id, false);
}
RGPU_EXPORT cudaError_t cudaStreamGetId_ptsz(cudaStream_t stream, unsigned long long* id) {
  return stream_id(stream, id, true);
}
