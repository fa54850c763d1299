// Graph node parameters: cudaGraphAdd*Node's translations (graph_nodes.h), and the setters
// cudaGraph*NodeSetParams / cudaGraphEvent*NodeSetEvent and their cudaGraphExec* forms, which
// send the node's new request to the server (GraphSetNode) in place of the recorded one.
#include "common/log.h"
#include "frontend/cudart/graph_nodes.h"
#include "frontend/cudart/registration.h"

using namespace rgpu;
using rgpu::cudart::core;
using rgpu::cudart::ret;

namespace rgpu::cudart {

CudaError kernel_node(const client::NodeTarget& t, const cudaKernelNodeParams* p,
                      client::GraphNode** out, const std::vector<cudaLaunchAttribute>* attrs) {
  if (!p) return err::InvalidValue;
  // CUDA's runtime takes no `extra` buffer in kernel nodes (invalid value, seen on an H200 with
  // driver 580); the driver API's nodes do (frontend/cuda).
  if (p->extra) {
    LOG_ERROR("a runtime kernel node's arguments must be kernelParams, not `extra`");
    return err::InvalidValue;
  }
  client::Function* f = Registration::get().function(p->func);
  if (!f) return client::errc::InvalidDeviceFunction;
  void** args = p->kernelParams;
  std::vector<cudaLaunchAttribute> kept;
  if (attrs)
    kept = *attrs;
  else if (const KernelNodeCopy* old = t.node ? node_params<KernelNodeCopy>(t.node) : nullptr;
           old && t.node->kind == cudaGraphNodeTypeKernel)
    kept = old->attrs;
  // Those that leave a launch as it is (cooperative 0, programmatic serialization 0) are not sent.
  std::vector<client::Client::LaunchAttribute> wire;
  for (const cudaLaunchAttribute& a : kept) {
    if (a.id == cudaLaunchAttributeCooperative && !a.val.cooperative) continue;
    if (a.id == cudaLaunchAttributeProgrammaticStreamSerialization &&
        !a.val.programmaticStreamSerializationAllowed)
      continue;
    client::Client::LaunchAttribute w;
    if (!launch_attribute(a, w)) return err::InvalidValue;
    wire.push_back(w);
  }
  client::GraphNode* n = nullptr;
  CudaError e = core().graph_add_kernel(t, f, {p->gridDim.x, p->gridDim.y, p->gridDim.z},
                                        {p->blockDim.x, p->blockDim.y, p->blockDim.z}, args,
                                        p->sharedMemBytes, &n, wire);
  if (e != err::Success) return e;
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
  return err::Success;
}

CudaError memcpy_node(const client::NodeTarget& t, const cudaMemcpy3DParms* p,
                      client::GraphNode** out) {
  if (!p) return err::InvalidValue;
  if (p->srcArray || p->dstArray) {
    LOG_WARN("rgpu: graph copy nodes with CUDA arrays are not supported");
    return err::NotSupported;
  }
  // Linear memory: the box's rows, offset by the positions, must follow one another `pitch`
  // apart (slices of exactly `height` rows, or one slice): one 2-D copy of height x depth rows.
  const size_t height = p->extent.height ? p->extent.height : 1;
  const size_t depth = p->extent.depth ? p->extent.depth : 1;
  if (depth > 1 && (p->srcPtr.ysize != height || p->dstPtr.ysize != height)) {
    LOG_WARN(
        "rgpu: a 3-D graph copy node whose slices hold more rows than the copy's height is not "
        "supported (one copy node is one 2-D copy)");
    return err::NotSupported;
  }
  const auto at = [](const cudaPitchedPtr& q, const cudaPos& pos) {
    return static_cast<char*>(q.ptr) + (pos.z * q.ysize + pos.y) * q.pitch + pos.x;
  };
  client::GraphNode* n = nullptr;
  CudaError e = core().graph_add_memcpy(t, at(p->dstPtr, p->dstPos), p->dstPtr.pitch,
                                        at(p->srcPtr, p->srcPos), p->srcPtr.pitch, p->extent.width,
                                        height * depth, static_cast<client::CopyKind>(p->kind), &n);
  if (e != err::Success) return e;
  if (!t.exec) n->params = std::make_shared<cudaMemcpy3DParms>(*p);
  if (out) *out = n;
  return err::Success;
}

CudaError memcpy1d_node(const client::NodeTarget& t, void* dst, const void* src, size_t count,
                        cudaMemcpyKind kind, client::GraphNode** out) {
  client::GraphNode* n = nullptr;
  CudaError e = core().graph_add_memcpy(t, dst, count, src, count, count, 1,
                                        static_cast<client::CopyKind>(kind), &n);
  if (e != err::Success) return e;
  if (!t.exec) {  // what cudaGraphMemcpyNodeGetParams answers for a 1-D copy
    auto c = std::make_shared<cudaMemcpy3DParms>();
    c->srcPtr = cudaPitchedPtr{const_cast<void*>(src), count, count, 1};
    c->dstPtr = cudaPitchedPtr{dst, count, count, 1};
    c->extent = cudaExtent{count, 1, 1};
    c->kind = kind;
    n->params = std::move(c);
  }
  if (out) *out = n;
  return err::Success;
}

CudaError memset_node(const client::NodeTarget& t, const cudaMemsetParams* p,
                      client::GraphNode** out) {
  if (!p) return err::InvalidValue;
  client::GraphNode* n = nullptr;
  CudaError e = core().graph_add_memset2d(t, p->dst, p->pitch, p->value, p->elementSize, p->width,
                                          p->height ? p->height : 1, &n);
  if (e != err::Success) return e;
  if (!t.exec) n->params = std::make_shared<cudaMemsetParams>(*p);
  if (out) *out = n;
  return err::Success;
}

CudaError host_node(const client::NodeTarget& t, const cudaHostNodeParams* p,
                    client::GraphNode** out) {
  if (!p || !p->fn) return err::InvalidValue;
  cudaHostFn_t fn = p->fn;
  void* data = p->userData;
  client::GraphNode* n = nullptr;
  CudaError e = core().graph_add_host(
      t, [fn, data] { fn(data); }, &n);
  if (e != err::Success) return e;
  if (!t.exec) n->host_fn = fn, n->host_data = data;  // what cudaGraphHostNodeGetParams answers
  if (out) *out = n;
  return err::Success;
}

CudaError event_node(const client::NodeTarget& t, cudaEvent_t event, bool wait,
                     client::GraphNode** out) {
  client::GraphNode* n = nullptr;
  CudaError e = core().graph_add_event(t, event_of(event), wait, &n);
  if (e == err::Success && out) *out = n;
  return e;
}

}  // namespace rgpu::cudart

namespace {

client::GraphNode* N(cudaGraphNode_t n) { return reinterpret_cast<client::GraphNode*>(n); }
client::GraphExec* X(cudaGraphExec_t x) { return reinterpret_cast<client::GraphExec*>(x); }

// The target for new parameters of `node` (in `exec` when given); false when the node is not of
// `kind`.
bool target(cudaGraphNode_t node, cudaGraphExec_t exec, cudaGraphNodeType kind,
            client::NodeTarget* t) {
  if (!node || N(node)->kind != static_cast<uint32_t>(kind)) return false;
  t->graph = N(node)->graph;
  t->node = N(node);
  t->exec = exec ? X(exec) : nullptr;
  return true;
}

cudaError_t set_kernel(cudaGraphExec_t x, cudaGraphNode_t node, const cudaKernelNodeParams* p) {
  client::NodeTarget t;
  if (!target(node, x, cudaGraphNodeTypeKernel, &t)) return ret(err::InvalidValue);
  return ret(cudart::kernel_node(t, p, nullptr));
}
cudaError_t set_memcpy(cudaGraphExec_t x, cudaGraphNode_t node, const cudaMemcpy3DParms* p) {
  client::NodeTarget t;
  if (!target(node, x, cudaGraphNodeTypeMemcpy, &t)) return ret(err::InvalidValue);
  return ret(cudart::memcpy_node(t, p, nullptr));
}
cudaError_t set_memcpy1d(cudaGraphExec_t x, cudaGraphNode_t node, void* dst, const void* src,
                         size_t count, cudaMemcpyKind kind) {
  client::NodeTarget t;
  if (!target(node, x, cudaGraphNodeTypeMemcpy, &t)) return ret(err::InvalidValue);
  return ret(cudart::memcpy1d_node(t, dst, src, count, kind, nullptr));
}
cudaError_t set_memset(cudaGraphExec_t x, cudaGraphNode_t node, const cudaMemsetParams* p) {
  client::NodeTarget t;
  if (!target(node, x, cudaGraphNodeTypeMemset, &t)) return ret(err::InvalidValue);
  return ret(cudart::memset_node(t, p, nullptr));
}
cudaError_t set_host(cudaGraphExec_t x, cudaGraphNode_t node, const cudaHostNodeParams* p) {
  client::NodeTarget t;
  if (!target(node, x, cudaGraphNodeTypeHost, &t)) return ret(err::InvalidValue);
  return ret(cudart::host_node(t, p, nullptr));
}
cudaError_t set_event(cudaGraphExec_t x, cudaGraphNode_t node, cudaEvent_t event, bool wait) {
  client::NodeTarget t;
  if (!target(node, x, wait ? cudaGraphNodeTypeWaitEvent : cudaGraphNodeTypeEventRecord, &t))
    return ret(err::InvalidValue);
  return ret(cudart::event_node(t, event, wait, nullptr));
}

}  // namespace

cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node, const cudaKernelNodeParams* p) {
  return set_kernel(nullptr, node, p);
}
cudaError_t cudaGraphMemcpyNodeSetParams(cudaGraphNode_t node, const cudaMemcpy3DParms* p) {
  return set_memcpy(nullptr, node, p);
}
cudaError_t cudaGraphMemcpyNodeSetParams1D(cudaGraphNode_t node, void* dst, const void* src,
                                           size_t count, cudaMemcpyKind kind) {
  return set_memcpy1d(nullptr, node, dst, src, count, kind);
}
cudaError_t cudaGraphMemsetNodeSetParams(cudaGraphNode_t node, const cudaMemsetParams* p) {
  return set_memset(nullptr, node, p);
}
cudaError_t cudaGraphHostNodeSetParams(cudaGraphNode_t node, const cudaHostNodeParams* p) {
  return set_host(nullptr, node, p);
}
cudaError_t cudaGraphEventRecordNodeSetEvent(cudaGraphNode_t node, cudaEvent_t event) {
  return set_event(nullptr, node, event, false);
}
cudaError_t cudaGraphEventWaitNodeSetEvent(cudaGraphNode_t node, cudaEvent_t event) {
  return set_event(nullptr, node, event, true);
}

cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t x, cudaGraphNode_t node,
                                             const cudaKernelNodeParams* p) {
  if (!x) return ret(err::InvalidValue);
  return set_kernel(x, node, p);
}
cudaError_t cudaGraphExecMemcpyNodeSetParams(cudaGraphExec_t x, cudaGraphNode_t node,
                                             const cudaMemcpy3DParms* p) {
  if (!x) return ret(err::InvalidValue);
  return set_memcpy(x, node, p);
}
cudaError_t cudaGraphExecMemcpyNodeSetParams1D(cudaGraphExec_t x, cudaGraphNode_t node, void* dst,
                                               const void* src, size_t count, cudaMemcpyKind kind) {
  if (!x) return ret(err::InvalidValue);
  return set_memcpy1d(x, node, dst, src, count, kind);
}
cudaError_t cudaGraphExecMemsetNodeSetParams(cudaGraphExec_t x, cudaGraphNode_t node,
                                             const cudaMemsetParams* p) {
  if (!x) return ret(err::InvalidValue);
  return set_memset(x, node, p);
}
cudaError_t cudaGraphExecHostNodeSetParams(cudaGraphExec_t x, cudaGraphNode_t node,
                                           const cudaHostNodeParams* p) {
  if (!x) return ret(err::InvalidValue);
  return set_host(x, node, p);
}
cudaError_t cudaGraphExecEventRecordNodeSetEvent(cudaGraphExec_t x, cudaGraphNode_t node,
                                                 cudaEvent_t event) {
  if (!x) return ret(err::InvalidValue);
  return set_event(x, node, event, false);
}
cudaError_t cudaGraphExecEventWaitNodeSetEvent(cudaGraphExec_t x, cudaGraphNode_t node,
                                               cudaEvent_t event) {
  if (!x) return ret(err::InvalidValue);
  return set_event(x, node, event, true);
}

// cudaGraphNodeSetParams / cudaGraphExecNodeSetParams: the same setters, chosen by type.
namespace {
cudaError_t set_any(cudaGraphExec_t x, cudaGraphNode_t node, const cudaGraphNodeParams* p) {
  if (!node || !p) return ret(err::InvalidValue);
  switch (p->type) {
    case cudaGraphNodeTypeKernel: {
      cudaKernelNodeParams k{};
      k.func = p->kernel.func;
      k.gridDim = p->kernel.gridDim;
      k.blockDim = p->kernel.blockDim;
      k.sharedMemBytes = p->kernel.sharedMemBytes;
      k.kernelParams = p->kernel.kernelParams;
      k.extra = p->kernel.extra;
      return set_kernel(x, node, &k);
    }
    case cudaGraphNodeTypeMemcpy:
      if (p->memcpy.flags) return ret(err::InvalidValue);
      return set_memcpy(x, node, &p->memcpy.copyParams);
    case cudaGraphNodeTypeMemset: {
      cudaMemsetParams m{};
      m.dst = p->memset.dst;
      m.pitch = p->memset.pitch;
      m.value = p->memset.value;
      m.elementSize = p->memset.elementSize;
      m.width = p->memset.width;
      m.height = p->memset.height;
      return set_memset(x, node, &m);
    }
    case cudaGraphNodeTypeHost: {
      cudaHostNodeParams h{p->host.fn, p->host.userData};
      return set_host(x, node, &h);
    }
    case cudaGraphNodeTypeEventRecord:
      return set_event(x, node, p->eventRecord.event, false);
    case cudaGraphNodeTypeWaitEvent:
      return set_event(x, node, p->eventWait.event, true);
    default:
      LOG_WARN("rgpu: setting the parameters of a graph node of type %d is not supported",
               static_cast<int>(p->type));
      return ret(err::NotSupported);
  }
}
}  // namespace

cudaError_t cudaGraphNodeSetParams(cudaGraphNode_t node, cudaGraphNodeParams* p) {
  return set_any(nullptr, node, p);
}
cudaError_t cudaGraphExecNodeSetParams(cudaGraphExec_t x, cudaGraphNode_t node,
                                       cudaGraphNodeParams* p) {
  if (!x) return ret(err::InvalidValue);
  return set_any(x, node, p);
}
