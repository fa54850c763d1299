#include "backend/host/host_cond.h"

namespace rgpu::backend {

namespace {

void run(const HostWork& w) {
  for (const auto& f : w) f();
}

}  // namespace

Status HostConditionals::create_handle(uint64_t& graph, uint32_t value, uint32_t flags,
                                       uint64_t& handle, uint64_t& next_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!graph) {
    graph = next_id++;
    graphs_[graph];
  }
  auto g = graphs_.find(graph);
  if (g == graphs_.end()) return Status::fail(err::InvalidValue, "no such native graph");
  auto c = std::make_shared<Cond>();
  c->value = value;
  c->initial = value;
  c->flags = flags;
  handle = (0xc0d0ull << 48) | next_handle_++;
  if (next_handle_ % 1024 == 0)
    std::erase_if(conds_, [](const auto& e) { return e.second.expired(); });
  conds_[handle] = c;
  g->second.conds.push_back(c);
  return Status::success();
}

void HostConditionals::drop_bodies(Graph& g) {
  for (uint64_t b : g.bodies) {
    auto it = graphs_.find(b);
    if (it == graphs_.end()) continue;
    drop_bodies(it->second);
    graphs_.erase(it);
  }
  g.bodies.clear();
}

void HostConditionals::destroy_graph(uint64_t graph) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = graphs_.find(graph);
  if (it == graphs_.end()) return;
  drop_bodies(it->second);
  graphs_.erase(it);  // its handles stay known while queued work holds them
}

std::shared_ptr<HostWork> HostConditionals::work_of(uint64_t graph, bool empty_first) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = graphs_.find(graph);
  if (it == graphs_.end()) return nullptr;
  if (empty_first) {
    drop_bodies(it->second);
    // Launches made from the earlier contents keep theirs (instantiate copies).
    it->second.work = std::make_shared<HostWork>();
  }
  return it->second.work;
}

Status HostConditionals::add_node(uint64_t graph, HostWork& work, uint64_t handle, uint32_t type,
                                  uint32_t size, std::vector<uint64_t>& bodies, uint64_t& next_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto g = graphs_.find(graph);
  auto c = conds_.find(handle);
  std::shared_ptr<Cond> cond = c == conds_.end() ? nullptr : c->second.lock();
  if (g == graphs_.end() || !cond)
    return Status::fail(err::InvalidValue, "no such conditional handle");
  std::vector<std::shared_ptr<const HostWork>> works;
  bodies.clear();
  for (uint32_t i = 0; i < size; ++i) {
    const uint64_t id = next_id++;
    works.push_back(graphs_[id].work);
    bodies.push_back(id);
    g = graphs_.find(graph);
    g->second.bodies.push_back(id);
  }
  work.push_back([cond, type, works] {
    const uint32_t v = cond->value.load();
    switch (type) {
      case 0:  // if / else
        if (v)
          run(*works[0]);
        else if (works.size() > 1)
          run(*works[1]);
        break;
      case 1:  // while
        while (cond->value.load()) run(*works[0]);
        break;
      default:  // switch
        if (v < works.size()) run(*works[v]);
        break;
    }
  });
  return Status::success();
}

Status HostConditionals::instantiate(uint64_t graph, std::shared_ptr<const HostWork>& out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto g = graphs_.find(graph);
  if (g == graphs_.end()) return Status::fail(err::InvalidValue, "no such native graph");
  auto w = std::make_shared<HostWork>();
  std::vector<std::shared_ptr<Cond>> reset;
  for (const auto& c : g->second.conds)
    if (c->flags & 1) reset.push_back(c);
  w->push_back([reset] {
    for (const auto& c : reset) c->value = c->initial;
  });
  w->insert(w->end(), g->second.work->begin(), g->second.work->end());
  out = std::move(w);
  return Status::success();
}

void HostConditionals::set(void* ctx, unsigned long long handle, unsigned value) {
  auto* self = static_cast<HostConditionals*>(ctx);
  std::shared_ptr<Cond> c;
  {
    std::lock_guard<std::mutex> lock(self->mu_);
    auto it = self->conds_.find(handle);
    if (it != self->conds_.end()) c = it->second.lock();
  }
  if (c) c->value = value;
}

}  // namespace rgpu::backend
