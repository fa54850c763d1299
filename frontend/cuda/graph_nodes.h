// The driver's graph node parameters translated into the client core's node requests
// (frontend/cuda/graph_params.cc): shared by cuGraphAdd*Node, cuGraphAddNode, cuGraph*SetParams
// and cuGraphExec*SetParams, which differ only in their target (client::NodeTarget).  Handles
// are the runtime front-end's: a CUgraph is a client::Graph*, a CUgraphNode a client::GraphNode*
// and a CUgraphExec a client::GraphExec*, as cudaGraph_t / cudaGraphNode_t / cudaGraphExec_t.
#pragma once

#include <vector>

#include "frontend/cuda/api.h"

namespace rgpu::cuda_fe {

inline client::Graph* graph_of(CUgraph g) { return reinterpret_cast<client::Graph*>(g); }
inline CUgraph cu(client::Graph* g) { return reinterpret_cast<CUgraph>(g); }
inline client::GraphNode* node_of(CUgraphNode n) { return reinterpret_cast<client::GraphNode*>(n); }
inline CUgraphNode cu(client::GraphNode* n) { return reinterpret_cast<CUgraphNode>(n); }
inline client::GraphExec* exec_of(CUgraphExec x) { return reinterpret_cast<client::GraphExec*>(x); }

inline std::vector<client::GraphNode*> nodes_of(const CUgraphNode* deps, size_t n) {
  std::vector<client::GraphNode*> out;
  for (size_t i = 0; i < n; ++i) out.push_back(deps ? node_of(deps[i]) : nullptr);
  return out;
}
// False (logged) for edges with ports or types (programmatic edges), which rgpu does not record.
bool plain_edges(const CUgraphEdgeData* edges, size_t n);

// Each records a new node (t.graph after t.deps) or replaces t.node's parameters (in t.exec
// when set); `out` may be null.  The graph's own node keeps a copy of what was given, for the
// cuGraph*NodeGetParams queries.
// A kernel node keeps its attributes (cuGraphKernelNodeSetAttribute): `attrs` replaces them, else
// a node whose parameters are set keeps those it had.
CUresult kernel_node(const client::NodeTarget& t, const CUDA_KERNEL_NODE_PARAMS* p,
                     client::GraphNode** out,
                     const std::vector<CUlaunchAttribute>* attrs = nullptr);
CUresult memcpy_node(const client::NodeTarget& t, const CUDA_MEMCPY3D* p, client::GraphNode** out);
CUresult memset_node(const client::NodeTarget& t, const CUDA_MEMSET_NODE_PARAMS* p,
                     client::GraphNode** out);
CUresult host_node(const client::NodeTarget& t, const CUDA_HOST_NODE_PARAMS* p,
                   client::GraphNode** out);
CUresult event_node(const client::NodeTarget& t, CUevent event, bool wait, client::GraphNode** out);
// cuGraphAddNode / cuGraphNodeSetParams / cuGraphExecNodeSetParams: any of the above by type;
// (adding only) child graphs and empty nodes.
CUresult any_node(const client::NodeTarget& t, CUgraphNodeParams* p, client::GraphNode** out);

// The target for new parameters of `node` (in `exec` when given); false when the node is not of
// `kind`.
bool node_target(CUgraphNode node, CUgraphExec exec, CUgraphNodeType kind, client::NodeTarget* t);

// What the getters answer: the copy kept for a node added or set explicitly.
struct KernelNodeCopy {
  CUDA_KERNEL_NODE_PARAMS params{};
  std::vector<std::vector<char>> args;
  std::vector<void*> arg_ptrs;
  std::vector<CUlaunchAttribute> attrs;  // kernel node attributes set
};
struct MemcpyNodeCopy {
  CUDA_MEMCPY3D params{};
};
struct MemsetNodeCopy {
  CUDA_MEMSET_NODE_PARAMS params{};
};
// A memory allocation node's parameters, with their access descriptors; laid out as the
// runtime's copy (frontend/cudart/graphs4.cc), so either API's getter answers for either's node.
struct AllocNodeCopy {
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  std::vector<CUmemAccessDesc> access;
};
// Graph memory nodes (frontend/cuda/graph_memory.cc): added only (their parameters are fixed).
// The allocation's address goes to `*dptr`.
CUresult mem_alloc_node(const client::NodeTarget& t, const CUmemPoolProps& props,
                        const CUmemAccessDesc* access, size_t access_count, size_t bytesize,
                        CUdeviceptr* dptr, client::GraphNode** out);
CUresult mem_free_node(const client::NodeTarget& t, CUdeviceptr dptr, client::GraphNode** out);
// A call that may synchronize (cuMemAlloc): refused, and the offending captures invalidated, when
// a stream capture's mode prohibits it on this thread (cuThreadExchangeStreamCaptureMode).
CUresult unsafe_call();

}  // namespace rgpu::cuda_fe
