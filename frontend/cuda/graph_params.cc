// Graph node parameters of the driver API: the translations of graph_nodes.h onto the client
// core's node requests (client/graphs.cc), and the setters cuGraph*NodeSetParams /
// cuGraphEvent*NodeSetEvent with their cuGraphExec* forms, which send a node's new request to the
// server in place of the recorded one.
#include <cstring>
#include <memory>

#include "common/log.h"
#include "frontend/common/launch_attributes.h"
#include "frontend/common/launch_extra.h"
#include "frontend/cuda/graph_nodes.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::to_driver;

namespace rgpu::cuda_fe {

bool plain_edges(const CUgraphEdgeData* edges, size_t n) {
  if (edges)
    for (size_t i = 0; i < n; ++i)
      if (edges[i].from_port || edges[i].to_port || edges[i].type) {
        LOG_WARN("rgpu: graph edges with ports or types (programmatic edges) are not supported");
        return false;
      }
  return true;
}

bool node_target(CUgraphNode node, CUgraphExec exec, CUgraphNodeType kind, client::NodeTarget* t) {
  if (!node || node_of(node)->kind != static_cast<uint32_t>(kind)) return false;
  t->graph = node_of(node)->graph;
  t->node = node_of(node);
  t->exec = exec ? exec_of(exec) : nullptr;
  return true;
}

CUresult kernel_node(const client::NodeTarget& t, const CUDA_KERNEL_NODE_PARAMS* p,
                     client::GraphNode** out, const std::vector<CUlaunchAttribute>* attrs) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  // A node naming its CUkernel (`kern`, as NVIDIA's runtime fills it in, with func) takes no
  // `extra` buffer: CUDA answers invalid value (cudaGraphAddKernelNode on an H200, driver 580).
  if (p->extra && p->kern) return CUDA_ERROR_INVALID_VALUE;
  // func, or the CUkernel when func is NULL (both are client::Function*).
  client::Function* f =
      function_of(p->func ? static_cast<const void*>(p->func) : static_cast<const void*>(p->kern));
  if (!f) return CUDA_ERROR_INVALID_VALUE;
  // Arguments in an `extra` buffer: pointers into it, one per parameter (copied below).
  std::vector<void*> holder;
  std::vector<char> padded;
  void** args = nullptr;
  if (!frontend::launch_arguments(f, p->kernelParams, p->extra, holder, &args,
                                  "cuGraphAddKernelNode", &padded))
    return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUlaunchAttribute> kept;
  if (attrs)
    kept = *attrs;
  else if (const auto* old = t.node && t.node->kind == CU_GRAPH_NODE_TYPE_KERNEL
                                 ? static_cast<const KernelNodeCopy*>(t.node->params.get())
                                 : nullptr)
    kept = old->attrs;
  // Those that leave a launch as it is (cooperative 0, programmatic serialization 0) are not sent.
  std::vector<client::Client::LaunchAttribute> wire;
  for (const CUlaunchAttribute& a : kept) {
    if (a.id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && !a.value.cooperative) continue;
    if (a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
        !a.value.programmaticStreamSerializationAllowed)
      continue;
    client::Client::LaunchAttribute w;
    if (!frontend::launch_attribute(static_cast<int>(a.id), a.value, w,
                                    [](CUevent e) { return event_of(e); }))
      return CUDA_ERROR_INVALID_VALUE;
    wire.push_back(w);
  }
  client::GraphNode* n = nullptr;
  CUresult r = to_driver(core().graph_add_kernel(t, f, {p->gridDimX, p->gridDimY, p->gridDimZ},
                                                 {p->blockDimX, p->blockDimY, p->blockDimZ}, args,
                                                 p->sharedMemBytes, &n, wire));
  if (r != CUDA_SUCCESS) return r;
  if (!t.exec) {
    auto c = std::make_shared<KernelNodeCopy>();
    c->params = *p;
    c->params.extra = nullptr;  // kept as argument copies: kernelParams below
    c->attrs = std::move(kept);
    size_t offset = 0, size = 0;
    for (size_t i = 0; args && core().param_info(f, i, &offset, &size) == err::Success; ++i) {
      const char* a = static_cast<const char*>(args[i]);
      c->args.emplace_back(a, a + size);
    }
    for (auto& a : c->args) c->arg_ptrs.push_back(a.data());
    c->params.kernelParams = c->arg_ptrs.empty() ? nullptr : c->arg_ptrs.data();
    n->params = std::move(c);
  }
  if (out) *out = n;
  return CUDA_SUCCESS;
}

namespace {

// One operand of a CUDA_MEMCPY3D: its address at the copy's origin (x, y, z); false for an
// array operand or an unknown memory type.
bool operand(CUmemorytype type, const void* host, CUdeviceptr dev, size_t x, size_t y, size_t z,
             size_t pitch, size_t height, const char** at) {
  const char* base = nullptr;
  if (type == CU_MEMORYTYPE_HOST)
    base = static_cast<const char*>(host);
  else if (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED)
    base = static_cast<const char*>(ptr(dev));
  else
    return false;
  *at = base + (z * height + y) * pitch + x;
  return true;
}

// The core's copy kind (cudaMemcpyKind's numbers) for the operands' memory types.
client::CopyKind kind_of(CUmemorytype src, CUmemorytype dst) {
  if (src == CU_MEMORYTYPE_UNIFIED || dst == CU_MEMORYTYPE_UNIFIED)
    return static_cast<client::CopyKind>(4);  // default: the addresses tell
  const bool sh = src == CU_MEMORYTYPE_HOST, dh = dst == CU_MEMORYTYPE_HOST;
  return static_cast<client::CopyKind>(sh ? (dh ? 0 : 1) : (dh ? 2 : 3));
}

}  // namespace

CUresult memcpy_node(const client::NodeTarget& t, const CUDA_MEMCPY3D* p, client::GraphNode** out) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  if (p->srcLOD || p->dstLOD || p->reserved0 || p->reserved1) return CUDA_ERROR_INVALID_VALUE;
  const size_t width = p->WidthInBytes, height = p->Height ? p->Height : 1;
  const size_t depth = p->Depth ? p->Depth : 1;
  const size_t spitch = p->srcPitch ? p->srcPitch : width;
  const size_t dpitch = p->dstPitch ? p->dstPitch : width;
  const size_t sheight = p->srcHeight ? p->srcHeight : height;
  const size_t dheight = p->dstHeight ? p->dstHeight : height;
  const char *src = nullptr, *dst = nullptr;
  if (!operand(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, p->srcZ, spitch,
               sheight, &src) ||
      !operand(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, p->dstZ, dpitch,
               dheight, &dst)) {
    LOG_WARN("rgpu: memcpy graph nodes with CUDA array operands are not supported");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  // Several slices are one 2-D copy when both sides' slices are exactly `height` rows apart.
  if (depth > 1 && (sheight != height || dheight != height)) {
    LOG_WARN(
        "rgpu: 3-D memcpy graph nodes whose slices are not contiguous rows are not "
        "supported");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  client::GraphNode* n = nullptr;
  CUresult r = to_driver(core().graph_add_memcpy(t, const_cast<char*>(dst), dpitch, src, spitch,
                                                 width, height * depth,
                                                 kind_of(p->srcMemoryType, p->dstMemoryType), &n));
  if (r != CUDA_SUCCESS) return r;
  if (!t.exec) n->params = std::make_shared<MemcpyNodeCopy>(MemcpyNodeCopy{*p});
  if (out) *out = n;
  return CUDA_SUCCESS;
}

CUresult memset_node(const client::NodeTarget& t, const CUDA_MEMSET_NODE_PARAMS* p,
                     client::GraphNode** out) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  // The client core's memset node serves both front-ends: 1-, 2- and 4-byte values, 2-D rows.
  client::GraphNode* n = nullptr;
  CUresult r = to_driver(core().graph_add_memset2d(
      t, ptr(p->dst), p->pitch, p->value, p->elementSize, p->width, p->height ? p->height : 1, &n));
  if (r != CUDA_SUCCESS) return r;
  if (!t.exec) n->params = std::make_shared<MemsetNodeCopy>(MemsetNodeCopy{*p});
  if (out) *out = n;
  return CUDA_SUCCESS;
}

CUresult host_node(const client::NodeTarget& t, const CUDA_HOST_NODE_PARAMS* p,
                   client::GraphNode** out) {
  if (!p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
  CUhostFn fn = p->fn;
  void* data = p->userData;
  client::GraphNode* n = nullptr;
  CUresult r = to_driver(core().graph_add_host(
      t, [fn, data] { fn(data); }, &n));
  if (r != CUDA_SUCCESS) return r;
  if (!t.exec) n->host_fn = fn, n->host_data = data;  // what cuGraphHostNodeGetParams answers
  if (out) *out = n;
  return CUDA_SUCCESS;
}

CUresult event_node(const client::NodeTarget& t, CUevent event, bool wait,
                    client::GraphNode** out) {
  if (!event) return CUDA_ERROR_INVALID_VALUE;
  client::GraphNode* n = nullptr;
  CUresult r = to_driver(core().graph_add_event(t, event_of(event), wait, &n));
  if (r == CUDA_SUCCESS && out) *out = n;
  return r;
}

CUresult any_node(const client::NodeTarget& t, CUgraphNodeParams* p, client::GraphNode** out) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      CUDA_KERNEL_NODE_PARAMS k{};
      std::memcpy(&k, &p->kernel, sizeof k);  // v3 is v2's layout
      static_assert(sizeof k == sizeof p->kernel);
      return kernel_node(t, &k, out);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      if (p->memcpy.flags || p->memcpy.reserved) return CUDA_ERROR_INVALID_VALUE;
      return memcpy_node(t, &p->memcpy.copyParams, out);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      CUDA_MEMSET_NODE_PARAMS m{p->memset.dst,         p->memset.pitch, p->memset.value,
                                p->memset.elementSize, p->memset.width, p->memset.height};
      return memset_node(t, &m, out);
    }
    case CU_GRAPH_NODE_TYPE_HOST: {
      CUDA_HOST_NODE_PARAMS h{p->host.fn, p->host.userData};
      return host_node(t, &h, out);
    }
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      return event_node(t, p->eventRecord.event, false, out);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      return event_node(t, p->eventWait.event, true, out);
    case CU_GRAPH_NODE_TYPE_GRAPH: {
      if (t.node)
        break;  // a child graph's nodes are set through cuGraphExecChildGraphNodeSetParams
      // Clone: the node embeds a copy; move: the node takes the graph itself (the parent's now).
      const auto own = p->graph.ownership;
      if (own != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE && own != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
        return CUDA_ERROR_INVALID_VALUE;
      client::GraphNode* n = nullptr;
      CUresult r = to_driver(core().graph_add_child(t.graph, t.deps, graph_of(p->graph.graph), &n,
                                                    own == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE));
      if (r != CUDA_SUCCESS) return r;
      p->graph.graph = cu(n->child);  // the embedded graph
      if (out) *out = n;
      return CUDA_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_EMPTY: {
      if (t.node) break;
      client::GraphNode* n = nullptr;
      CUresult r = to_driver(core().graph_add(t.graph, t.deps, 0, {}, nullptr, 0, &n));
      if (r == CUDA_SUCCESS && out) *out = n;
      return r;
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
      if (t.node) break;  // fixed at creation
      return mem_alloc_node(t, p->alloc.poolProps, p->alloc.accessDescs, p->alloc.accessDescCount,
                            p->alloc.bytesize, &p->alloc.dptr, out);
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      if (t.node) break;
      return mem_free_node(t, p->free.dptr, out);
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: {
      if (t.node) break;  // fixed at creation
      // The node owns its body graphs; phGraph_out points at its array of them.
      client::GraphNode* n = nullptr;
      CUresult r = to_driver(core().graph_add_conditional(
          t.graph, t.deps, p->conditional.handle, static_cast<unsigned>(p->conditional.type),
          p->conditional.size, &n));
      if (r != CUDA_SUCCESS) return r;
      p->conditional.phGraph_out = reinterpret_cast<CUgraph*>(n->bodies.data());
      if (out) *out = n;
      return CUDA_SUCCESS;
    }
    default:
      break;
  }
  LOG_WARN(
      "rgpu: %s a graph node of type %d (setting memory alloc/free or conditional parameters, "
      "external semaphore, batch memory operations) is not supported",
      t.node ? "setting the parameters of" : "adding", static_cast<int>(p->type));
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace rgpu::cuda_fe

// ---- setters ------------------------------------------------------------------------------------

namespace {

using cuda_fe::node_target;

CUresult set_kernel(CUgraphExec x, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* p) {
  RGPU_INIT();
  client::NodeTarget t;
  if (!node_target(node, x, CU_GRAPH_NODE_TYPE_KERNEL, &t)) return CUDA_ERROR_INVALID_VALUE;
  return cuda_fe::kernel_node(t, p, nullptr);
}
CUresult set_kernel_v1(CUgraphExec x, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS k{};
  std::memcpy(&k, p, sizeof *p);  // v1 is v2 without kern and ctx
  return set_kernel(x, node, &k);
}
CUresult set_memcpy(CUgraphExec x, CUgraphNode node, const CUDA_MEMCPY3D* p) {
  RGPU_INIT();
  client::NodeTarget t;
  if (!node_target(node, x, CU_GRAPH_NODE_TYPE_MEMCPY, &t)) return CUDA_ERROR_INVALID_VALUE;
  return cuda_fe::memcpy_node(t, p, nullptr);
}
CUresult set_memset(CUgraphExec x, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* p) {
  RGPU_INIT();
  client::NodeTarget t;
  if (!node_target(node, x, CU_GRAPH_NODE_TYPE_MEMSET, &t)) return CUDA_ERROR_INVALID_VALUE;
  return cuda_fe::memset_node(t, p, nullptr);
}
CUresult set_host(CUgraphExec x, CUgraphNode node, const CUDA_HOST_NODE_PARAMS* p) {
  RGPU_INIT();
  client::NodeTarget t;
  if (!node_target(node, x, CU_GRAPH_NODE_TYPE_HOST, &t)) return CUDA_ERROR_INVALID_VALUE;
  return cuda_fe::host_node(t, p, nullptr);
}
CUresult set_event(CUgraphExec x, CUgraphNode node, CUevent event, bool wait) {
  RGPU_INIT();
  client::NodeTarget t;
  if (!node_target(node, x, wait ? CU_GRAPH_NODE_TYPE_WAIT_EVENT : CU_GRAPH_NODE_TYPE_EVENT_RECORD,
                   &t))
    return CUDA_ERROR_INVALID_VALUE;
  return cuda_fe::event_node(t, event, wait, nullptr);
}
CUresult set_any(CUgraphExec x, CUgraphNode node, CUgraphNodeParams* p) {
  RGPU_INIT();
  if (!node || !p) return CUDA_ERROR_INVALID_VALUE;
  client::NodeTarget t;
  if (!node_target(node, x, p->type, &t)) return CUDA_ERROR_INVALID_VALUE;
  return cuda_fe::any_node(t, p, nullptr);
}

}  // namespace

RGPU_CU CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* p) {
  return set_kernel(nullptr, node, p);
}
#undef cuGraphKernelNodeSetParams
RGPU_CU CUresult cuGraphKernelNodeSetParams(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  return set_kernel_v1(nullptr, node, p);
}
RGPU_CU CUresult cuGraphMemcpyNodeSetParams(CUgraphNode node, const CUDA_MEMCPY3D* p) {
  return set_memcpy(nullptr, node, p);
}
RGPU_CU CUresult cuGraphMemsetNodeSetParams(CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* p) {
  return set_memset(nullptr, node, p);
}
RGPU_CU CUresult cuGraphHostNodeSetParams(CUgraphNode node, const CUDA_HOST_NODE_PARAMS* p) {
  return set_host(nullptr, node, p);
}
RGPU_CU CUresult cuGraphEventRecordNodeSetEvent(CUgraphNode node, CUevent event) {
  return set_event(nullptr, node, event, false);
}
RGPU_CU CUresult cuGraphEventWaitNodeSetEvent(CUgraphNode node, CUevent event) {
  return set_event(nullptr, node, event, true);
}
RGPU_CU CUresult cuGraphNodeSetParams(CUgraphNode node, CUgraphNodeParams* p) {
  return set_any(nullptr, node, p);
}

RGPU_CU CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec x, CUgraphNode node,
                                                   const CUDA_KERNEL_NODE_PARAMS* p) {
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  return set_kernel(x, node, p);
}
#undef cuGraphExecKernelNodeSetParams
RGPU_CU CUresult cuGraphExecKernelNodeSetParams(CUgraphExec x, CUgraphNode node,
                                                const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  return set_kernel_v1(x, node, p);
}
// The context argument names where the copy runs; rgpu's node runs on its graph's device.
RGPU_CU CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec x, CUgraphNode node,
                                                const CUDA_MEMCPY3D* p, CUcontext) {
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  return set_memcpy(x, node, p);
}
RGPU_CU CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec x, CUgraphNode node,
                                                const CUDA_MEMSET_NODE_PARAMS* p, CUcontext) {
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  return set_memset(x, node, p);
}
RGPU_CU CUresult cuGraphExecHostNodeSetParams(CUgraphExec x, CUgraphNode node,
                                              const CUDA_HOST_NODE_PARAMS* p) {
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  return set_host(x, node, p);
}
RGPU_CU CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec x, CUgraphNode node,
                                                    CUevent event) {
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  return set_event(x, node, event, false);
}
RGPU_CU CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec x, CUgraphNode node, CUevent event) {
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  return set_event(x, node, event, true);
}
RGPU_CU CUresult cuGraphExecNodeSetParams(CUgraphExec x, CUgraphNode node, CUgraphNodeParams* p) {
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  return set_any(x, node, p);
}
RGPU_CU CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec x, CUgraphNode node,
                                                    CUgraph child) {
  RGPU_INIT();
  if (!x || !node || !child) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().graph_exec_child(cuda_fe::exec_of(x), cuda_fe::node_of(node),
                                           cuda_fe::graph_of(child)));
}
