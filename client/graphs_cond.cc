// Conditional graph nodes, client side (issue 11, item 1): handles and conditional nodes are
// made on the server (server/graphs_cond.cc); the client keeps the node's body graphs, which the
// program fills like any graph (node by node or by capture into them).
#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

CudaError Client::graph_cond_handle(Graph* g, unsigned value, unsigned flags, uint64_t* out) {
  if (!g || !out || flags > 1) return err::InvalidValue;
  GraphCondHandleRep rep;
  if (CudaError e =
          g->link->call<GraphCondHandleMsg>(GraphCondHandleReq{g->gpu, g->id, value, flags}, &rep);
      e != err::Success)
    return e;
  *out = rep.handle;
  return err::Success;
}

CudaError Client::graph_add_conditional(Graph* g, const std::vector<GraphNode*>& deps,
                                        uint64_t handle, unsigned type, unsigned size,
                                        GraphNode** out) {
  if (!g || !out || type > 2 || size == 0 || size > 4096) return err::InvalidValue;
  if (g->has_mem_nodes()) {
    LOG_ERROR("cudaGraphAddNode: rgpu does not mix conditional and memory nodes in one graph");
    return err::NotSupported;
  }
  GraphAddCondReq q{g->gpu, g->id, {}, handle, type, {}};
  for (GraphNode* d : deps) {
    if (!d || d->graph != g) return err::InvalidValue;
    q.deps.push_back(d->id);
  }
  for (unsigned i = 0; i < size; ++i) q.bodies.push_back(g->link->new_id());
  GraphAddNodeRep rep;
  if (CudaError e = g->link->call<GraphAddCondMsg>(q, &rep); e != err::Success) return e;
  while (g->nodes.size() < rep.node) g->nodes.push_back(std::make_unique<GraphNode>());
  GraphNode* n = g->nodes[rep.node - 1].get();
  n->graph = g;
  n->id = rep.node;
  n->kind = kNodeConditional;
  n->deps = deps;
  for (uint64_t id : q.bodies) {
    auto b = std::make_unique<Graph>();
    b->link = g->link, b->device = g->device, b->gpu = g->gpu, b->id = id;
    b->owner = n;
    b->body = true;
    n->bodies.push_back(b.release());
  }
  *out = n;
  return err::Success;
}

}  // namespace rgpu::client
