// Graph shape queries and the DOT description (client/graph_shape.h).
#include "client/graph_shape.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/log.h"

namespace rgpu::client {

namespace {
// The node kinds' names (proto::GraphNodeKind has cudaGraphNodeType's / CUgraphNodeType's
// numbers).
const char* kind_name(uint32_t kind) {
  static const char* const kNames[] = {"kernel", "memcpy", "memset",     "host",
                                       "graph",  "empty",  "wait_event", "event_record"};
  return kind < sizeof kNames / sizeof kNames[0] ? kNames[kind] : "node";
}
}  // namespace

std::vector<GraphNode*> graph_nodes(const Graph* g, bool roots) {
  std::vector<GraphNode*> out;
  for (const auto& n : g->nodes)
    if (n->listed() && (!roots || n->deps.empty())) out.push_back(n.get());
  return out;
}

std::vector<GraphNode*> graph_dependents(const GraphNode* node) {
  std::vector<GraphNode*> out;
  for (const auto& n : node->graph->nodes)
    if (n->listed())
      for (GraphNode* d : n->deps)
        if (d == node) out.push_back(n.get());
  return out;
}

std::vector<std::pair<GraphNode*, GraphNode*>> graph_edges_of(const Graph* g) {
  std::vector<std::pair<GraphNode*, GraphNode*>> out;
  for (const auto& n : g->nodes)
    if (n->listed())
      for (GraphNode* d : n->deps) out.emplace_back(d, n.get());
  return out;
}

GraphNode* graph_node_in_clone(const GraphNode* original, const Graph* clone) {
  if (!original || !clone || clone->origin != original->graph) return nullptr;
  return clone->node(original->id);
}

Error graph_dot_print(const Graph* g, const char* path, bool handles) {
  FILE* f = std::fopen(path, "w");
  if (!f) {
    LOG_WARN("rgpu: cannot open %s for the graph's DOT description: %s", path,
             std::strerror(errno));
    return errc::OperatingSystem;
  }
  std::fprintf(f, "digraph rgpu_graph_%llu {\n", static_cast<unsigned long long>(g->id));
  for (GraphNode* n : graph_nodes(g, false)) {
    std::fprintf(f, "  n%llu [label=\"%s %llu", static_cast<unsigned long long>(n->id),
                 kind_name(n->kind), static_cast<unsigned long long>(n->id));
    if (handles) std::fprintf(f, "\\n%p", static_cast<void*>(n));
    std::fprintf(f, "\"];\n");
  }
  for (const auto& [from, to] : graph_edges_of(g))
    std::fprintf(f, "  n%llu -> n%llu;\n", static_cast<unsigned long long>(from->id),
                 static_cast<unsigned long long>(to->id));
  std::fprintf(f, "}\n");
  if (std::fclose(f) != 0) {
    LOG_WARN("rgpu: could not write the graph's DOT description to %s: %s", path,
             std::strerror(errno));
    return errc::OperatingSystem;
  }
  return err::Success;
}

}  // namespace rgpu::client
