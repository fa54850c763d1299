// Queries of a graph's shape answered from the client's copy of it (client/graphs.h), shared by
// both front-ends: the nodes a program sees (not removed, not a flattened child's copy), roots,
// edges, dependents, a node's counterpart in a clone, and a DOT description of the graph.
#pragma once

#include <utility>
#include <vector>

#include "client/errors.h"
#include "client/graphs.h"

namespace rgpu::client {

// The listed nodes of `g` in creation order; with `roots` only those without dependencies.
std::vector<GraphNode*> graph_nodes(const Graph* g, bool roots);
// The listed nodes that depend on `n`.
std::vector<GraphNode*> graph_dependents(const GraphNode* n);
// The edges (from, to) into listed nodes, in creation order of the `to` node.
std::vector<std::pair<GraphNode*, GraphNode*>> graph_edges_of(const Graph* g);
// `original`'s counterpart in `clone` (a clone keeps its original's node ids); null if `clone`
// was not cloned from `original`'s graph.
GraphNode* graph_node_in_clone(const GraphNode* original, const Graph* clone);
// Writes `g` as a DOT digraph to `path` (node kind and id; with `handles` the node handle too).
// errc::OperatingSystem when the file cannot be written (logged with the reason).
Error graph_dot_print(const Graph* g, const char* path, bool handles);

namespace errc {
constexpr Error OperatingSystem = 304;  // cudaErrorOperatingSystem / CUDA_ERROR_OPERATING_SYSTEM
}  // namespace errc

}  // namespace rgpu::client
