// The graphs3 group, client side (issue 11, item 1 leftovers): stream attributes (the server's
// backend keeps them: cuStreamSetAttribute on a GPU), destroying a graph node, enabling or
// disabling a node of an executable graph, and a child-graph node's new graph in an executable
// graph.  Each is one synchronous message.
#include "client/client.h"

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
    graph_destroy(n->child);
    n->child = nullptr;
  }
  return err::Success;
}

CudaError Client::graph_node_enable(GraphExec* x, GraphNode* n, bool enable) {
  if (!x || !n || !n->graph || !n->listed()) return err::InvalidValue;
  Graph* g = n->graph;
  if (x->link != g->link || x->gpu != g->gpu) return err::InvalidValue;
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
  return x->link->call<GraphExecChildMsg>(
      GraphExecChildReq{x->gpu, x->id, n->child_first, n->child_count, child->id});
}

}  // namespace rgpu::client
