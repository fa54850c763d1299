// Conditional graph nodes on the host backend (a test double; server/graphs_cond.cc builds them):
// the backend graphs that handles belong to, the handles' values, and the recorded work of a
// conditional node, which runs its bodies' recorded work on the stream's worker as the GPU runs
// a conditional node's bodies (if/else, while, switch on the handle's value at that point).
// Kernels set a value through rgpu_host_launch::set_conditional.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/executor.h"

namespace rgpu::backend {

using HostWork = std::vector<std::function<void()>>;

class HostConditionals {
 public:
  // A handle of graph `graph` (made when 0; graph ids come from `next_id`).
  Status create_handle(uint64_t& graph, uint32_t value, uint32_t flags, uint64_t& handle,
                       uint64_t& next_id);
  void destroy_graph(uint64_t graph);
  // The work a capture into `graph` appends to (emptied first when asked: its bodies go too).
  std::shared_ptr<HostWork> work_of(uint64_t graph, bool empty_first);
  // Appends a conditional node to `work` (captured into `graph`), with `size` new body graphs.
  Status add_node(uint64_t graph, HostWork& work, uint64_t handle, uint32_t type, uint32_t size,
                  std::vector<uint64_t>& bodies, uint64_t& next_id);
  // What a launch of `graph` runs: the handles with cudaGraphCondAssignDefault reset, then its
  // work as captured now.
  Status instantiate(uint64_t graph, std::shared_ptr<const HostWork>& out);
  // cudaGraphSetConditional (rgpu_host_launch::set_conditional; `ctx` is the HostConditionals).
  static void set(void* ctx, unsigned long long handle, unsigned value);

 private:
  struct Cond {
    std::atomic<uint32_t> value{0};
    uint32_t initial = 0;
    uint32_t flags = 0;
  };
  struct Graph {
    std::shared_ptr<HostWork> work = std::make_shared<HostWork>();
    std::vector<std::shared_ptr<Cond>> conds;
    std::vector<uint64_t> bodies;
  };
  void drop_bodies(Graph& g);  // mu_ held
  std::mutex mu_;              // never held across a wait or a kernel
  std::map<uint64_t, Graph> graphs_;
  // A handle stays known while its graph or any recorded work using it (a launch still queued
  // after its graph and executable graph went) holds it.
  std::map<uint64_t, std::weak_ptr<Cond>> conds_;
  uint64_t next_handle_ = 1;
};

}  // namespace rgpu::backend
