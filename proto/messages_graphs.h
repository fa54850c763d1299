// Messages of CUDA graphs (issue 11, item 1).  A graph lives on the server: its nodes are
// recorded stream-ordered requests (Launch, Memset, MemcpyDtoD, Memcpy2DDtoD, MemcpyHtoDAsync with
// its payload kept, MemcpyPeer, EventRecord, StreamWaitEvent, HostFunc) plus empty nodes, each
// with its dependencies; one GraphLaunch replays an instantiated graph on a stream.  Graph, node
// executable-graph ids are chosen by the client (unique per connection, never 0); node ids are
// the graph's own (1, 2, ... in the order nodes were added; a clone keeps them).
// Included by proto/messages.h (it uses Empty): include that one.
#pragma once

#include <cstdint>
#include <vector>

#include "proto/wire.h"

namespace rgpu::proto {

struct GraphCreateReq {
  uint32_t device = 0;
  uint64_t graph = 0;
  RGPU_FIELDS(device, graph)
};
using GraphCreateRep = Empty;
struct GraphObjectReq {
  uint32_t device = 0;
  uint64_t id = 0;
  RGPU_FIELDS(device, id)
};
using GraphDestroyReq = GraphObjectReq;
using GraphDestroyRep = Empty;
using GraphExecDestroyReq = GraphObjectReq;
using GraphExecDestroyRep = Empty;

// Node kinds on the wire (the runtime's cudaGraphNodeType numbers where one exists).
enum GraphNodeKind : uint32_t {
  kNodeKernel = 0,
  kNodeMemcpy = 1,
  kNodeMemset = 2,
  kNodeHost = 3,
  kNodeEmpty = 5,
  kNodeWaitEvent = 6,
  kNodeEventRecord = 7,
  kNodeConditional = 13,
};

// Adds a node to `graph`: `request` is the encoded body of a stream-ordered request of type
// `type` (its stream field is ignored: a replay runs on the launch's stream); type 0 is an empty
// node.  A MemcpyHtoDAsync's bytes follow as this request's payload and stay with the graph.
struct GraphAddNodeReq {
  uint32_t device = 0;
  uint64_t graph = 0;
  std::vector<uint64_t> deps;
  uint16_t type = 0;
  std::vector<uint8_t> request;
  uint64_t payload = 0;  // bytes that follow
  RGPU_FIELDS(device, graph, deps, type, request, payload)
  uint64_t payload_bytes() const { return payload; }
};
// Replaces the request of node `node` of graph `owner` (or, with `exec`, of executable graph
// `owner`'s copy of it) by `request`, a request of the same node kind (cudaGraph*SetParams,
// cudaGraphExec*SetParams).  A MemcpyHtoDAsync's bytes follow as the payload.
struct GraphSetNodeReq {
  uint32_t device = 0;
  uint64_t owner = 0;
  bool exec = false;
  uint64_t node = 0;
  uint16_t type = 0;
  std::vector<uint8_t> request;
  uint64_t payload = 0;  // bytes that follow
  RGPU_FIELDS(device, owner, exec, node, type, request, payload)
  uint64_t payload_bytes() const { return payload; }
};
using GraphSetNodeRep = Empty;
struct GraphAddNodeRep {
  uint64_t node = 0;
  RGPU_FIELDS(node)
};

// Copies every node of `child` into `graph`, after `deps` (a child-graph node, flattened).
struct GraphAddChildReq {
  uint32_t device = 0;
  uint64_t graph = 0;
  uint64_t child = 0;
  std::vector<uint64_t> deps;
  RGPU_FIELDS(device, graph, child, deps)
};
struct GraphNodeInfo {
  uint64_t id = 0;
  uint32_t kind = 0;
  std::vector<uint64_t> deps;
  RGPU_FIELDS(id, kind, deps)
};
struct GraphNodesRep {
  std::vector<GraphNodeInfo> nodes;
  RGPU_FIELDS(nodes)
};
using GraphAddChildRep = GraphNodesRep;

// Stream capture.  mode: cudaStreamCaptureMode (0 global, 1 thread-local, 2 relaxed).
struct GraphBeginCaptureReq {
  uint32_t device = 0;
  uint64_t stream = 0;
  uint64_t graph = 0;  // the id the captured graph gets
  uint32_t mode = 0;
  RGPU_FIELDS(device, stream, graph, mode)
};
using GraphBeginCaptureRep = Empty;
struct GraphEndCaptureReq {
  uint32_t device = 0;
  uint64_t stream = 0;
  RGPU_FIELDS(device, stream)
};
struct GraphEndCaptureRep {
  uint64_t graph = 0;
  std::vector<GraphNodeInfo> nodes;
  RGPU_FIELDS(graph, nodes)
};
using GraphCaptureInfoReq = GraphObjectReq;  // id: the stream
struct GraphCaptureInfoRep {
  uint32_t status = 0;  // cudaStreamCaptureStatus: 0 none, 1 active, 2 invalidated
  uint64_t sequence = 0;
  uint64_t graph = 0;
  uint32_t mode = 0;
  std::vector<uint64_t> deps;  // node ids in the graph being captured
  RGPU_FIELDS(status, sequence, graph, mode, deps)
};

struct GraphInstantiateReq {
  uint32_t device = 0;
  uint64_t graph = 0;
  uint64_t exec = 0;
  RGPU_FIELDS(device, graph, exec)
};
using GraphInstantiateRep = Empty;
// Replaces an executable graph's nodes by `graph`'s when the two have the same shape (node
// kinds and edges); else cudaErrorGraphExecUpdateFailure and the executable graph is unchanged.
struct GraphExecUpdateReq {
  uint32_t device = 0;
  uint64_t exec = 0;
  uint64_t graph = 0;
  RGPU_FIELDS(device, exec, graph)
};
using GraphExecUpdateRep = Empty;
struct GraphLaunchReq {
  uint32_t device = 0;
  uint64_t exec = 0;
  uint64_t stream = 0;
  RGPU_FIELDS(device, exec, stream)
};
using GraphLaunchRep = Empty;
struct GraphCloneReq {
  uint32_t device = 0;
  uint64_t graph = 0;
  uint64_t clone = 0;
  RGPU_FIELDS(device, graph, clone)
};
using GraphCloneRep = GraphNodesRep;
struct GraphEdgesReq {
  uint32_t device = 0;
  uint64_t graph = 0;
  std::vector<uint64_t> from, to;
  bool remove = false;
  RGPU_FIELDS(device, graph, from, to, remove)
};
using GraphEdgesRep = Empty;

}  // namespace rgpu::proto
