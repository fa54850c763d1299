// Messages of the graphs3 group (issue 11, item 1 leftovers): stream attributes, graph node
// removal and enabling, and a child-graph node's new graph in an executable graph.
// Included by proto/messages.h (it uses Empty and LaunchAttr): include that one.
#pragma once

#include <cstdint>
#include <vector>

#include "proto/wire.h"

namespace rgpu::proto {

// cudaStreamSetAttribute / GetAttribute / CopyAttributes.  `attr.id` is the cudaStreamAttrID
// (cudaLaunchAttributeID numbering); its value is encoded as for a launch attribute (LaunchAttr).
// op 0: set `attr` on `stream`; op 1: get attribute `attr.id` of `stream` (the reply's `attr`);
// op 2: copy every attribute of stream `src` onto `stream`.
struct StreamAttributeReq {
  uint32_t device = 0;
  uint64_t stream = 0;
  uint32_t op = 0;
  LaunchAttr attr;
  uint64_t src = 0;
  RGPU_FIELDS(device, stream, op, attr, src)
};
struct StreamAttributeRep {
  LaunchAttr attr;
  RGPU_FIELDS(attr)
};

// An operation on node `node` of graph `owner` (or, with `exec`, of executable graph `owner`'s
// copy of it).  op 0: destroy the node (graph only; its edges go with it); op 1: enable (value 1)
// or disable (value 0) it in an executable graph (a disabled node does nothing when launched).
struct GraphNodeOpReq {
  uint32_t device = 0;
  uint64_t owner = 0;
  bool exec = false;
  uint64_t node = 0;
  uint32_t op = 0;
  uint32_t value = 0;
  RGPU_FIELDS(device, owner, exec, node, op, value)
};
using GraphNodeOpRep = Empty;

// cudaGraphExecChildGraphNodeSetParams: the copies of a child graph that were flattened into
// executable graph `exec` as its nodes first .. first + count - 1 take the requests of `child`'s
// nodes, which must have the same kinds and edges.
struct GraphExecChildReq {
  uint32_t device = 0;
  uint64_t exec = 0;
  uint64_t first = 0;
  uint64_t count = 0;
  uint64_t child = 0;
  RGPU_FIELDS(device, exec, first, count, child)
};
using GraphExecChildRep = Empty;

// cudaStreamBeginCaptureToGraph: `stream` captures into existing graph `graph`, its first
// captured nodes after `deps` (nodes of that graph).  The end of the capture (GraphEndCapture)
// reports every node of the graph; a failed capture takes its nodes away again.
struct GraphCaptureToReq {
  uint32_t device = 0;
  uint64_t stream = 0;
  uint64_t graph = 0;
  std::vector<uint64_t> deps;
  uint32_t mode = 0;
  RGPU_FIELDS(device, stream, graph, deps, mode)
};
using GraphCaptureToRep = Empty;

// cudaStreamUpdateCaptureDependencies: the nodes a capturing stream's next node depends on
// become `deps` (set) or also include them.
struct GraphCaptureDepsReq {
  uint32_t device = 0;
  uint64_t stream = 0;
  std::vector<uint64_t> deps;
  bool set = false;
  RGPU_FIELDS(device, stream, deps, set)
};
using GraphCaptureDepsRep = Empty;

}  // namespace rgpu::proto
