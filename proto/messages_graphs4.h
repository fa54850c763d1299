// The graphs4 group's requests (issue 11, item 1 leftovers).  Included by proto/messages.h (it
// uses Empty): include that one.
#pragma once

#include <cstdint>
#include <vector>

#include "proto/wire.h"

namespace rgpu::proto {

// cudaMallocAsync / cudaFreeAsync on a capturing stream: an empty node (the client's memory
// allocation or free node) is added to the capture after the stream's tail, and becomes its tail.
struct GraphCaptureNodeReq {
  uint32_t device = 0;
  uint64_t stream = 0;
  RGPU_FIELDS(device, stream)
};
struct GraphCaptureNodeRep {
  uint64_t node = 0;
  std::vector<uint64_t> deps;
  RGPU_FIELDS(node, deps)
};

// A potentially unsafe call from a thread that a capture's mode prohibits it to: the capture of
// `stream` is invalidated (cudaStreamEndCapture then fails).
struct GraphCaptureInvalidateReq {
  uint32_t device = 0;
  uint64_t stream = 0;
  RGPU_FIELDS(device, stream)
};
using GraphCaptureInvalidateRep = Empty;

// A stream-ordered memset of `height` rows of `width` elements of `elem` bytes (1, 2 or 4), rows
// `pitch` bytes apart, each element `value` (its low `elem` bytes): a graph's memset node with
// wider elements or 2-D (cudaMemsetParams).
struct MemsetPatternReq {
  uint32_t device = 0;
  uint64_t ptr = 0;
  uint64_t pitch = 0;
  uint32_t elem = 1;
  uint32_t value = 0;
  uint64_t width = 0;
  uint64_t height = 1;
  uint64_t stream = 0;
  RGPU_FIELDS(device, ptr, pitch, elem, value, width, height, stream)
};
using MemsetPatternRep = Empty;

// Conditional nodes (cudaGraphConditionalHandleCreate, cudaGraphAddNode with
// cudaGraphNodeTypeConditional; server/graphs_cond.cc).  A handle belongs to the graph it was made
// for (a body graph's handles to the graph at the top of its conditional nodes); its value is the
// backend's (on a GPU the driver's CUgraphConditionalHandle, which kernels give
// cudaGraphSetConditional).  flags: cudaGraphCondAssignDefault (1) or 0.
struct GraphCondHandleReq {
  uint32_t device = 0;
  uint64_t graph = 0;
  uint32_t value = 0;
  uint32_t flags = 0;
  RGPU_FIELDS(device, graph, value, flags)
};
struct GraphCondHandleRep {
  uint64_t handle = 0;
  RGPU_FIELDS(handle)
};
// A conditional node of `graph` after `deps`: type cudaGraphConditionalNodeType (0 if, 1 while,
// 2 switch), one new empty body graph per entry of `bodies` (ids the client chose), owned by the
// node.  The reply is GraphAddNodeRep.
struct GraphAddCondReq {
  uint32_t device = 0;
  uint64_t graph = 0;
  std::vector<uint64_t> deps;
  uint64_t handle = 0;
  uint32_t type = 0;
  std::vector<uint64_t> bodies;
  RGPU_FIELDS(device, graph, deps, handle, type, bodies)
};
using GraphAddCondRep = GraphAddNodeRep;

}  // namespace rgpu::proto
