// CUDA graphs, client side (issue 11, item 1).  Graphs live on the server: building one sends
// the node's request as it would be sent on a stream (GraphAddNode), stream capture asks the
// server to record what the program sends on the stream, and cudaGraphLaunch is one
// asynchronous GraphLaunch message.  The client keeps node kinds and edges for queries.
#include <cstring>

#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {
constexpr CudaError kInvalidResourceHandle = errc::InvalidResourceHandle;

std::vector<uint64_t> ids(const std::vector<GraphNode*>& nodes, const Graph* g, bool* ok) {
  std::vector<uint64_t> out;
  *ok = true;
  for (GraphNode* n : nodes) {
    if (!n || n->graph != g) *ok = false;
    if (n) out.push_back(n->id);
  }
  return out;
}

// Client nodes for what the server reports (its ids are the graph's, in order).
void adopt(Graph* g, const std::vector<GraphNodeInfo>& infos) {
  for (const GraphNodeInfo& i : infos) {
    while (g->nodes.size() < i.id) g->nodes.push_back(std::make_unique<GraphNode>());
    GraphNode* n = g->nodes[i.id - 1].get();
    n->graph = g;
    n->id = i.id;
    n->kind = i.kind;
    n->deps.clear();
    for (uint64_t d : i.deps)
      if (GraphNode* p = g->node(d)) n->deps.push_back(p);
  }
}
}  // namespace

CudaError Client::graph_link(int dev, ServerLink** l) {
  CudaError e = check_device(dev);
  if (e != err::Success) return e;
  *l = link(dev, &e);
  return *l ? err::Success : e;
}

CudaError Client::graph_create(Graph** out) {
  if (!out) return err::InvalidValue;
  const int dev = current_device();
  ServerLink* l = nullptr;
  if (CudaError e = graph_link(dev, &l); e != err::Success) return e;
  auto g = std::make_unique<Graph>();
  g->link = l;
  g->device = dev;
  g->gpu = devices_[dev].spec.gpu;
  g->id = l->new_id();
  if (CudaError e = l->call<GraphCreateMsg>(GraphCreateReq{g->gpu, g->id}); e != err::Success)
    return e;
  *out = g.release();
  return err::Success;
}

// A node of a conditional node's body named in an operation on an executable graph: the server
// keeps an executable graph's bodies as they were at instantiation and does not change them.
CudaError body_node_in_exec() {
  LOG_ERROR(
      "rgpu: the nodes of a conditional node's bodies cannot be changed in an executable graph "
      "(change them in the graph and instantiate it again)");
  return err::NotSupported;
}

namespace {

// A graph that a child-graph node owns cannot be destroyed or moved elsewhere on its own, and
// one moved into its parent (cudaGraphChildGraphOwnershipMove) not instantiated or used for an
// update either (`moved_only`: only that case is refused).  False (logged) when refused.
bool free_standing(const Graph* g, const char* call, bool moved_only = false) {
  if (!g->owner || (moved_only && !g->moved && !g->body)) return true;
  LOG_ERROR("%s: the graph is owned by a %s node (%s)", call,
            g->body ? "conditional" : "child-graph",
            g->body    ? "its body"
            : g->moved ? "moved into its parent"
                       : "embedded in it");
  return false;
}

}  // namespace

CudaError Client::graph_destroy(Graph* g) {
  if (!g) return err::InvalidValue;
  if (!free_standing(g, "cudaGraphDestroy")) return err::InvalidValue;
  return graph_destroy_tree(g);
}

CudaError Client::graph_destroy_tree(Graph* g) {
  CudaError e = g->link->call<GraphDestroyMsg>(GraphObjectReq{g->gpu, g->id});
  for (const auto& n : g->nodes) {
    if (n->child) graph_destroy_tree(n->child);
    for (Graph* b : n->bodies) graph_destroy_tree(b);
  }
  delete g;  // nodes go with it; executable graphs are the server's copies
  return e;
}

CudaError Client::graph_add(Graph* g, const std::vector<GraphNode*>& deps, uint16_t type,
                            std::vector<uint8_t> body, const void* payload, size_t payload_bytes,
                            GraphNode** out) {
  if (!g || !out) return err::InvalidValue;
  bool ok = true;
  GraphAddNodeReq q{g->gpu, g->id, ids(deps, g, &ok), type, std::move(body), payload_bytes};
  if (!ok) return err::InvalidValue;
  GraphAddNodeRep rep;
  iovec iov{const_cast<void*>(payload), payload_bytes};
  CudaError e = g->link->call<GraphAddNodeMsg>(q, &rep, payload_bytes ? &iov : nullptr,
                                               payload_bytes ? 1 : 0);
  if (e != err::Success) return e;
  uint32_t kind = kNodeEmpty;
  switch (static_cast<MsgId>(type)) {
    case MsgId::Launch:
    case MsgId::LaunchEx:
      kind = kNodeKernel;
      break;
    case MsgId::Memset:
    case MsgId::MemsetPattern:
      kind = kNodeMemset;
      break;
    case MsgId::HostFunc:
      kind = kNodeHost;
      break;
    case MsgId::EventRecord:
      kind = kNodeEventRecord;
      break;
    case MsgId::StreamWaitEvent:
      kind = kNodeWaitEvent;
      break;
    case MsgId::MemcpyDtoD:
    case MsgId::Memcpy2DDtoD:
    case MsgId::MemcpyHtoDAsync:
      kind = kNodeMemcpy;
      break;
    default:
      break;
  }
  std::vector<GraphNodeInfo> info{GraphNodeInfo{rep.node, kind, q.deps}};
  adopt(g, info);
  *out = g->node(rep.node);
  return err::Success;
}

CudaError Client::graph_place(const NodeTarget& t, uint16_t type, std::vector<uint8_t> body,
                              const void* payload, size_t payload_bytes, GraphNode** out) {
  if (!t.node)
    return graph_add(t.graph, t.deps, type, std::move(body), payload, payload_bytes, out);
  Graph* g = t.graph;
  GraphExec* x = t.exec;
  if (x && (x->link != g->link || x->gpu != g->gpu)) return err::InvalidValue;
  if (x && g->body) return body_node_in_exec();
  GraphSetNodeReq q{g->gpu, x ? x->id : g->id, x != nullptr, t.node->id,
                    type,   std::move(body),   payload_bytes};
  iovec iov{const_cast<void*>(payload), payload_bytes};
  if (CudaError e = g->link->call<GraphSetNodeMsg>(q, nullptr, payload_bytes ? &iov : nullptr,
                                                   payload_bytes ? 1 : 0);
      e != err::Success)
    return e;
  if (out) *out = t.node;
  return err::Success;
}

CudaError Client::graph_add_kernel(const NodeTarget& t, const Function* f, Dim3 grid, Dim3 block,
                                   void** args, size_t shared_mem, GraphNode** out,
                                   const std::vector<LaunchAttribute>& attrs) {
  Graph* g = t.graph;
  if (!g) return err::InvalidValue;
  const KernelInfo* ki = nullptr;
  ServerLink* l = nullptr;
  FuncReq fr;
  if (CudaError e = kernel_on(f, g->device, &l, &fr, &ki); e != err::Success) return e;
  if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z) return err::InvalidValue;
  LaunchReq q;
  q.device = fr.device;
  q.module = fr.module;
  q.kernel = fr.kernel;
  q.gx = grid.x, q.gy = grid.y, q.gz = grid.z;
  q.bx = block.x, q.by = block.y, q.bz = block.z;
  q.shared_mem = static_cast<uint32_t>(shared_mem);
  const KernelInfo& k = *ki;
  q.args.assign(k.arg_bytes, 0);
  for (size_t i = 0; i < k.params.size(); ++i) {
    if (!args || !args[i]) return err::InvalidValue;
    std::memcpy(q.args.data() + k.params[i].offset, args[i], k.params[i].size);
  }
  if (CudaError e = unreachable_host_argument(f, k, q.args); e != err::Success) return e;
  if (attrs.empty())
    return graph_place(t, static_cast<uint16_t>(MsgId::Launch), encode_message(q), nullptr, 0, out);
  LaunchExReq x;
  x.launch = std::move(q);
  for (const LaunchAttribute& a : attrs) {
    if (a.event) return err::NotSupported;  // events of kernel nodes: edges in a graph
    x.attrs.push_back(LaunchAttr{a.id, a.v[0], a.v[1], a.v[2], a.v[3]});
  }
  return graph_place(t, static_cast<uint16_t>(MsgId::LaunchEx), encode_message(x), nullptr, 0, out);
}

CudaError Client::graph_add_memcpy(const NodeTarget& t, void* dst, size_t dpitch, const void* src,
                                   size_t spitch, size_t width, size_t height, CopyKind kind,
                                   GraphNode** out) {
  Graph* g = t.graph;
  if (!g) return err::InvalidValue;
  CopyPlan p;
  if (CudaError e = plan_copy(dst, dpitch, src, spitch, width, height, kind, &p); e != err::Success)
    return e;
  if (p.kind == CopyKind::DeviceToDevice) {
    if (p.ddev != g->device || p.sdev != g->device) return err::InvalidValue;
    Memcpy2DDtoDReq q{g->gpu, reinterpret_cast<uint64_t>(dst),
                      dpitch, reinterpret_cast<uint64_t>(src),
                      spitch, width,
                      height, 0};
    return graph_place(t, static_cast<uint16_t>(MsgId::Memcpy2DDtoD), encode_message(q), nullptr, 0,
                       out);
  }
  if (p.kind == CopyKind::HostToDevice) {
    if (p.ddev != g->device) return err::InvalidValue;
    // The host bytes are taken now and kept with the graph on the server (see
    // docs/compatibility.md: a replay does not re-read host memory).
    std::vector<char> rows(width * height);
    for (size_t r = 0; r < height; ++r)
      std::memcpy(rows.data() + r * width, static_cast<const char*>(src) + r * spitch, width);
    MemcpyHtoDAsyncReq q{g->gpu, reinterpret_cast<uint64_t>(dst), dpitch, width, height, 0};
    return graph_place(t, static_cast<uint16_t>(MsgId::MemcpyHtoDAsync), encode_message(q),
                       rows.data(), rows.size(), out);
  }
  LOG_WARN(
      "rgpu: a graph memcpy node into host memory is not supported (each replay would have "
      "to deliver the data to the client): copy outside the graph");
  return err::NotSupported;
}

CudaError Client::graph_add_memset(const NodeTarget& t, void* ptr, int value, size_t n,
                                   GraphNode** out) {
  Graph* g = t.graph;
  if (!g) return err::InvalidValue;
  MemsetReq q{g->gpu, reinterpret_cast<uint64_t>(ptr), static_cast<uint8_t>(value), n, 0};
  return graph_place(t, static_cast<uint16_t>(MsgId::Memset), encode_message(q), nullptr, 0, out);
}

CudaError Client::graph_add_host(const NodeTarget& t, std::function<void()> fn, GraphNode** out) {
  Graph* g = t.graph;
  if (!g || !fn) return err::InvalidValue;
  const uint64_t id = g->link->keep_callback(std::move(fn));
  HostFuncReq q{g->gpu, 0, id};
  return graph_place(t, static_cast<uint16_t>(MsgId::HostFunc), encode_message(q), nullptr, 0, out);
}

CudaError Client::graph_add_event(const NodeTarget& t, Event* event, bool wait, GraphNode** out) {
  Graph* g = t.graph;
  if (!g) return err::InvalidValue;
  Event* ev = find_event(event);
  if (!ev || ev->device != g->device) return kInvalidResourceHandle;
  CudaError e =
      wait ? graph_place(t, static_cast<uint16_t>(MsgId::StreamWaitEvent),
                         encode_message(StreamWaitEventReq{g->gpu, 0, ev->id}), nullptr, 0, out)
           : graph_place(t, static_cast<uint16_t>(MsgId::EventRecord),
                         encode_message(EventRecordReq{g->gpu, ev->id, 0}), nullptr, 0, out);
  if (e == err::Success && !t.exec) (*out)->event = ev;  // an exec copy keeps no handle
  return e;
}

CudaError Client::graph_add_child(Graph* g, const std::vector<GraphNode*>& deps, Graph* child,
                                  GraphNode** out, bool move) {
  if (!g || !child || !out || child == g) return err::InvalidValue;
  if (child->link != g->link || child->gpu != g->gpu) return err::InvalidValue;
  if (move && !free_standing(child, "cudaGraphAddNode (child graph, ownership move)"))
    return err::InvalidValue;
  if (move && (*child->instances > 0 || child->capture_into)) {
    LOG_ERROR(
        "cudaGraphAddNode: a graph moved into a parent may not have executable graphs or be "
        "captured into");
    return err::InvalidValue;
  }
  for (const auto& n : child->nodes)
    if (!n->removed && (n->alloc || n->kind == 11)) {
      LOG_ERROR("cudaGraphAddChildGraphNode: a graph with memory nodes cannot be a child graph");
      return err::NotSupported;
    }
  // Flattened on the server; the child-graph node is an empty node after the child's nodes.
  bool ok = true;
  GraphAddChildReq q{g->gpu, g->id, child->id, ids(deps, g, &ok)};
  if (!ok) return err::InvalidValue;
  GraphNodesRep rep;
  if (CudaError e = g->link->call<GraphAddChildMsg>(q, &rep); e != err::Success) return e;
  adopt(g, rep.nodes);
  std::vector<GraphNode*> last;  // the copies nothing in the child depends on
  std::vector<bool> used(rep.nodes.size() + 1, false);
  const uint64_t base = rep.nodes.empty() ? 0 : rep.nodes.front().id - 1;
  for (const GraphNodeInfo& i : rep.nodes)
    for (uint64_t d : i.deps)
      if (d > base && d - base < used.size()) used[d - base] = true;
  for (const GraphNodeInfo& i : rep.nodes) {
    const GraphNode* orig = child->node(i.id - base);
    if (!used[i.id - base] && !(orig && orig->removed)) last.push_back(g->node(i.id));
  }
  if (last.empty()) last = deps;
  for (const GraphNodeInfo& i : rep.nodes) {
    GraphNode* copy = g->node(i.id);
    copy->inner = true;
    if (const GraphNode* orig = child->node(i.id - base)) copy->removed = orig->removed;
  }
  if (CudaError e = graph_add(g, last, 0, {}, nullptr, 0, out); e != err::Success) return e;
  // What queries see: a child-graph node after `deps`, embedding a copy of `child`.
  GraphNode* n = *out;
  n->kind = 4;  // cudaGraphNodeTypeGraph
  n->deps = deps;
  n->child_first = base + 1;
  n->child_count = rep.nodes.size();
  if (move) {
    n->child = child;  // the parent's now: destroyed with it
    child->moved = true;
  } else if (CudaError e = graph_clone(child, &n->child); e != err::Success) {
    return e;
  }
  n->child->owner = n;
  return err::Success;
}

CudaError Client::graph_edges(Graph* g, const std::vector<GraphNode*>& from,
                              const std::vector<GraphNode*>& to, bool remove) {
  if (!g || from.size() != to.size()) return err::InvalidValue;
  if (remove && g->has_mem_nodes()) {
    LOG_ERROR("cudaGraphRemoveDependencies: the edges of a graph with memory nodes cannot go");
    return err::NotSupported;
  }
  bool a = true, b = true;
  GraphEdgesReq q{g->gpu, g->id, ids(from, g, &a), ids(to, g, &b), remove};
  if (!a || !b) return err::InvalidValue;
  if (CudaError e = g->link->call<GraphEdgesMsg>(q); e != err::Success) return e;
  for (size_t i = 0; i < from.size(); ++i) {
    auto& deps = to[i]->deps;
    auto it = std::find(deps.begin(), deps.end(), from[i]);
    if (remove && it != deps.end()) deps.erase(it);
    if (!remove && it == deps.end()) deps.push_back(from[i]);
  }
  return err::Success;
}

CudaError Client::graph_clone(Graph* g, Graph** out) {
  if (!g || !out) return err::InvalidValue;
  if (g->has_mem_nodes()) {
    LOG_ERROR("cudaGraphClone: a graph with memory nodes cannot be cloned");
    return err::NotSupported;
  }
  auto c = std::make_unique<Graph>();
  c->link = g->link, c->device = g->device, c->gpu = g->gpu, c->id = g->link->new_id();
  GraphNodesRep rep;
  if (CudaError e = g->link->call<GraphCloneMsg>(GraphCloneReq{g->gpu, g->id, c->id}, &rep);
      e != err::Success)
    return e;
  adopt(c.get(), rep.nodes);
  c->origin = g;
  for (const auto& n : g->nodes)
    if (GraphNode* m = c->node(n->id)) {
      m->event = n->event;
      m->host_fn = n->host_fn;
      m->host_data = n->host_data;
      m->removed = n->removed;
      m->inner = n->inner;
      m->kind = n->kind;
      m->params = n->params;
      m->child_first = n->child_first;
      m->child_count = n->child_count;
      if (n->kind == 4) {
        m->deps.clear();
        for (GraphNode* d : n->deps) m->deps.push_back(c->node(d->id));
      }
      if (n->child) {
        if (CudaError e = graph_clone(n->child, &m->child); e != err::Success) return e;
        m->child->owner = m;
      }
    }
  *out = c.release();
  return err::Success;
}

CudaError Client::graph_instantiate(Graph* g, GraphExec** out) {
  if (!g || !out) return err::InvalidValue;
  if (!free_standing(g, "cudaGraphInstantiate", true)) return err::InvalidValue;
  if (*g->instances > 0 && g->has_mem_nodes()) {
    LOG_ERROR(
        "cudaGraphInstantiate: a graph with memory nodes can have one executable graph at a "
        "time (destroy the other first)");
    return err::NotSupported;
  }
  auto x = std::make_unique<GraphExec>();
  x->link = g->link, x->device = g->device, x->gpu = g->gpu, x->id = g->link->new_id();
  if (CudaError e = g->link->call<GraphInstantiateMsg>(GraphInstantiateReq{g->gpu, g->id, x->id});
      e != err::Success)
    return e;
  graph_mem_instantiate(g, x.get());
  x->instances = g->instances;
  ++*x->instances;
  *out = x.release();
  return err::Success;
}

CudaError Client::graph_exec_update(GraphExec* x, Graph* g) {
  if (!x || !g) return err::InvalidValue;
  if (x->link != g->link || x->gpu != g->gpu) return err::InvalidValue;
  if (!free_standing(g, "cudaGraphExecUpdate", true)) return err::InvalidValue;
  GraphExec y;  // memory nodes cannot change by an update
  graph_mem_instantiate(g, &y);
  if (y.allocs != x->allocs || y.frees != x->frees) return 910;  // GraphExecUpdateFailure
  return x->link->call<GraphExecUpdateMsg>(GraphExecUpdateReq{x->gpu, x->id, g->id});
}

CudaError Client::graph_exec_destroy(GraphExec* x) {
  if (!x) return err::InvalidValue;
  CudaError e = x->link->call<GraphExecDestroyMsg>(GraphObjectReq{x->gpu, x->id});
  if (x->instances) --*x->instances;
  delete x;
  return e;
}

CudaError Client::graph_launch(GraphExec* x, const Stream& s) {
  if (!x) return err::InvalidValue;
  if (s.device != x->device) return err::InvalidValue;
  if (CudaError e = managed_before_work(s.device, s.id); e != err::Success) return e;
  if (CudaError e = graph_mem_launch_check(x); e != err::Success) return e;
  if (CudaError e = x->link->call<GraphLaunchMsg>(GraphLaunchReq{x->gpu, x->id, s.id});
      e != err::Success)
    return e;
  return graph_mem_launch(x);
}

CudaError Client::capture_begin(const Stream& s, unsigned mode) {
  if (s.id == 0) return 900;  // cudaErrorStreamCaptureUnsupported: the legacy stream
  if (mode > 2) return err::InvalidValue;
  ServerLink* l = nullptr;
  if (CudaError e = graph_link(s.device, &l); e != err::Success) return e;
  auto g = std::make_unique<Graph>();
  g->link = l, g->device = s.device, g->gpu = devices_[s.device].spec.gpu, g->id = l->new_id();
  CudaError e = l->call<GraphBeginCaptureMsg>(GraphBeginCaptureReq{g->gpu, s.id, g->id, mode});
  if (e != err::Success) return e;
  capture_started(s, mode);
  std::lock_guard<std::mutex> lock(graphs_mu_);
  const uint64_t id = g->id;
  capturing_[{l, id}] = g.release();
  return err::Success;
}

CudaError Client::capture_end(const Stream& s, Graph** given) {
  Graph* unused = nullptr;
  Graph** out = given ? given : &unused;
  ServerLink* l = nullptr;
  if (CudaError e = graph_link(s.device, &l); e != err::Success) return e;
  GraphEndCaptureRep rep;
  GraphCaptureInfoRep info;
  if (CudaError e =
          l->call<GraphCaptureInfoMsg>(GraphObjectReq{devices_[s.device].spec.gpu, s.id}, &info);
      e != err::Success)
    return e;
  if (info.status == 0) return 401;  // cudaErrorIllegalState: not capturing
  CudaError e =
      l->call<GraphEndCaptureMsg>(GraphEndCaptureReq{devices_[s.device].spec.gpu, s.id}, &rep);
  if (e != 903) capture_stopped(s);  // 903: not the origin stream
  Graph* g = nullptr;
  {
    std::lock_guard<std::mutex> lock(graphs_mu_);
    auto it = capturing_.find({l, info.graph});
    if (it != capturing_.end()) {
      g = it->second;
      if (e == err::Success || e != 903) capturing_.erase(it);  // 903: not the origin stream
    }
  }
  *out = nullptr;
  const bool into = g && g->capture_into;
  if (g && e != 903) g->capture_into = false;
  if (e != err::Success) {
    if (e != 903 && !into) delete g;
    return e;
  }
  if (!g) return err::Unknown;
  if (into)  // the nodes it had keep what the client knows of them
    std::erase_if(rep.nodes, [&](const GraphNodeInfo& i) { return i.id <= g->capture_base; });
  adopt(g, rep.nodes);
  for (const auto& n : g->nodes)  // captured memory nodes (client/graphs4.cc)
    if (n->alloc || n->free_ptr) n->kind = n->alloc ? 10 : 11;
  if (!given && !into) {  // nobody would ever own it
    graph_destroy(g);
    return err::InvalidValue;
  }
  *out = g;
  return err::Success;
}

CudaError Client::capture_info(const Stream& s, unsigned* status, unsigned long long* sequence,
                               Graph** graph, std::vector<GraphNode*>* deps) {
  if (deps) deps->clear();
  if (s.id == 0) {
    if (status) *status = 0;
    return err::Success;
  }
  ServerLink* l = nullptr;
  if (CudaError e = graph_link(s.device, &l); e != err::Success) return e;
  GraphCaptureInfoRep rep;
  if (CudaError e =
          l->call<GraphCaptureInfoMsg>(GraphObjectReq{devices_[s.device].spec.gpu, s.id}, &rep);
      e != err::Success)
    return e;
  if (status) *status = rep.status;
  if (sequence) *sequence = rep.sequence;
  if (graph || deps) {
    std::lock_guard<std::mutex> lock(graphs_mu_);
    auto it = capturing_.find({l, rep.graph});
    Graph* g = it == capturing_.end() ? nullptr : it->second;
    if (graph) *graph = g;
    // Handles of the nodes the stream's next node will depend on (so that a node added to the
    // capture's graph can follow them): the client learns the rest of the captured nodes at
    // cudaStreamEndCapture.
    if (g && deps)
      for (uint64_t id : rep.deps) {
        if (id == 0 || id > (1u << 20)) continue;
        while (g->nodes.size() < id) g->nodes.push_back(std::make_unique<GraphNode>());
        GraphNode* n = g->nodes[id - 1].get();
        n->graph = g;
        n->id = id;
        deps->push_back(n);
      }
  }
  return err::Success;
}

}  // namespace rgpu::client
