// A session's CUDA graphs (server/graphs.cc): graphs built node by node or by stream capture,
// their instantiated copies, and which streams are capturing.  A node is a recorded
// stream-ordered request (its encoded body, and the bytes of a host-to-device copy, kept with the
// graph); one GraphLaunch replays an executable graph's nodes, in an order that respects every
// edge, on the launch's stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "backend/executor.h"

namespace rgpu::server {

// A session holds at most this many graphs, conditional nodes' body graphs included.
constexpr size_t kMaxGraphs = 1u << 16;

struct GraphNode {
  uint64_t id = 0;    // the graph's own numbering: 1, 2, ...
  uint32_t kind = 0;  // proto::GraphNodeKind
  uint16_t type = 0;  // the recorded request's message id (0: an empty node)
  std::vector<uint8_t> body;
  std::shared_ptr<const std::vector<char>> payload;  // a host-to-device copy's bytes
  std::vector<uint64_t> deps;
  bool removed = false;
  bool disabled = false;  // in an executable graph: skipped by a launch (cudaGraphNodeSetEnabled)
};

// The backend graph that a graph's conditional handles belong to (server/graphs_cond.cc): shared
// by the graph and the executable graphs made from it (they rebuild their native graph in it),
// let go with the last of them.
struct NativeGraph {
  backend::Executor* exec = nullptr;
  int device = 0;
  uint64_t id = 0;
  NativeGraph(backend::Executor* e, int d) : exec(e), device(d) {}
  NativeGraph(const NativeGraph&) = delete;
  NativeGraph& operator=(const NativeGraph&) = delete;
  ~NativeGraph() {
    if (id) exec->native_graph_destroy(device, id);
  }
};

struct Graph {
  uint32_t device = 0;
  std::vector<GraphNode> nodes;  // nodes[i].id == i + 1
  bool capturing = false;        // still being captured: not usable yet
  // Conditional nodes: a body graph names the graph at the top of its conditional nodes (`root`);
  // that graph holds the handles made for it or its bodies, and their backend graph.
  uint64_t root = 0;
  std::vector<uint64_t> handles;
  std::shared_ptr<NativeGraph> native;
};

struct GraphExec {
  uint32_t device = 0;
  std::vector<GraphNode> order;  // topologically sorted
  bool holds_payload = false;
  // The backend's native graph of it (server/graphs_native.cc): made at the second launch.
  uint64_t native = 0;
  bool native_refused = false;  // replayed node by node
  uint32_t launches = 0;
  // A graph with conditional nodes always runs natively, built in `cond` (its root graph's
  // backend graph) from `order` and the body graphs' nodes as they were at instantiation.
  std::shared_ptr<NativeGraph> cond;
  std::map<uint64_t, std::vector<GraphNode>> bodies;  // by body graph id
  bool cond_lost = false;                             // its device was reset: its handles are gone
};

// One capture sequence: the streams taking part and, per stream, the nodes the next one
// depends on.
struct CaptureSequence {
  uint64_t graph = 0;
  uint64_t origin = 0;  // the stream that began it
  uint32_t mode = 0;
  uint64_t sequence = 0;
  bool invalidated = false;
  bool into_existing = false;  // cudaStreamBeginCaptureToGraph: a failure keeps the graph's
  size_t existing = 0;         // first `existing` nodes
};

struct GraphState {
  std::map<uint64_t, Graph> graphs;
  std::map<uint64_t, GraphExec> execs;
  std::map<uint64_t, CaptureSequence> captures;  // by graph id
  struct Capturing {
    uint64_t graph = 0;
    std::vector<uint64_t> tail;  // what the stream's next node depends on
  };
  std::map<uint64_t, Capturing> streams;  // by client stream id
  struct CapturedEvent {
    uint64_t graph = 0;
    std::vector<uint64_t> tail;
  };
  std::map<uint64_t, CapturedEvent> events;  // events recorded in a capture, by client event id
  uint64_t next_sequence = 1;
  uint32_t replays = 0;  // numbers host callbacks of replays apart
};

// The nodes of `g` in an order that respects every edge (removed ones left out); false when the
// edges make a cycle (server/graphs.cc).
bool topological(const Graph& g, std::vector<GraphNode>& out);
// Whether a node can be part of a native graph (server/graphs_native.cc).
bool native_node(const GraphNode& n);
// Whether `g` has conditional nodes or handles (server/graphs_cond.cc).
bool graph_has_conditional(const Graph& g);

// The node kind (proto::GraphNodeKind) a request of `type` records as; false when such a
// request cannot be a graph node.  Type 0 is an empty node.
bool graph_node_kind(uint16_t type, const std::vector<uint8_t>& body, uint32_t& kind);

}  // namespace rgpu::server
