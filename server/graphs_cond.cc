// Conditional graph nodes (issue 11, item 1): cudaGraphConditionalHandleCreate and conditional
// nodes (if/else, while, switch) with their body graphs.  Kernels change a handle's value with
// cudaGraphSetConditional, which on a GPU works only inside the driver's own graph, so a graph
// with conditional nodes always runs as a native graph of the backend: its handles are the
// backend's, made in a backend graph (Graph::native) that instantiation fills by capturing the
// nodes' replay into it (Executor::capture_into), adds the backend's conditional nodes at their
// places (capture_conditional) and captures each body's nodes into the body graphs the backend
// made.  The host backend (a test double) does the same with its recorded stream work.
// What such graphs may hold: kernel, memset, device-to-device copy and empty nodes, child graphs
// of those (flattened) and conditional nodes; other nodes are refused at instantiation.
#include <set>

#include "common/log.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {

constexpr CudaError kIllegalState = 401;
constexpr size_t kMaxBodies = 4096;       // a switch node's bodies
constexpr size_t kMaxHandles = 1u << 16;  // per graph
constexpr int kMaxDepth = 8;              // conditional nodes inside bodies
// The session's ids of the private streams a build captures on, one per depth.
constexpr uint64_t kCondStream = ~0ull - 16;

bool conditional(const GraphNode& n) {
  return n.type == static_cast<uint16_t>(MsgId::GraphAddCond) && !n.removed;
}

}  // namespace

Status Session::on(GraphCondHandleMsg, const GraphCondHandleReq& q, GraphCondHandleRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  Graph* g = nullptr;
  if (Status s = graph_of(q.graph, g); !s.ok()) return s;
  if (q.flags > 1) return Status::fail(err::InvalidValue, "bad conditional handle flags");
  Graph* root = g;
  if (g->root)
    if (Status s = graph_of(g->root, root); !s.ok()) return s;
  if (g->device != q.device || root->device != q.device)
    return Status::fail(err::InvalidValue, "the graph is on another GPU");
  if (root->handles.size() >= kMaxHandles)
    return Status::fail(err::MemoryAllocation,
                        "a graph may have at most 65536 conditional handles");
  const int d = static_cast<int>(q.device);
  if (!root->native) root->native = std::make_shared<NativeGraph>(&exec_, d);
  if (Status s = exec_.cond_handle_create(d, root->native->id, q.value, q.flags, rep.handle);
      !s.ok())
    return s;
  root->handles.push_back(rep.handle);
  return Status::success();
}

Status Session::on(GraphAddCondMsg, const GraphAddCondReq& q, GraphAddNodeRep& rep) {
  Graph* g = nullptr;
  if (Status s = graph_of(q.graph, g); !s.ok()) return s;
  if (g->device != q.device) return Status::fail(err::InvalidValue, "the graph is on another GPU");
  // A graph being captured takes it too (cudaStreamGetCaptureInfo, cudaGraphAddNode,
  // cudaStreamUpdateCaptureDependencies): its id follows the nodes captured so far.
  const uint64_t root_id = g->root ? g->root : q.graph;
  Graph* root = nullptr;
  if (Status s = graph_of(root_id, root); !s.ok()) return s;
  if (std::find(root->handles.begin(), root->handles.end(), q.handle) == root->handles.end())
    return Status::fail(err::InvalidValue,
                        "the conditional handle was not made for this graph (or its parents)");
  const size_t n = q.bodies.size();
  const bool sized = (q.type == 0 && (n == 1 || n == 2)) || (q.type == 1 && n == 1) ||
                     (q.type == 2 && n >= 1 && n <= kMaxBodies);
  if (!sized)
    return Status::fail(err::InvalidValue,
                        "a conditional node has 1 or 2 bodies (if), 1 (while) or 1 to 4096 "
                        "(switch)");
  if (graphs_.graphs.size() + n > kMaxGraphs)
    return Status::fail(err::MemoryAllocation, "too many graphs (65536, body graphs included)");
  std::set<uint64_t> fresh;
  for (uint64_t b : q.bodies)
    if (b == 0 || graphs_.graphs.count(b) || !fresh.insert(b).second)
      return Status::fail(err::InvalidValue, "bad graph id");
  if (Status s = record_node(*g, q.deps, static_cast<uint16_t>(MsgId::GraphAddCond),
                             encode_message(q), nullptr, rep.node);
      !s.ok())
    return s;
  for (uint64_t b : q.bodies) {
    Graph& body = graphs_.graphs[b];
    body.device = q.device;
    body.root = root_id;
  }
  return Status::success();
}

// ---- instantiation and building
// --------------------------------------------------------------------------------------

bool graph_has_conditional(const Graph& g) {
  for (const GraphNode& n : g.nodes)
    if (conditional(n)) return true;
  return false;
}

Status Session::cond_instantiate(GraphExec& x, const Graph& g) {
  if (!g.native) return Status::fail(err::InvalidValue, "the graph has no conditional handles");
  if (g.native->device != static_cast<int>(x.device))
    return Status::fail(err::InvalidValue, "the graph's handles belong to another GPU");
  x.cond = g.native;
  // The bodies' nodes as they are now, nested bodies too.
  std::vector<const std::vector<GraphNode>*> todo{&x.order};
  while (!todo.empty()) {
    const std::vector<GraphNode>* order = todo.back();
    todo.pop_back();
    for (const GraphNode& n : *order) {
      if (!conditional(n)) continue;
      auto c = decode_message<GraphAddCondReq>(n.body.data(), n.body.size());
      for (uint64_t b : c.bodies) {
        Graph* body = nullptr;
        if (Status s = graph_of(b, body); !s.ok()) return s;
        if (body->capturing)
          return Status::fail(kIllegalState, "a body graph is still being captured");
        std::vector<GraphNode>& out = x.bodies[b];
        if (!topological(*body, out))
          return Status::fail(err::InvalidValue, "a body graph's edges make a cycle");
        todo.push_back(&out);
      }
    }
  }
  return cond_build(x);
}

Status Session::cond_build(GraphExec& x) {
  const int d = static_cast<int>(x.device);
  Status s = cond_capture(x, x.order, x.cond->id, 0);
  uint64_t native = 0;
  if (s.ok()) s = exec_.native_instantiate(d, x.cond->id, native);
  if (!s.ok()) {
    LOG_WARN("a graph with conditional nodes could not be built natively: %s", s.message.c_str());
    return s;
  }
  x.native = native;
  LOG_INFO("a graph with conditional nodes (%zu nodes, %zu bodies) runs as a native graph",
           x.order.size(), x.bodies.size());
  return Status::success();
}

Status Session::cond_capture(const GraphExec& x, const std::vector<GraphNode>& order,
                             uint64_t graph, int depth) {
  if (depth >= kMaxDepth)
    return Status::fail(err::NotSupported, "conditional nodes nest more than 8 deep");
  const int d = static_cast<int>(x.device);
  for (const GraphNode& n : order)
    if (!n.disabled && !conditional(n) && !native_node(n))
      return Status::fail(err::NotSupported,
                          "rgpu runs graphs with conditional nodes natively: they may hold "
                          "kernel, memset, device-to-device copy, empty and conditional nodes");
  uint64_t h = 0;
  if (Status s = exec_.stream_create(d, 1 /* non-blocking */, 0, h); !s.ok()) return s;
  const uint64_t id = kCondStream - static_cast<uint64_t>(depth);
  streams_[id] = Object{x.device, h};
  Status s = exec_.capture_into(d, h, graph, depth == 0);
  if (s.ok()) {
    for (const GraphNode& n : order) {
      if (n.disabled) continue;
      if (!conditional(n)) {
        s = replay_node(n, x.device, id);
      } else {
        auto c = decode_message<GraphAddCondReq>(n.body.data(), n.body.size());
        std::vector<uint64_t> made;
        s = exec_.capture_conditional(d, h, c.handle, c.type,
                                      static_cast<uint32_t>(c.bodies.size()), made);
        if (s.ok() && made.size() != c.bodies.size())
          s = Status::fail(err::InvalidValue, "the backend made another number of bodies");
        for (size_t i = 0; s.ok() && i < c.bodies.size(); ++i) {
          auto body = x.bodies.find(c.bodies[i]);
          s = body == x.bodies.end()
                  ? Status::fail(err::InvalidValue, "a conditional node's body graph is unknown")
                  : cond_capture(x, body->second, made[i], depth + 1);
        }
      }
      if (!s.ok()) break;
    }
    Status e = exec_.capture_finish(d, h);  // ends the capture whatever happened
    if (s.ok()) s = e;
  }
  streams_.erase(id);
  exec_.stream_destroy(d, h);
  return s;
}

}  // namespace rgpu::server
