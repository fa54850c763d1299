// CUDA graphs of a session (issue 11, item 1).  A graph is a list of recorded stream-ordered
// requests with edges; stream capture records the requests the client sends on a capturing
// stream instead of running them; GraphLaunch replays an executable graph's nodes on a stream
// through the same handlers a request uses, so every check (pointers, streams, events) and every
// mechanism (host callbacks at gates, kernel output) applies to a replay as to a direct call.
#include <algorithm>
#include <set>

#include "common/log.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {

constexpr CudaError kIllegalState = 401;
constexpr CudaError kCaptureUnsupported = 900;
constexpr CudaError kCaptureInvalidated = 901;
constexpr CudaError kCaptureUnmatched = 903;
constexpr CudaError kCaptureUnjoined = 904;
constexpr CudaError kCaptureIsolation = 905;
constexpr CudaError kGraphExecUpdateFailure = 910;
constexpr size_t kMaxNodes = 1u << 20;  // per graph
// Host callbacks of replays: bit 63 tells the client the callback belongs to a graph and stays
// registered; bits 40..62 number the replay, bits 0..39 are the client's callback id.
constexpr uint64_t kGraphCallback = 1ull << 63;
constexpr uint64_t kCallbackIdMask = (1ull << 40) - 1;

// The stream a stream-ordered request names, and the node kind it records as; false for requests
// that are not stream-ordered.
bool stream_of_request(uint16_t type, const std::vector<uint8_t>& body, uint64_t& stream,
                       uint32_t& kind) {
  auto get = [&](auto msg, uint32_t k) {
    using M = decltype(msg);
    auto q = decode_message<typename M::Req>(body.data(), body.size());
    stream = q.stream;
    kind = k;
    return true;
  };
  switch (static_cast<MsgId>(type)) {
    case MsgId::Launch:
      return get(LaunchMsg{}, kNodeKernel);
    case MsgId::LaunchEx: {  // a kernel node with launch attributes
      auto q = decode_message<LaunchExReq>(body.data(), body.size());
      stream = q.launch.stream;
      kind = kNodeKernel;
      return true;
    }
    case MsgId::Memset:
      return get(MemsetMsg{}, kNodeMemset);
    case MsgId::MemsetPattern:
      return get(MemsetPatternMsg{}, kNodeMemset);
    case MsgId::MemcpyDtoD:
      return get(MemcpyDtoDMsg{}, kNodeMemcpy);
    case MsgId::Memcpy2DDtoD:
      return get(Memcpy2DDtoDMsg{}, kNodeMemcpy);
    case MsgId::MemcpyHtoDAsync:
      return get(MemcpyHtoDAsyncMsg{}, kNodeMemcpy);
    case MsgId::MemcpyPeer:
      return get(MemcpyPeerMsg{}, kNodeMemcpy);
    case MsgId::EventRecord:
      return get(EventRecordMsg{}, kNodeEventRecord);
    case MsgId::StreamWaitEvent:
      return get(StreamWaitEventMsg{}, kNodeWaitEvent);
    case MsgId::HostFunc:
      return get(HostFuncMsg{}, kNodeHost);
    case MsgId::MemcpyDtoHAsync:
      return get(MemcpyDtoHAsyncMsg{}, kNodeMemcpy);
    case MsgId::MemcpyShmAsync:
      return get(MemcpyShmAsyncMsg{}, kNodeMemcpy);
    default:
      return false;
  }
}

template <class M>
std::vector<uint8_t> with_stream(const std::vector<uint8_t>& body, uint64_t stream,
                                 typename M::Req& q) {
  q = decode_message<typename M::Req>(body.data(), body.size());
  q.stream = stream;
  return {};
}

}  // namespace

bool graph_node_kind(uint16_t type, const std::vector<uint8_t>& body, uint32_t& kind) {
  uint64_t stream = 0;
  kind = kNodeEmpty;
  return type == 0 || stream_of_request(type, body, stream, kind);
}

Status Session::graph_of(uint64_t id, Graph*& g) {
  auto it = graphs_.graphs.find(id);
  if (it == graphs_.graphs.end()) return Status::fail(err::InvalidValue, "no such graph");
  g = &it->second;
  return Status::success();
}

void Session::invalidate_capture(uint64_t graph) {
  auto it = graphs_.captures.find(graph);
  if (it != graphs_.captures.end()) it->second.invalidated = true;
}

Status Session::record_node(Graph& g, std::vector<uint64_t> deps, uint16_t type,
                            std::vector<uint8_t> body,
                            std::shared_ptr<const std::vector<char>> payload, uint64_t& id) {
  if (g.nodes.size() >= kMaxNodes)
    return Status::fail(err::MemoryAllocation, "a graph may have at most 1048576 nodes");
  for (uint64_t d : deps)
    if (d == 0 || d > g.nodes.size() || g.nodes[d - 1].removed)
      return Status::fail(err::InvalidValue, "a node dependency is not a node of the graph");
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  GraphNode n;
  n.id = g.nodes.size() + 1;
  n.type = type;
  n.kind = kNodeEmpty;
  uint64_t stream = 0;
  if (type == static_cast<uint16_t>(MsgId::GraphAddCond))
    n.kind = kNodeConditional;  // server/graphs_cond.cc
  else if (type != 0 && !stream_of_request(type, body, stream, n.kind))
    return Status::fail(err::InvalidValue, "this request cannot be a graph node");
  n.body = std::move(body);
  n.payload = std::move(payload);
  n.deps = std::move(deps);
  g.nodes.push_back(std::move(n));
  id = g.nodes.back().id;
  return Status::success();
}

// ---- stream capture
// -------------------------------------------------------------------------------

bool Session::capture_request(const Request& r, Status& s) {
  const uint16_t type = r.header.type;
  const auto id = static_cast<MsgId>(type);
  // Waiting for or querying a capturing stream is not allowed and invalidates the capture.
  if (id == MsgId::StreamSynchronize || id == MsgId::StreamQuery) {
    auto q = decode_message<ObjectReq>(r.body.data(), r.body.size());
    auto it = graphs_.streams.find(q.id);
    if (it == graphs_.streams.end()) return false;
    invalidate_capture(it->second.graph);
    s = Status::fail(kCaptureUnsupported,
                     "cannot synchronize or query a stream while it is capturing a graph");
    return true;
  }
  uint64_t stream = 0;
  uint32_t kind = 0;
  if (!stream_of_request(type, r.body, stream, kind)) return false;
  // A stream that waits for an event recorded in a capture joins that capture.
  if (id == MsgId::StreamWaitEvent) {
    auto q = decode_message<StreamWaitEventReq>(r.body.data(), r.body.size());
    auto ev = graphs_.events.find(q.event);
    auto st = graphs_.streams.find(q.stream);
    if (ev == graphs_.events.end()) {
      if (st == graphs_.streams.end()) return false;
      invalidate_capture(st->second.graph);
      s = Status::fail(kCaptureIsolation,
                       "a capturing stream cannot wait for an event recorded outside the capture");
      return true;
    }
    if (st == graphs_.streams.end()) {
      graphs_.streams[q.stream] = GraphState::Capturing{ev->second.graph, ev->second.tail};
    } else if (st->second.graph != ev->second.graph) {
      invalidate_capture(st->second.graph);
      s = Status::fail(kCaptureIsolation, "the event was recorded in another capture");
    } else {
      auto& tail = st->second.tail;
      tail.insert(tail.end(), ev->second.tail.begin(), ev->second.tail.end());
      std::sort(tail.begin(), tail.end());
      tail.erase(std::unique(tail.begin(), tail.end()), tail.end());
    }
    return true;
  }
  auto st = graphs_.streams.find(stream);
  if (st == graphs_.streams.end()) {
    // An event recorded outside any capture is no longer a captured event.
    if (id == MsgId::EventRecord)
      graphs_.events.erase(decode_message<EventRecordReq>(r.body.data(), r.body.size()).event);
    return false;
  }
  GraphState::Capturing& cap = st->second;
  auto seq = graphs_.captures.find(cap.graph);
  if (seq != graphs_.captures.end() && seq->second.invalidated) {
    s = Status::fail(kCaptureInvalidated,
                     "the stream's capture was invalidated by an earlier error");
    return true;
  }
  if (id == MsgId::EventRecord) {  // an edge, not a node
    auto q = decode_message<EventRecordReq>(r.body.data(), r.body.size());
    graphs_.events[q.event] = GraphState::CapturedEvent{cap.graph, cap.tail};
    return true;
  }
  if (id == MsgId::MemcpyDtoHAsync || id == MsgId::MemcpyShmAsync) {
    invalidate_capture(cap.graph);
    s = Status::fail(kCaptureUnsupported,
                     "rgpu cannot capture a copy into host memory in a graph (each replay would "
                     "have to deliver it to the client): copy outside the graph");
    return true;
  }
  std::shared_ptr<std::vector<char>> bytes;
  if (r.payload) {  // a host-to-device copy: its bytes stay with the graph
    bytes = std::make_shared<std::vector<char>>();
    bytes->reserve(r.payload->total());
    r.payload->gather(*bytes);
  }
  Graph* g = nullptr;
  if (s = graph_of(cap.graph, g); !s.ok()) return true;
  uint64_t node = 0;
  s = record_node(*g, cap.tail, type, r.body, std::move(bytes), node);
  if (s.ok()) cap.tail = {node};
  if (!s.ok()) invalidate_capture(cap.graph);
  return true;
}

Status Session::on(GraphBeginCaptureMsg, const GraphBeginCaptureReq& q, Empty&) {
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.stream, h); !s.ok()) return s;
  if (q.stream == 0)
    return Status::fail(kCaptureUnsupported, "the legacy default stream cannot be captured");
  if (graphs_.streams.count(q.stream))
    return Status::fail(kIllegalState, "the stream is already capturing");
  if (q.graph == 0 || graphs_.graphs.count(q.graph))
    return Status::fail(err::InvalidValue, "bad graph id");
  if (graphs_.graphs.size() >= kMaxGraphs)
    return Status::fail(err::MemoryAllocation, "too many graphs (65536)");
  if (q.mode > 2) return Status::fail(err::InvalidValue, "bad stream capture mode");
  Graph& g = graphs_.graphs[q.graph];
  g.device = q.device;
  g.capturing = true;
  graphs_.captures[q.graph] = CaptureSequence{q.graph, q.stream, q.mode, graphs_.next_sequence++};
  graphs_.streams[q.stream] = GraphState::Capturing{q.graph, {}};
  return Status::success();
}

Status Session::on(GraphEndCaptureMsg, const GraphEndCaptureReq& q, GraphEndCaptureRep& rep) {
  auto st = graphs_.streams.find(q.stream);
  if (st == graphs_.streams.end())
    return Status::fail(kIllegalState, "the stream is not capturing");
  const uint64_t graph = st->second.graph;
  const CaptureSequence seq = graphs_.captures[graph];
  if (seq.origin != q.stream)
    return Status::fail(kCaptureUnmatched, "the capture was not begun on this stream");
  // Every stream that joined must have been joined back into the origin stream: its last nodes
  // must be ancestors of the origin's.
  Graph& g = graphs_.graphs[graph];
  std::set<uint64_t> reach;
  std::vector<uint64_t> todo = st->second.tail;
  while (!todo.empty()) {
    uint64_t n = todo.back();
    todo.pop_back();
    if (!reach.insert(n).second) continue;
    for (uint64_t d : g.nodes[n - 1].deps) todo.push_back(d);
  }
  bool unjoined = false;
  for (auto it = graphs_.streams.begin(); it != graphs_.streams.end();) {
    if (it->second.graph != graph) {
      ++it;
      continue;
    }
    for (uint64_t n : it->second.tail) unjoined |= !reach.count(n);
    it = graphs_.streams.erase(it);
  }
  for (auto it = graphs_.events.begin(); it != graphs_.events.end();)
    it = it->second.graph == graph ? graphs_.events.erase(it) : std::next(it);
  graphs_.captures.erase(graph);
  Status s;
  if (seq.invalidated)
    s = Status::fail(kCaptureInvalidated, "the capture was invalidated by an earlier error");
  else if (unjoined)
    s = Status::fail(kCaptureUnjoined,
                     "a stream forked from the capture was not joined back into its origin stream");
  if (!s.ok()) {
    if (seq.into_existing) {
      g.nodes.resize(seq.existing);
      g.capturing = false;
    } else {
      graphs_.graphs.erase(graph);
    }
    return s;
  }
  g.capturing = false;
  rep.graph = graph;
  for (const GraphNode& n : g.nodes) rep.nodes.push_back(GraphNodeInfo{n.id, n.kind, n.deps});
  return Status::success();
}

Status Session::on(GraphCaptureInfoMsg, const GraphObjectReq& q, GraphCaptureInfoRep& rep) {
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.id, h); !s.ok()) return s;
  auto st = graphs_.streams.find(q.id);
  if (st == graphs_.streams.end()) return Status::success();  // status 0: not capturing
  const CaptureSequence& seq = graphs_.captures[st->second.graph];
  rep.status = seq.invalidated ? 2 : 1;
  rep.sequence = seq.sequence;
  rep.graph = st->second.graph;
  rep.mode = seq.mode;
  rep.deps = st->second.tail;
  return Status::success();
}

// ---- building graphs
// ------------------------------------------------------------------------------

Status Session::on(GraphCreateMsg, const GraphCreateReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (q.graph == 0 || graphs_.graphs.count(q.graph))
    return Status::fail(err::InvalidValue, "bad graph id");
  if (graphs_.graphs.size() >= kMaxGraphs)
    return Status::fail(err::MemoryAllocation, "too many graphs (65536)");
  graphs_.graphs[q.graph].device = q.device;
  return Status::success();
}

Status Session::on(GraphDestroyMsg, const GraphObjectReq& q, Empty&) {
  Graph* g = nullptr;
  if (Status s = graph_of(q.id, g); !s.ok()) return s;
  if (g->capturing) return Status::fail(kIllegalState, "the graph is still being captured");
  graphs_.graphs.erase(q.id);  // executable graphs made from it are copies: they live on
  return Status::success();
}

Status Session::on(GraphAddNodeMsg, const GraphAddNodeReq& q, GraphAddNodeRep& rep) {
  std::shared_ptr<std::vector<char>> bytes;
  if (q.payload) {
    bytes = std::make_shared<std::vector<char>>();
    bytes->reserve(q.payload);
    if (current_->payload->gather(*bytes) != q.payload)
      return Status::fail(err::InvalidValue, "the client went away in the middle of a node's data");
  }
  Graph* g = nullptr;
  if (Status s = graph_of(q.graph, g); !s.ok()) return s;
  if (g->capturing) return Status::fail(kIllegalState, "the graph is still being captured");
  if (q.type == static_cast<uint16_t>(MsgId::MemcpyHtoDAsync)) {
    auto r = decode_message<MemcpyHtoDAsyncReq>(q.request.data(), q.request.size());
    if (r.payload_bytes() != q.payload)
      return Status::fail(err::InvalidValue, "a copy node's data does not match its size");
  } else if (q.payload) {
    return Status::fail(err::InvalidValue, "only a host-to-device copy node carries data");
  }
  if (q.type == static_cast<uint16_t>(MsgId::GraphAddCond))
    return Status::fail(err::InvalidValue, "conditional nodes are added by GraphAddCond");
  if (q.type == static_cast<uint16_t>(MsgId::MemcpyDtoHAsync) ||
      q.type == static_cast<uint16_t>(MsgId::MemcpyShmAsync))
    return Status::fail(err::NotSupported,
                        "rgpu does not support graph nodes that copy into host memory");
  return record_node(*g, q.deps, q.type, q.request, std::move(bytes), rep.node);
}

Status Session::on(GraphAddChildMsg, const GraphAddChildReq& q, GraphNodesRep& rep) {
  Graph *g = nullptr, *c = nullptr;
  if (Status s = graph_of(q.graph, g); !s.ok()) return s;
  if (Status s = graph_of(q.child, c); !s.ok()) return s;
  if (g == c) return Status::fail(err::InvalidValue, "a graph cannot be its own child");
  if (graph_has_conditional(*c) || c->root)
    return Status::fail(err::InvalidValue,
                        "a graph with conditional nodes, or a conditional node's body, cannot be a "
                        "child graph");
  // Flattened: the child's nodes are copied in; its roots depend on `deps`.
  const Graph child = *c;
  const uint64_t base = g->nodes.size();
  for (const GraphNode& n : child.nodes) {
    std::vector<uint64_t> deps;
    for (uint64_t d : n.deps) deps.push_back(base + d);
    if (n.deps.empty()) deps = q.deps;
    uint64_t id = 0;
    if (Status s = record_node(*g, deps, n.type, n.body, n.payload, id); !s.ok()) return s;
    g->nodes.back().removed = n.removed;
    rep.nodes.push_back(GraphNodeInfo{id, g->nodes.back().kind, g->nodes.back().deps});
  }
  return Status::success();
}

Status Session::on(GraphCloneMsg, const GraphCloneReq& q, GraphNodesRep& rep) {
  Graph* g = nullptr;
  if (Status s = graph_of(q.graph, g); !s.ok()) return s;
  if (q.clone == 0 || graphs_.graphs.count(q.clone))
    return Status::fail(err::InvalidValue, "bad graph id");
  if (graph_has_conditional(*g) || g->root)
    return Status::fail(err::InvalidValue, "a graph with conditional nodes cannot be cloned");
  Graph copy = *g;
  for (const GraphNode& n : copy.nodes) rep.nodes.push_back(GraphNodeInfo{n.id, n.kind, n.deps});
  graphs_.graphs[q.clone] = std::move(copy);
  return Status::success();
}

Status Session::on(GraphEdgesMsg, const GraphEdgesReq& q, Empty&) {
  Graph* g = nullptr;
  if (Status s = graph_of(q.graph, g); !s.ok()) return s;
  if (q.from.size() != q.to.size())
    return Status::fail(err::InvalidValue, "edge lists of different lengths");
  auto valid = [&](uint64_t n) { return n && n <= g->nodes.size() && !g->nodes[n - 1].removed; };
  for (size_t i = 0; i < q.from.size(); ++i)
    if (!valid(q.from[i]) || !valid(q.to[i]) || q.from[i] == q.to[i])
      return Status::fail(err::InvalidValue, "an edge names a node that is not in the graph");
  for (size_t i = 0; i < q.from.size(); ++i) {
    auto& deps = g->nodes[q.to[i] - 1].deps;
    auto it = std::find(deps.begin(), deps.end(), q.from[i]);
    if (q.remove && it == deps.end())
      return Status::fail(err::InvalidValue, "no such edge in the graph");
    if (q.remove)
      deps.erase(it);
    else if (it == deps.end())
      deps.push_back(q.from[i]);
  }
  return Status::success();
}

// ---- executable graphs
// ----------------------------------------------------------------------------

// Kahn's algorithm.
bool topological(const Graph& g, std::vector<GraphNode>& out) {
  std::vector<size_t> missing(g.nodes.size(), 0);
  std::vector<std::vector<size_t>> users(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (uint64_t d : g.nodes[i].deps) {
      ++missing[i];
      users[d - 1].push_back(i);
    }
  std::vector<size_t> ready;
  for (size_t i = g.nodes.size(); i-- > 0;)
    if (!missing[i]) ready.push_back(i);
  size_t done = 0;
  while (!ready.empty()) {
    size_t i = ready.back();
    ready.pop_back();
    ++done;
    if (!g.nodes[i].removed) out.push_back(g.nodes[i]);
    for (auto u = users[i].rbegin(); u != users[i].rend(); ++u)
      if (--missing[*u] == 0) ready.push_back(*u);
  }
  return done == g.nodes.size();
}

namespace {

bool same_shape(const std::vector<GraphNode>& a, const std::vector<GraphNode>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].id != b[i].id || a[i].kind != b[i].kind || a[i].deps != b[i].deps) return false;
  return true;
}

}  // namespace

Status Session::on(GraphInstantiateMsg, const GraphInstantiateReq& q, Empty&) {
  Graph* g = nullptr;
  if (Status s = graph_of(q.graph, g); !s.ok()) return s;
  if (g->capturing) return Status::fail(kIllegalState, "the graph is still being captured");
  if (q.exec == 0 || graphs_.execs.count(q.exec))
    return Status::fail(err::InvalidValue, "bad executable graph id");
  GraphExec e;
  e.device = g->device;
  if (!topological(*g, e.order))
    return Status::fail(err::InvalidValue, "the graph's edges make a cycle");
  for (const GraphNode& n : e.order) e.holds_payload |= n.payload != nullptr;
  if (graph_has_conditional(*g))
    if (Status s = cond_instantiate(e, *g); !s.ok()) {
      if (e.native) exec_.native_destroy(static_cast<int>(e.device), e.native);
      return s;
    }
  graphs_.execs[q.exec] = std::move(e);
  return Status::success();
}

Status Session::on(GraphExecUpdateMsg, const GraphExecUpdateReq& q, Empty&) {
  auto it = graphs_.execs.find(q.exec);
  if (it == graphs_.execs.end()) return Status::fail(err::InvalidValue, "no such executable graph");
  Graph* g = nullptr;
  if (Status s = graph_of(q.graph, g); !s.ok()) return s;
  if (it->second.cond || graph_has_conditional(*g))
    return Status::fail(kGraphExecUpdateFailure,
                        "rgpu does not update executable graphs with conditional nodes");
  std::vector<GraphNode> order;
  if (!topological(*g, order) || !same_shape(order, it->second.order))
    return Status::fail(kGraphExecUpdateFailure,
                        "the graph's nodes or edges differ from the executable graph's");
  for (size_t i = 0; i < order.size(); ++i) order[i].disabled = it->second.order[i].disabled;
  drop_native(it->second);
  it->second.order = std::move(order);
  it->second.holds_payload = false;
  for (const GraphNode& n : it->second.order) it->second.holds_payload |= n.payload != nullptr;
  return Status::success();
}

Status Session::on(GraphExecDestroyMsg, const GraphObjectReq& q, Empty&) {
  auto it = graphs_.execs.find(q.id);
  if (it == graphs_.execs.end()) return Status::fail(err::InvalidValue, "no such executable graph");
  drop_native(it->second);
  graphs_.execs.erase(it);
  return Status::success();
}

Status Session::on(GraphLaunchMsg, const GraphLaunchReq& q, Empty&) {
  auto it = graphs_.execs.find(q.exec);
  if (it == graphs_.execs.end()) return Status::fail(err::InvalidValue, "no such executable graph");
  if (it->second.device != q.device)
    return Status::fail(err::InvalidValue, "the graph belongs to another GPU");
  if (graphs_.streams.count(q.stream))
    return Status::fail(kCaptureUnsupported, "rgpu cannot capture a graph launch");
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.stream, h); !s.ok()) return s;
  ++graphs_.replays;
  if (GraphExec& x = it->second; x.cond) {  // conditional nodes: only natively
    if (x.cond_lost)
      return Status::fail(err::InvalidValue,
                          "the device was reset since this graph with conditional nodes was "
                          "instantiated: its handles are gone");
    if (!x.native)
      if (Status s = cond_build(x); !s.ok()) return s;
    if (Status s = exec_.native_launch(static_cast<int>(q.device), x.native, h); !s.ok()) return s;
    launched_ = true;
    return Status::success();
  }
  if (launch_native(it->second, q.device, h)) return Status::success();
  for (const GraphNode& n : it->second.order)
    if (!n.disabled)
      if (Status s = replay_node(n, q.device, q.stream); !s.ok()) return s;
  return Status::success();
}

Status Session::replay_node(const GraphNode& n, uint32_t dev, uint64_t stream) {
  const std::vector<uint8_t>& b = n.body;
  switch (static_cast<MsgId>(n.type)) {
    case MsgId::Launch: {
      auto q = decode_message<LaunchReq>(b.data(), b.size());
      q.device = dev, q.stream = stream;
      Empty rep;
      return on(LaunchMsg{}, q, rep);
    }
    case MsgId::LaunchEx: {
      auto q = decode_message<LaunchExReq>(b.data(), b.size());
      q.launch.device = dev, q.launch.stream = stream;
      Empty rep;
      return on(LaunchExMsg{}, q, rep);
    }
    case MsgId::MemsetPattern: {
      auto q = decode_message<MemsetPatternReq>(b.data(), b.size());
      q.device = dev, q.stream = stream;
      Empty rep;
      return on(MemsetPatternMsg{}, q, rep);
    }
    case MsgId::Memset: {
      auto q = decode_message<MemsetReq>(b.data(), b.size());
      q.device = dev, q.stream = stream;
      Empty rep;
      return on(MemsetMsg{}, q, rep);
    }
    case MsgId::MemcpyDtoD: {
      auto q = decode_message<MemcpyDtoDReq>(b.data(), b.size());
      q.device = dev, q.stream = stream;
      Empty rep;
      return on(MemcpyDtoDMsg{}, q, rep);
    }
    case MsgId::Memcpy2DDtoD: {
      auto q = decode_message<Memcpy2DDtoDReq>(b.data(), b.size());
      q.device = dev, q.stream = stream;
      Empty rep;
      return on(Memcpy2DDtoDMsg{}, q, rep);
    }
    case MsgId::MemcpyPeer: {
      auto q = decode_message<MemcpyPeerReq>(b.data(), b.size());
      q.stream_device = dev, q.stream = stream;
      Empty rep;
      return on(MemcpyPeerMsg{}, q, rep);
    }
    case MsgId::StreamWaitEvent: {
      auto q = decode_message<StreamWaitEventReq>(b.data(), b.size());
      q.device = dev, q.stream = stream;
      Empty rep;
      return on(StreamWaitEventMsg{}, q, rep);
    }
    case MsgId::EventRecord: {
      auto q = decode_message<EventRecordReq>(b.data(), b.size());
      q.device = dev, q.stream = stream;
      Empty rep;
      return on(EventRecordMsg{}, q, rep);
    }
    case MsgId::HostFunc: {
      auto q = decode_message<HostFuncReq>(b.data(), b.size());
      q.device = dev, q.stream = stream;
      q.id =
          kGraphCallback | (uint64_t(graphs_.replays & 0x7fffff) << 40) | (q.id & kCallbackIdMask);
      Empty rep;
      return on(HostFuncMsg{}, q, rep);
    }
    case MsgId::MemcpyHtoDAsync: {
      auto q = decode_message<MemcpyHtoDAsyncReq>(b.data(), b.size());
      if (!n.payload || n.payload->size() != q.width * q.height)
        return Status::fail(err::InvalidValue, "a copy node lost its data");
      if (Status s = check_range(dev, q.dst, q.dpitch, q.width, q.height); !s.ok()) return s;
      uint64_t h = 0;
      if (Status s = stream_of(dev, stream, h); !s.ok()) return s;
      const int d = static_cast<int>(dev);
      if (q.width == 0 || q.height == 0) return Status::success();
      Status s = exec_.copy_to_device_async(d, q.dst, q.dpitch, n.payload->data(), q.width,
                                            backend::Rect{q.width, q.height}, h);
      // The bytes stay alive until the stream is past the copy, even if the graph goes.
      if (s.ok()) s = host_work_.on_stream(exec_, d, h, [keep = n.payload] {});
      return s;
    }
    default:
      return Status::success();  // an empty node
  }
}

}  // namespace rgpu::server
