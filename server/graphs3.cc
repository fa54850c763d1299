// The graphs3 group's requests (issue 11, item 1 leftovers): stream attributes (the backend's),
// destroying a graph node, enabling or disabling a node of an executable graph, and giving a
// child-graph node of an executable graph the nodes of another graph of the same shape.
#include <algorithm>

#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {

constexpr CudaError kIllegalState = 401;

backend::LaunchAttribute to_backend(const LaunchAttr& a) {
  backend::LaunchAttribute b;
  b.id = a.id;
  b.v[0] = a.v0, b.v[1] = a.v1, b.v[2] = a.v2, b.v[3] = a.v3;
  return b;
}

// The attributes a stream has (cudaStreamAttrID): access policy window, synchronization policy,
// priority, memory synchronization domain map and domain.
bool stream_attribute(uint32_t id) { return id == 1 || id == 3 || id == 8 || id == 9 || id == 10; }

}  // namespace

Status Session::on(StreamAttributeMsg, const StreamAttributeReq& q, StreamAttributeRep& rep) {
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.stream, h); !s.ok()) return s;
  const int dev = static_cast<int>(q.device);
  switch (q.op) {
    case 0: {
      if (!stream_attribute(q.attr.id))
        return Status::fail(err::InvalidValue,
                            "stream attribute " + std::to_string(q.attr.id) + " does not exist");
      return exec_.stream_set_attribute(dev, h, to_backend(q.attr));
    }
    case 1: {
      if (!stream_attribute(q.attr.id))
        return Status::fail(err::InvalidValue,
                            "stream attribute " + std::to_string(q.attr.id) + " does not exist");
      backend::LaunchAttribute a;
      a.id = q.attr.id;
      if (Status s = exec_.stream_get_attribute(dev, h, a); !s.ok()) return s;
      rep.attr = LaunchAttr{a.id, a.v[0], a.v[1], a.v[2], a.v[3]};
      return Status::success();
    }
    case 2: {
      uint64_t src = 0;
      if (Status s = stream_of(q.device, q.src, src); !s.ok()) return s;
      for (uint32_t id : {1u, 3u, 8u, 9u, 10u}) {
        backend::LaunchAttribute a;
        a.id = id;
        if (Status s = exec_.stream_get_attribute(dev, src, a); !s.ok()) return s;
        if (Status s = exec_.stream_set_attribute(dev, h, a); !s.ok()) return s;
      }
      return Status::success();
    }
    default:
      return Status::fail(err::InvalidValue, "bad stream attribute operation");
  }
}

Status Session::on(GraphNodeOpMsg, const GraphNodeOpReq& q, Empty&) {
  if (q.op == 0) {  // destroy a node of a graph
    if (q.exec) return Status::fail(err::InvalidValue, "an executable graph's nodes stay");
    Graph* g = nullptr;
    if (Status s = graph_of(q.owner, g); !s.ok()) return s;
    if (g->capturing) return Status::fail(kIllegalState, "the graph is still being captured");
    if (q.node == 0 || q.node > g->nodes.size() || g->nodes[q.node - 1].removed)
      return Status::fail(err::InvalidValue, "no such node in the graph");
    GraphNode& n = g->nodes[q.node - 1];
    n.removed = true;  // its request stays: copies of the graph (child graphs) still decode it
    n.deps.clear();
    for (GraphNode& m : g->nodes)
      m.deps.erase(std::remove(m.deps.begin(), m.deps.end(), q.node), m.deps.end());
    return Status::success();
  }
  if (q.op == 1) {  // enable or disable a node of an executable graph
    if (!q.exec)
      return Status::fail(err::InvalidValue, "only an executable graph's nodes can be disabled");
    auto it = graphs_.execs.find(q.owner);
    if (it == graphs_.execs.end())
      return Status::fail(err::InvalidValue, "no such executable graph");
    if (q.value > 1)
      return Status::fail(err::InvalidValue, "a node is enabled (1) or disabled (0)");
    for (GraphNode& m : it->second.order)
      if (m.id == q.node) {
        if (m.kind != kNodeKernel && m.kind != kNodeMemcpy && m.kind != kNodeMemset)
          return Status::fail(err::InvalidValue,
                              "only kernel, memcpy and memset nodes can be disabled");
        if (m.disabled != (q.value == 0)) drop_native(it->second);
        m.disabled = q.value == 0;
        return Status::success();
      }
    return Status::fail(err::InvalidValue, "no such node in the executable graph");
  }
  return Status::fail(err::InvalidValue, "bad graph node operation");
}

Status Session::on(GraphExecChildMsg, const GraphExecChildReq& q, Empty&) {
  auto it = graphs_.execs.find(q.exec);
  if (it == graphs_.execs.end()) return Status::fail(err::InvalidValue, "no such executable graph");
  if (it->second.cond)
    return Status::fail(err::NotSupported,
                        "rgpu does not replace child graphs in executable graphs with conditional "
                        "nodes");
  drop_native(it->second);
  Graph* c = nullptr;
  if (Status s = graph_of(q.child, c); !s.ok()) return s;
  if (c->capturing) return Status::fail(kIllegalState, "the graph is still being captured");
  if (q.first == 0 || c->nodes.size() != q.count)
    return Status::fail(910, "the new child graph's nodes differ from the child-graph node's");
  // The child's node i is the executable graph's node first + i - 1; same kinds and edges.
  std::vector<GraphNode*> slots(q.count, nullptr);
  for (GraphNode& m : it->second.order)
    if (m.id >= q.first && m.id - q.first < q.count) slots[m.id - q.first] = &m;
  for (uint64_t i = 0; i < q.count; ++i) {
    const GraphNode& n = c->nodes[i];
    GraphNode* m = slots[i];
    if (n.removed != (m == nullptr))
      return Status::fail(910, "the new child graph's nodes differ from the child-graph node's");
    if (!m) continue;
    std::vector<uint64_t> deps;
    for (uint64_t d : n.deps) deps.push_back(d + q.first - 1);
    std::vector<uint64_t> inside;
    for (uint64_t d : m->deps)
      if (d >= q.first && d - q.first < q.count) inside.push_back(d);
    std::sort(deps.begin(), deps.end());
    std::sort(inside.begin(), inside.end());
    if (m->kind != n.kind || deps != inside)
      return Status::fail(910,
                          "the new child graph's nodes or edges differ from the child-graph "
                          "node's graph");
  }
  for (uint64_t i = 0; i < q.count; ++i)
    if (GraphNode* m = slots[i]) {
      m->type = c->nodes[i].type;
      m->body = c->nodes[i].body;
      m->payload = c->nodes[i].payload;
    }
  it->second.holds_payload = false;
  for (const GraphNode& n : it->second.order) it->second.holds_payload |= n.payload != nullptr;
  return Status::success();
}

// ---- capture into an existing graph; a capturing stream's dependencies
// ----------------------------------------------------------------------------------------------

Status Session::on(GraphCaptureToMsg, const GraphCaptureToReq& q, Empty&) {
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.stream, h); !s.ok()) return s;
  if (q.stream == 0) return Status::fail(900, "the legacy default stream cannot be captured");
  if (graphs_.streams.count(q.stream))
    return Status::fail(kIllegalState, "the stream is already capturing");
  if (q.mode > 2) return Status::fail(err::InvalidValue, "bad stream capture mode");
  Graph* g = nullptr;
  if (Status s = graph_of(q.graph, g); !s.ok()) return s;
  if (g->capturing) return Status::fail(kIllegalState, "the graph is already being captured into");
  if (g->device != q.device)
    return Status::fail(err::InvalidValue, "the graph belongs to another GPU");
  std::vector<uint64_t> deps = q.deps;
  for (uint64_t d : deps)
    if (d == 0 || d > g->nodes.size() || g->nodes[d - 1].removed)
      return Status::fail(err::InvalidValue, "a capture dependency is not a node of the graph");
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  g->capturing = true;
  CaptureSequence seq{q.graph, q.stream, q.mode, graphs_.next_sequence++};
  seq.into_existing = true;
  seq.existing = g->nodes.size();
  graphs_.captures[q.graph] = seq;
  graphs_.streams[q.stream] = GraphState::Capturing{q.graph, std::move(deps)};
  return Status::success();
}

Status Session::on(GraphCaptureDepsMsg, const GraphCaptureDepsReq& q, Empty&) {
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.stream, h); !s.ok()) return s;
  auto st = graphs_.streams.find(q.stream);
  if (st == graphs_.streams.end())
    return Status::fail(kIllegalState, "the stream is not capturing");
  Graph* g = nullptr;
  if (Status s = graph_of(st->second.graph, g); !s.ok()) return s;
  for (uint64_t d : q.deps)
    if (d == 0 || d > g->nodes.size() || g->nodes[d - 1].removed)
      return Status::fail(err::InvalidValue,
                          "a capture dependency is not a node of the graph being captured");
  auto& tail = st->second.tail;
  if (q.set) tail.clear();
  tail.insert(tail.end(), q.deps.begin(), q.deps.end());
  std::sort(tail.begin(), tail.end());
  tail.erase(std::unique(tail.begin(), tail.end()), tail.end());
  return Status::success();
}

}  // namespace rgpu::server
