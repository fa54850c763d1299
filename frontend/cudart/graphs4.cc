// Graph memory nodes and attributes: cudaGraphAddMemAllocNode / cudaGraphAddMemFreeNode, their
// parameter queries, cudaDevice{Get,Set}GraphMemAttribute and cudaDeviceGraphMemTrim.  Thin
// translations onto the client core (client/graphs4.cc).
#include <vector>

#include "common/log.h"
#include "frontend/cudart/api.h"
#include "frontend/cudart/graph_nodes.h"

using namespace rgpu;
using rgpu::cudart::core;
using rgpu::cudart::ret;

namespace {

client::Graph* G(cudaGraph_t g) { return reinterpret_cast<client::Graph*>(g); }
client::GraphNode* N(cudaGraphNode_t n) { return reinterpret_cast<client::GraphNode*>(n); }

std::vector<client::GraphNode*> deps_of(const cudaGraphNode_t* deps, size_t n) {
  std::vector<client::GraphNode*> out;
  for (size_t i = 0; i < n; ++i) out.push_back(deps ? N(deps[i]) : nullptr);
  return out;
}

// What cudaGraphMemAllocNodeGetParams answers: the parameters given, with their access
// descriptors copied.
struct AllocNodeCopy {
  cudaMemAllocNodeParams params{};
  std::vector<cudaMemAccessDesc> access;
};

}  // namespace

cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                     const cudaGraphNode_t* deps, size_t n,
                                     cudaMemAllocNodeParams* p) {
  if (!node || !graph || !p || (n && !deps)) return ret(err::InvalidValue);
  if (p->poolProps.allocType != cudaMemAllocationTypePinned ||
      p->poolProps.handleTypes != cudaMemHandleTypeNone ||
      p->poolProps.location.type != cudaMemLocationTypeDevice) {
    LOG_ERROR(
        "cudaGraphAddMemAllocNode: the pool properties must ask for pinned device memory "
        "without handle types");
    return ret(err::InvalidValue);
  }
  if (p->poolProps.location.id != G(graph)->device) {
    LOG_WARN(
        "rgpu: a graph allocation on device %d in a graph of device %d is not supported "
        "(allocate on the graph's device)",
        p->poolProps.location.id, G(graph)->device);
    return ret(err::NotSupported);
  }
  if (p->accessDescCount && !p->accessDescs) return ret(err::InvalidValue);
  for (size_t i = 0; i < p->accessDescCount; ++i) {
    const cudaMemAccessDesc& d = p->accessDescs[i];
    if (d.location.type != cudaMemLocationTypeDevice || d.location.id != G(graph)->device ||
        d.flags != cudaMemAccessFlagsProtReadWrite) {
      LOG_WARN(
          "rgpu: graph allocations are accessible by their own device only (an access "
          "descriptor names another device or less than read-write access)");
      return ret(err::NotSupported);
    }
  }
  client::GraphNode* out = nullptr;
  CudaError e = core().graph_add_mem_alloc(G(graph), deps_of(deps, n), p->bytesize, &out);
  if (e != err::Success) return ret(e);
  p->dptr = out->alloc->ptr;
  auto c = std::make_shared<AllocNodeCopy>();
  c->params = *p;
  c->access.assign(p->accessDescs, p->accessDescs + p->accessDescCount);
  c->params.accessDescs = c->access.empty() ? nullptr : c->access.data();
  out->params = std::move(c);
  *node = reinterpret_cast<cudaGraphNode_t>(out);
  return cudaSuccess;
}

cudaError_t cudaGraphMemAllocNodeGetParams(cudaGraphNode_t node, cudaMemAllocNodeParams* out) {
  if (!node || !out) return ret(err::InvalidValue);
  const client::GraphNode* n = N(node);
  if (n->kind != cudaGraphNodeTypeMemAlloc || !n->alloc) return ret(err::InvalidValue);
  if (n->params) {  // added explicitly: the parameters given
    *out = static_cast<const AllocNodeCopy*>(n->params.get())->params;
    return cudaSuccess;
  }
  *out = cudaMemAllocNodeParams{};  // captured (cudaMallocAsync): pinned memory of the device
  out->poolProps.allocType = cudaMemAllocationTypePinned;
  out->poolProps.location.type = cudaMemLocationTypeDevice;
  out->poolProps.location.id = n->alloc->device;
  out->bytesize = n->alloc->bytes;
  out->dptr = n->alloc->ptr;
  return cudaSuccess;
}

cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                    const cudaGraphNode_t* deps, size_t n, void* dptr) {
  if (!node || !graph || (n && !deps)) return ret(err::InvalidValue);
  client::GraphNode* out = nullptr;
  CudaError e = core().graph_add_mem_free(G(graph), deps_of(deps, n), dptr, &out);
  if (e != err::Success) return ret(e);
  *node = reinterpret_cast<cudaGraphNode_t>(out);
  return cudaSuccess;
}

cudaError_t cudaGraphMemFreeNodeGetParams(cudaGraphNode_t node, void* dptr_out) {
  if (!node || !dptr_out) return ret(err::InvalidValue);
  const client::GraphNode* n = N(node);
  if (n->kind != cudaGraphNodeTypeMemFree) return ret(err::InvalidValue);
  *static_cast<void**>(dptr_out) = n->free_ptr;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetGraphMemAttribute(int device, cudaGraphMemAttributeType attr,
                                           void* value) {
  if (!value) return ret(err::InvalidValue);
  uint64_t v = 0;
  CudaError e = core().graph_mem_attribute(device, static_cast<int>(attr), &v);
  if (e == err::Success) *static_cast<uint64_t*>(value) = v;
  return ret(e);
}

cudaError_t cudaDeviceSetGraphMemAttribute(int device, cudaGraphMemAttributeType attr,
                                           void* value) {
  if (!value) return ret(err::InvalidValue);
  return ret(
      core().graph_mem_reset(device, static_cast<int>(attr), *static_cast<const uint64_t*>(value)));
}

cudaError_t cudaDeviceGraphMemTrim(int device) { return ret(core().graph_mem_trim(device)); }

// ---- kernel node attributes: kept with the node's parameters (KernelNodeCopy); a change sends
// the node's request again, a LaunchEx carrying them, so launches of executable graphs
// instantiated afterwards honour them.

namespace {

cudaError_t kernel_copy(cudaGraphNode_t node, const cudart::KernelNodeCopy** out) {
  if (!node) return ret(err::InvalidValue);
  const client::GraphNode* n = N(node);
  if (n->kind != cudaGraphNodeTypeKernel) return ret(err::InvalidValue);
  *out = cudart::node_params<cudart::KernelNodeCopy>(n);
  if (!*out) {
    LOG_WARN(
        "rgpu: kernel node attributes are kept for nodes added explicitly, not for captured "
        "ones");
    return ret(err::NotSupported);
  }
  return cudaSuccess;
}

cudaError_t set_attributes(cudaGraphNode_t node, const cudart::KernelNodeCopy* c,
                           std::vector<cudaLaunchAttribute> attrs) {
  client::NodeTarget t{N(node)->graph, {}, N(node), nullptr};
  return ret(cudart::kernel_node(t, &c->params, nullptr, &attrs));
}

}  // namespace

cudaError_t cudaGraphKernelNodeGetAttribute(cudaGraphNode_t node, cudaKernelNodeAttrID attr,
                                            cudaKernelNodeAttrValue* out) {
  if (!out) return ret(err::InvalidValue);
  const cudart::KernelNodeCopy* c = nullptr;
  if (cudaError_t e = kernel_copy(node, &c); e != cudaSuccess) return e;
  cudaLaunchAttribute probe{};
  probe.id = attr;
  client::Client::LaunchAttribute w;
  if (!cudart::launch_attribute(probe, w)) return ret(err::InvalidValue);
  *out = cudaKernelNodeAttrValue{};  // not set: the default
  for (const cudaLaunchAttribute& a : c->attrs)
    if (a.id == attr) *out = a.val;
  return cudaSuccess;
}

cudaError_t cudaGraphKernelNodeSetAttribute(cudaGraphNode_t node, cudaKernelNodeAttrID attr,
                                            const cudaKernelNodeAttrValue* value) {
  if (!value) return ret(err::InvalidValue);
  const cudart::KernelNodeCopy* c = nullptr;
  if (cudaError_t e = kernel_copy(node, &c); e != cudaSuccess) return e;
  cudaLaunchAttribute a{};
  a.id = attr;
  a.val = *value;
  client::Client::LaunchAttribute w;
  if (!cudart::launch_attribute(a, w)) {
    LOG_ERROR("cudaGraphKernelNodeSetAttribute: attribute %d is unknown to rgpu",
              static_cast<int>(attr));
    return ret(err::InvalidValue);
  }
  if (attr == cudaLaunchAttributeProgrammaticEvent ||
      attr == cudaLaunchAttributeLaunchCompletionEvent) {
    LOG_WARN("rgpu: event attributes of kernel nodes are not supported (use graph edges)");
    return ret(err::NotSupported);
  }
  std::vector<cudaLaunchAttribute> attrs = c->attrs;
  std::erase_if(attrs, [&](const cudaLaunchAttribute& x) { return x.id == attr; });
  attrs.push_back(a);
  return set_attributes(node, c, std::move(attrs));
}

cudaError_t cudaGraphKernelNodeCopyAttributes(cudaGraphNode_t dst, cudaGraphNode_t src) {
  const cudart::KernelNodeCopy *d = nullptr, *s = nullptr;
  if (cudaError_t e = kernel_copy(src, &s); e != cudaSuccess) return e;
  if (cudaError_t e = kernel_copy(dst, &d); e != cudaSuccess) return e;
  if (N(dst)->graph->device != N(src)->graph->device) return ret(err::InvalidValue);
  return set_attributes(dst, d, s->attrs);
}
