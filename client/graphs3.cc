// The graphs3 group, client side (issue 11, item 1 leftovers): stream attributes (the server's
// backend keeps them: cuStreamSetAttribute on a GPU), destroying a graph node, enabling or
// disabling a node of an executable graph, and a child-graph node's new graph in an executable
// graph.  Each is one synchronous message.
#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

CudaError Client::stream_attribute(const Stream& s, unsigned op, LaunchAttribute& a,
                                   const Stream* src) {
  if (op > 2 || (op == 2 && (!src || src->device != s.device))) return err::InvalidValue;
  ServerLink* l = nullptr;
  if (CudaError e = graph_link(s.device, &l); e != err::Success) return e;
  StreamAttributeReq q;
  q.device = devices_[s.device].spec.gpu;
  q.stream = s.id;
  q.op = op;
  q.attr = LaunchAttr{a.id, a.v[0], a.v[1], a.v[2], a.v[3]};
  q.src = src ? src->id : 0;
  StreamAttributeRep rep;
  if (CudaError e = l->call<StreamAttributeMsg>(q, &rep); e != err::Success) return e;
  if (op == 1) {
    a.v[0] = rep.attr.v0, a.v[1] = rep.attr.v1, a.v[2] = rep.attr.v2, a.v[3] = rep.attr.v3;
  }
  return err::Success;
}

CudaError Client::graph_destroy_node(GraphNode* n) {
  if (!n || !n->graph || !n->listed()) return err::InvalidValue;
  Graph* g = n->graph;
  if (g->has_mem_nodes()) {
    LOG_ERROR("cudaGraphDestroyNode: the nodes of a graph with memory nodes cannot go");
    return err::NotSupported;
  }
  // A child-graph node goes with the copies of its graph's nodes.
  std::vector<uint64_t> ids{n->id};
  for (uint64_t i = 0; i < n->child_count; ++i)
    if (GraphNode* c = g->node(n->child_first + i); c && !c->removed) ids.push_back(c->id);
  for (uint64_t id : ids)
    if (CudaError e = g->link->call<GraphNodeOpMsg>(GraphNodeOpReq{g->gpu, g->id, false, id, 0, 0});
        e != err::Success)
      return e;
  for (uint64_t id : ids) {
    GraphNode* m = g->node(id);
    m->removed = true;
    m->deps.clear();
  }
  for (const auto& m : g->nodes) std::erase_if(m->deps, [](GraphNode* d) { return d->removed; });
  if (n->child) {
    graph_destroy_tree(n->child);
    n->child = nullptr;
  }
  for (Graph* b : n->bodies) graph_destroy_tree(b);
  n->bodies.clear();
  return err::Success;
}

CudaError Client::graph_node_enable(GraphExec* x, GraphNode* n, bool enable) {
  if (!x || !n || !n->graph || !n->listed()) return err::InvalidValue;
  Graph* g = n->graph;
  if (x->link != g->link || x->gpu != g->gpu) return err::InvalidValue;
  if (g->body) return body_node_in_exec();
  if (CudaError e =
          x->link->call<GraphNodeOpMsg>(GraphNodeOpReq{x->gpu, x->id, true, n->id, 1, enable});
      e != err::Success)
    return e;
  if (enable)
    x->disabled.erase(n->id);
  else
    x->disabled.insert(n->id);
  return err::Success;
}

CudaError Client::graph_exec_child(GraphExec* x, GraphNode* n, Graph* child) {
  if (!x || !n || !child || !n->graph || n->kind != 4) return err::InvalidValue;
  if (x->link != child->link || x->gpu != child->gpu) return err::InvalidValue;
  if (n->graph->body) return body_node_in_exec();
  return x->link->call<GraphExecChildMsg>(
      GraphExecChildReq{x->gpu, x->id, n->child_first, n->child_count, child->id});
}

CudaError Client::capture_to(const Stream& s, Graph* g, const std::vector<GraphNode*>& deps,
                             unsigned mode) {
  if (!g || mode > 2) return err::InvalidValue;
  if (s.id == 0) return 900;  // cudaErrorStreamCaptureUnsupported: the legacy stream
  if (s.device != g->device) return err::InvalidValue;
  std::vector<uint64_t> ids;
  for (GraphNode* n : deps) {
    if (!n || n->graph != g || !n->listed()) return err::InvalidValue;
    ids.push_back(n->id);
  }
  // The server refuses a graph already being captured into (cudaErrorIllegalState).
  if (CudaError e = g->link->call<GraphCaptureToMsg>(
          GraphCaptureToReq{g->gpu, s.id, g->id, std::move(ids), mode});
      e != err::Success)
    return e;
  std::lock_guard<std::mutex> lock(graphs_mu_);
  g->capture_into = true;
  g->capture_base = g->nodes.size();
  capturing_[{g->link, g->id}] = g;
  capture_started(s, mode);
  return err::Success;
}

CudaError Client::capture_deps(const Stream& s, const std::vector<GraphNode*>& deps, bool set) {
  ServerLink* l = nullptr;
  if (CudaError e = graph_link(s.device, &l); e != err::Success) return e;
  GraphCaptureInfoRep info;
  if (CudaError e =
          l->call<GraphCaptureInfoMsg>(GraphObjectReq{devices_[s.device].spec.gpu, s.id}, &info);
      e != err::Success)
    return e;
  if (info.status != 1) return 401;  // cudaErrorIllegalState: not capturing
  Graph* g = nullptr;
  {
    std::lock_guard<std::mutex> lock(graphs_mu_);
    auto it = capturing_.find({l, info.graph});
    if (it != capturing_.end()) g = it->second;
  }
  std::vector<uint64_t> ids;
  for (GraphNode* n : deps) {
    // Only nodes the client has handles for: those of a graph captured into (made before).
    if (!n || !g || n->graph != g || !n->listed()) return err::InvalidValue;
    ids.push_back(n->id);
  }
  return l->call<GraphCaptureDepsMsg>(
      GraphCaptureDepsReq{devices_[s.device].spec.gpu, s.id, std::move(ids), set});
}

}  // namespace rgpu::client
