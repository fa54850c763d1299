// Graph memory nodes (issue 11, item 1): cudaGraphAddMemAllocNode / cudaGraphAddMemFreeNode and
// the graph memory attributes.  The server sees these nodes as empty nodes; the memory is an
// ordinary allocation in the device's address window, made when the allocation node is made (its
// address is fixed for the graph's life, as CUDA's) and held by the graph, its clones and
// executable graphs.  A launch makes the allocation outstanding (held by gmem_live_) until a
// free node, cudaFree / cudaFreeAsync, or a relaunch with cudaGraphInstantiateFlagAutoFreeOnLaunch
// frees it; the memory itself goes when nothing holds it any more.
#include <algorithm>

#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {
constexpr uint32_t kNodeMemAlloc = 10;               // cudaGraphNodeTypeMemAlloc
constexpr uint32_t kNodeMemFree = 11;                // cudaGraphNodeTypeMemFree
constexpr unsigned long long kAutoFreeOnLaunch = 1;  // cudaGraphInstantiateFlagAutoFreeOnLaunch
uint64_t addr(const void* p) { return reinterpret_cast<uint64_t>(p); }
}  // namespace

void Client::gmem_totals(int dev, uint64_t* used, uint64_t* reserved) {
  *used = *reserved = 0;
  for (const auto& [a, g] : gmem_all_)
    if (g.device == dev) *reserved += g.bytes;
  for (const auto& [a, g] : gmem_live_)
    if (g->device == dev) *used += g->bytes;
}

void Client::gmem_note(int dev) {
  uint64_t used = 0, reserved = 0;
  gmem_totals(dev, &used, &reserved);
  GraphMemMarks& m = gmem_marks_[dev];
  m.used_high = std::max(m.used_high, used);
  m.reserved_high = std::max(m.reserved_high, reserved);
}

CudaError Client::gmem_allocate(int dev, size_t bytes, std::shared_ptr<GraphAlloc>* out) {
  void* p = nullptr;
  if (CudaError e = malloc(dev, bytes, &p); e != err::Success) return e;
  std::shared_ptr<GraphAlloc> a(new GraphAlloc{dev, p, bytes}, [this](GraphAlloc* m) {
    {
      std::lock_guard<std::mutex> lock(gmem_mu_);
      gmem_all_.erase(addr(m->ptr));
    }
    free(m->ptr);  // no longer a graph allocation: the ordinary free
    delete m;
  });
  {
    std::lock_guard<std::mutex> lock(gmem_mu_);
    gmem_all_[addr(p)] = *a;
    gmem_note(dev);
  }
  *out = std::move(a);
  return err::Success;
}

CudaError Client::graph_add_mem_alloc(Graph* g, const std::vector<GraphNode*>& deps, size_t bytes,
                                      GraphNode** out) {
  if (!g || !out) return err::InvalidValue;
  if (g->owner) {
    LOG_ERROR("cudaGraphAddMemAllocNode: the graph is a child graph (owned by its node)");
    return err::InvalidValue;
  }
  if (g->has_conditional()) {
    LOG_ERROR(
        "cudaGraphAddMemAllocNode: rgpu does not mix conditional and memory nodes in one graph");
    return err::NotSupported;
  }
  if (bytes == 0) {
    LOG_ERROR("cudaGraphAddMemAllocNode: the allocation's size is 0");
    return err::InvalidValue;
  }
  std::shared_ptr<GraphAlloc> a;
  if (CudaError e = gmem_allocate(g->device, bytes, &a); e != err::Success) return e;
  GraphNode* n = nullptr;
  if (CudaError e = graph_add(g, deps, 0, {}, nullptr, 0, &n); e != err::Success) return e;
  n->kind = kNodeMemAlloc;
  n->alloc = std::move(a);
  *out = n;
  return err::Success;
}

CudaError Client::graph_add_mem_free(Graph* g, const std::vector<GraphNode*>& deps, void* ptr,
                                     GraphNode** out) {
  if (!g || !out) return err::InvalidValue;
  if (g->owner) {
    LOG_ERROR("cudaGraphAddMemFreeNode: the graph is a child graph (owned by its node)");
    return err::InvalidValue;
  }
  if (g->has_conditional()) {
    LOG_ERROR(
        "cudaGraphAddMemFreeNode: rgpu does not mix conditional and memory nodes in one graph");
    return err::NotSupported;
  }
  {
    std::lock_guard<std::mutex> lock(gmem_mu_);
    auto it = gmem_all_.find(addr(ptr));
    if (it == gmem_all_.end()) {
      LOG_ERROR("cudaGraphAddMemFreeNode: %p is not the address of a graph allocation", ptr);
      return err::InvalidValue;
    }
    if (it->second.device != g->device) {
      LOG_ERROR("cudaGraphAddMemFreeNode: %p belongs to device %d, the graph to device %d", ptr,
                it->second.device, g->device);
      return err::InvalidValue;
    }
  }
  GraphNode* n = nullptr;
  if (CudaError e = graph_add(g, deps, 0, {}, nullptr, 0, &n); e != err::Success) return e;
  n->kind = kNodeMemFree;
  n->free_ptr = ptr;
  *out = n;
  return err::Success;
}

// ---- memset nodes of 2- or 4-byte elements, or 2-D

CudaError Client::graph_add_memset2d(const NodeTarget& t, void* ptr, size_t pitch, unsigned value,
                                     unsigned elem, size_t width, size_t height, GraphNode** out) {
  Graph* g = t.graph;
  if (!g) return err::InvalidValue;
  if (elem != 1 && elem != 2 && elem != 4) {
    LOG_ERROR("graph memset node: the element size is %u (1, 2 or 4)", elem);
    return err::InvalidValue;
  }
  if (height == 0 || width == 0) return err::InvalidValue;
  if (height > 1 && pitch < width * elem) {
    LOG_ERROR("graph memset node: the pitch %zu is smaller than a row (%zu bytes)", pitch,
              width * elem);
    return err::InvalidValue;
  }
  if (elem == 1 && height == 1)  // the plain memset every server knows
    return graph_add_memset(t, ptr, static_cast<int>(value & 0xff), width, out);
  MemsetPatternReq q{g->gpu, addr(ptr), pitch, elem, value, width, height, 0};
  return graph_place(t, static_cast<uint16_t>(MsgId::MemsetPattern), encode_message(q), nullptr, 0,
                     out);
}

// ---- cudaMallocAsync / cudaFreeAsync on a capturing stream

bool Client::capture_running() {
  std::lock_guard<std::mutex> lock(graphs_mu_);
  return !capturing_.empty();
}

bool Client::capture_running_on(const ServerLink* l) {
  std::lock_guard<std::mutex> lock(graphs_mu_);
  for (const auto& [key, g] : capturing_)
    if (key.first == l) return true;
  return false;
}

Graph* Client::gmem_capture(const Stream& s, unsigned* status) {
  *status = 0;
  if (s.id == 0) return nullptr;
  if (!capture_running()) return nullptr;  // no capture: no round trip
  Graph* g = nullptr;
  if (capture_info(s, status, nullptr, &g) != err::Success) *status = 0;
  return g;
}

CudaError Client::gmem_capture_node(Graph* g, const Stream& s, uint32_t kind, GraphNode** out) {
  GraphCaptureNodeRep rep;
  if (CudaError e = g->link->call<GraphCaptureNodeMsg>(GraphCaptureNodeReq{g->gpu, s.id}, &rep);
      e != err::Success)
    return e;
  while (g->nodes.size() < rep.node) g->nodes.push_back(std::make_unique<GraphNode>());
  GraphNode* n = g->node(rep.node);
  n->graph = g;
  n->id = rep.node;
  n->kind = kind;  // capture_end keeps it (the server knows an empty node)
  n->deps.clear();
  for (uint64_t d : rep.deps)
    if (GraphNode* p = g->node(d)) n->deps.push_back(p);
  *out = n;
  return err::Success;
}

bool Client::graph_capture_alloc(void** ptr, size_t size, const Stream& s, CudaError* e) {
  unsigned status = 0;
  Graph* g = gmem_capture(s, &status);
  if (status == 0) return false;
  if (status != 1 || !g) {
    *e = 901;  // cudaErrorStreamCaptureInvalidated
    return true;
  }
  std::shared_ptr<GraphAlloc> a;
  if ((*e = gmem_allocate(g->device, size, &a)) != err::Success) return true;
  GraphNode* n = nullptr;
  if ((*e = gmem_capture_node(g, s, kNodeMemAlloc, &n)) != err::Success) return true;
  *ptr = a->ptr;
  n->alloc = std::move(a);
  return true;
}

bool Client::graph_capture_free(void* ptr, const Stream& s, CudaError* e) {
  unsigned status = 0;
  Graph* g = gmem_capture(s, &status);
  if (status == 0) return false;
  if (status != 1 || !g) {
    *e = 901;  // cudaErrorStreamCaptureInvalidated
    return true;
  }
  {
    std::lock_guard<std::mutex> lock(gmem_mu_);
    if (!gmem_all_.count(addr(ptr))) {
      LOG_ERROR(
          "cudaFreeAsync in a stream capture: %p is not graph memory (rgpu captures frees of "
          "memory allocated by graphs only)",
          ptr);
      *e = err::InvalidValue;
      return true;
    }
  }
  GraphNode* n = nullptr;
  if ((*e = gmem_capture_node(g, s, kNodeMemFree, &n)) != err::Success) return true;
  n->free_ptr = ptr;
  return true;
}

// ---- capture modes across threads

void Client::capture_started(const Stream& s, unsigned mode) {
  std::lock_guard<std::mutex> lock(owners_mu_);
  capture_owners_.push_back(CaptureOwner{s, mode, std::this_thread::get_id()});
}

void Client::capture_stopped(const Stream& s) {
  std::lock_guard<std::mutex> lock(owners_mu_);
  std::erase_if(capture_owners_, [&](const CaptureOwner& o) {
    return o.stream.device == s.device && o.stream.id == s.id;
  });
}

CudaError Client::unsafe_call(unsigned thread_mode) {
  constexpr unsigned kGlobal = 0, kRelaxed = 2;  // cudaStreamCaptureMode
  if (thread_mode == kRelaxed) return err::Success;
  std::vector<Stream> offending;
  {
    std::lock_guard<std::mutex> lock(owners_mu_);
    const std::thread::id me = std::this_thread::get_id();
    for (const CaptureOwner& o : capture_owners_) {
      const bool mine = o.thread == me;
      if ((mine && o.mode != kRelaxed) || (!mine && thread_mode == kGlobal && o.mode == kGlobal))
        offending.push_back(o.stream);
    }
  }
  if (offending.empty()) return err::Success;
  LOG_ERROR(
      "a potentially unsafe call (it may synchronize) while a stream capture's mode "
      "prohibits it on this thread: the call fails and the capture is invalidated (use "
      "cudaStreamCaptureModeRelaxed, or cudaThreadExchangeStreamCaptureMode, to allow it)");
  for (const Stream& s : offending) {
    CudaError e;
    if (ServerLink* l = link(s.device, &e))
      l->call<GraphCaptureInvalidateMsg>(
          GraphCaptureInvalidateReq{devices_[s.device].spec.gpu, s.id});
  }
  return 900;  // cudaErrorStreamCaptureUnsupported
}

// ---- frees outside graphs

bool Client::graph_mem_free(void* ptr, CudaError* e) {
  std::shared_ptr<GraphAlloc> drop;  // released after the lock
  std::lock_guard<std::mutex> lock(gmem_mu_);
  if (!gmem_all_.count(addr(ptr))) return false;
  auto it = gmem_live_.find(addr(ptr));
  if (it == gmem_live_.end()) {
    LOG_ERROR(
        "rgpu: freeing graph memory %p that no launch has allocated (the graph was not launched "
        "yet, or the allocation was freed already)",
        ptr);
    *e = err::InvalidValue;
    return true;
  }
  drop = std::move(it->second);
  gmem_live_.erase(it);
  *e = err::Success;
  return true;
}

void Client::graph_mem_instantiate(const Graph* g, GraphExec* x) {
  x->allocs.clear();
  x->frees.clear();
  for (const auto& n : g->nodes) {
    if (n->removed) continue;
    if (n->kind == kNodeMemAlloc && n->alloc) x->allocs.push_back(n->alloc);
    if (n->kind == kNodeMemFree) x->frees.push_back(n->free_ptr);
  }
}

CudaError Client::graph_mem_launch_check(GraphExec* x) {
  std::vector<std::shared_ptr<GraphAlloc>> drop;  // released after the lock
  std::lock_guard<std::mutex> lock(gmem_mu_);
  for (const auto& a : x->allocs) {
    auto it = gmem_live_.find(addr(a->ptr));
    if (it == gmem_live_.end()) continue;
    if (!(x->flags & kAutoFreeOnLaunch)) {
      LOG_ERROR(
          "cudaGraphLaunch: the graph's allocation %p from an earlier launch was not freed "
          "(free it, or instantiate with cudaGraphInstantiateFlagAutoFreeOnLaunch)",
          a->ptr);
      return err::InvalidValue;
    }
    drop.push_back(std::move(it->second));
    gmem_live_.erase(it);
  }
  return err::Success;
}

CudaError Client::graph_mem_launch(GraphExec* x) {
  if (x->allocs.empty() && x->frees.empty()) return err::Success;
  std::vector<std::shared_ptr<GraphAlloc>> drop;  // released after the lock
  std::lock_guard<std::mutex> lock(gmem_mu_);
  for (const auto& a : x->allocs) gmem_live_[addr(a->ptr)] = a;
  gmem_note(x->device);  // an allocation freed by the same launch was in use too
  for (void* p : x->frees) {
    auto it = gmem_live_.find(addr(p));
    if (it == gmem_live_.end()) continue;  // CUDA's free of memory not allocated: undefined
    drop.push_back(std::move(it->second));
    gmem_live_.erase(it);
  }
  gmem_note(x->device);
  return err::Success;
}

CudaError Client::graph_mem_attribute(int dev, int attr, uint64_t* value) {
  if (CudaError e = check_device(dev); e != err::Success) return e;
  if (!value) return err::InvalidValue;
  std::lock_guard<std::mutex> lock(gmem_mu_);
  uint64_t used = 0, reserved = 0;
  gmem_totals(dev, &used, &reserved);
  const GraphMemMarks& m = gmem_marks_[dev];
  switch (attr) {
    case 0:  // cudaGraphMemAttrUsedMemCurrent
      *value = used;
      return err::Success;
    case 1:  // cudaGraphMemAttrUsedMemHigh
      *value = m.used_high;
      return err::Success;
    case 2:  // cudaGraphMemAttrReservedMemCurrent
      *value = reserved;
      return err::Success;
    case 3:  // cudaGraphMemAttrReservedMemHigh
      *value = m.reserved_high;
      return err::Success;
    default:
      LOG_ERROR("cudaDeviceGetGraphMemAttribute: no graph memory attribute %d", attr);
      return err::InvalidValue;
  }
}

CudaError Client::graph_mem_reset(int dev, int attr, uint64_t value) {
  if (CudaError e = check_device(dev); e != err::Success) return e;
  if ((attr != 1 && attr != 3) || value != 0) {
    LOG_ERROR(
        "cudaDeviceSetGraphMemAttribute: only the high marks (attributes 1 and 3) can be set, "
        "and only to 0 (attribute %d, value %llu)",
        attr, static_cast<unsigned long long>(value));
    return err::InvalidValue;
  }
  std::lock_guard<std::mutex> lock(gmem_mu_);
  uint64_t used = 0, reserved = 0;
  gmem_totals(dev, &used, &reserved);
  GraphMemMarks& m = gmem_marks_[dev];
  if (attr == 1) m.used_high = used;
  if (attr == 3) m.reserved_high = reserved;
  return err::Success;
}

CudaError Client::graph_mem_trim(int dev) {
  // Graph memory nothing holds is released at once: there is no cache to trim.
  return check_device(dev);
}

}  // namespace rgpu::client
