// Node parameter setters (GraphSetNode): a graph node's recorded request, or an executable
// graph's copy of it, is replaced by another request of the same node kind.  The graph's shape
// does not change.
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

Status Session::on(GraphSetNodeMsg, const GraphSetNodeReq& q, Empty&) {
  std::shared_ptr<std::vector<char>> bytes;
  if (q.payload) {
    bytes = std::make_shared<std::vector<char>>();
    bytes->reserve(q.payload);
    if (current_->payload->gather(*bytes) != q.payload)
      return Status::fail(err::InvalidValue, "the client went away in the middle of a node's data");
  }
  uint32_t kind = 0;
  if (!graph_node_kind(q.type, q.request, kind) ||
      q.type == static_cast<uint16_t>(MsgId::MemcpyDtoHAsync) ||
      q.type == static_cast<uint16_t>(MsgId::MemcpyShmAsync))
    return Status::fail(err::InvalidValue, "this request cannot be a graph node's parameters");
  if (q.type == static_cast<uint16_t>(MsgId::MemcpyHtoDAsync)) {
    auto r = decode_message<MemcpyHtoDAsyncReq>(q.request.data(), q.request.size());
    if (r.payload_bytes() != q.payload)
      return Status::fail(err::InvalidValue, "a copy node's data does not match its size");
  } else if (q.payload) {
    return Status::fail(err::InvalidValue, "only a host-to-device copy node carries data");
  }
  GraphNode* n = nullptr;
  bool* holds_payload = nullptr;
  if (q.exec) {
    auto it = graphs_.execs.find(q.owner);
    if (it == graphs_.execs.end())
      return Status::fail(err::InvalidValue, "no such executable graph");
    for (GraphNode& m : it->second.order)
      if (m.id == q.node) n = &m;
    holds_payload = &it->second.holds_payload;
    drop_native(it->second);
  } else {
    Graph* g = nullptr;
    if (Status s = graph_of(q.owner, g); !s.ok()) return s;
    if (g->capturing) return Status::fail(401, "the graph is still being captured");
    if (q.node && q.node <= g->nodes.size()) n = &g->nodes[q.node - 1];
  }
  if (!n || n->removed) return Status::fail(err::InvalidValue, "no such node in the graph");
  if (n->kind != kind)
    return Status::fail(err::InvalidValue, "the new parameters are of another kind of node");
  n->type = q.type;
  n->body = q.request;
  n->payload = std::move(bytes);
  if (holds_payload && n->payload) *holds_payload = true;
  return Status::success();
}

}  // namespace rgpu::server
