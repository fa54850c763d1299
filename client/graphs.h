// Client-side handles of CUDA graphs (client/graphs.cc): the graph itself lives on the server
// (proto/messages_graphs.h); the client keeps its nodes' kinds and edges for queries.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "common/cuda_errors.h"

namespace rgpu::client {

class ServerLink;
struct Graph;
struct Event;

// Memory of a graph's allocation node (client/graphs4.cc): backed when the node is made (its
// address is fixed for the graph's life, as CUDA's), released when the graph, its clones, its
// executable graphs and a launch's outstanding allocation all let go of it.
struct GraphAlloc {
  int device = 0;
  void* ptr = nullptr;
  size_t bytes = 0;
};

struct GraphNode {
  Graph* graph = nullptr;
  uint64_t id = 0;    // the server's, within its graph
  uint32_t kind = 0;  // proto::GraphNodeKind (cudaGraphNodeType's numbers)
  std::vector<GraphNode*> deps;
  // What parameter queries answer, for nodes added explicitly (a clone copies them; captured
  // nodes have none): an event node's event, a host node's function and argument.
  Event* event = nullptr;
  void (*host_fn)(void*) = nullptr;
  void* host_data = nullptr;
  bool removed = false;  // cudaGraphDestroyNode: no longer part of the graph
  bool inner = false;    // a copy of a child graph's node, flattened in: not listed by queries
  bool listed() const { return !removed && !inner; }
  // A child-graph node: the graph it embeds (a clone, owned by the node) and the ids of the copies
  // of that graph's nodes flattened into this one's graph.
  Graph* child = nullptr;
  uint64_t child_first = 0, child_count = 0;
  // The front-end's copy of the parameters last given, for cudaGraph*NodeGetParams.
  std::shared_ptr<void> params;
  // A memory allocation node's memory; a memory free node's address.
  std::shared_ptr<GraphAlloc> alloc;
  void* free_ptr = nullptr;
  // A conditional node's body graphs (client/graphs_cond.cc), owned by the node: the array
  // cudaConditionalNodeParams::phGraph_out points at.
  std::vector<Graph*> bodies;
};

struct Graph {
  ServerLink* link = nullptr;
  int device = 0;
  uint32_t gpu = 0;
  uint64_t id = 0;
  std::vector<std::unique_ptr<GraphNode>> nodes;  // nodes[i]->id == i + 1
  const Graph* origin = nullptr;                  // the graph this one was cloned from
  // The child-graph node that embeds this graph (its clone, or the graph itself when moved in with
  // cudaGraphChildGraphOwnershipMove): it goes with that node; the program may not destroy or
  // instantiate it, embed it elsewhere, update an executable graph from it, or add memory nodes.
  GraphNode* owner = nullptr;
  bool moved = false;  // the program's own graph, moved in (else the node's clone)
  bool body = false;   // a conditional node's body graph (the node is its owner)
  // Being captured into by cudaStreamBeginCaptureToGraph: it had `capture_base` nodes before.
  bool capture_into = false;
  size_t capture_base = 0;
  // Executable graphs of this graph alive (one at most while it has memory nodes).
  std::shared_ptr<int> instances = std::make_shared<int>(0);
  bool has_mem_nodes() const {
    for (const auto& n : nodes)
      if (!n->removed && (n->kind == 10 || n->kind == 11)) return true;
    return false;
  }
  bool has_conditional() const {
    for (const auto& n : nodes)
      if (!n->removed && n->kind == 13) return true;
    return false;
  }
  GraphNode* node(uint64_t id) const {
    return id && id <= nodes.size() ? nodes[id - 1].get() : nullptr;
  }
};

struct GraphExec;

// Logs and answers a change, in an executable graph, of a node of a conditional node's body
// (not supported: client/graphs.cc).
CudaError body_node_in_exec();

// Where a node's request goes: a new node of `graph` after `deps`, or, with `node` set, the
// new parameters of `node` (of `graph`), in the graph itself or in executable graph `exec`.
struct NodeTarget {
  Graph* graph = nullptr;
  std::vector<GraphNode*> deps;
  GraphNode* node = nullptr;
  GraphExec* exec = nullptr;
};

struct GraphExec {
  ServerLink* link = nullptr;
  int device = 0;
  uint32_t gpu = 0;
  uint64_t id = 0;
  uint64_t flags = 0;           // the instantiation flags, as given
  std::set<uint64_t> disabled;  // node ids disabled by cudaGraphNodeSetEnabled
  // Memory nodes: what a launch allocates and frees (client/graphs4.cc).
  std::vector<std::shared_ptr<GraphAlloc>> allocs;
  std::vector<void*> frees;
  std::shared_ptr<int> instances;  // its graph's count
};

}  // namespace rgpu::client
