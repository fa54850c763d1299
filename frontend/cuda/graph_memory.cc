// Graph memory nodes and attributes through the driver: cuGraphAddMemAllocNode /
// cuGraphAddMemFreeNode (and cuGraphAddNode with their parameters), their parameter queries,
// cuDevice{Get,Set}GraphMemAttribute and cuDeviceGraphMemTrim.  The client core's graph memory
// (client/graphs4.cc), as the runtime's (frontend/cudart/graphs4.cc): the same checks, the same
// kept parameters (laid out as the runtime's, so either API's getter answers).
#include <vector>

#include "common/log.h"
#include "frontend/cuda/api.h"
#include "frontend/cuda/graph_nodes.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::graph_of;
using rgpu::cuda_fe::node_of;
using rgpu::cuda_fe::nodes_of;
using rgpu::cuda_fe::to_driver;

namespace rgpu::cuda_fe {

CUresult mem_alloc_node(const client::NodeTarget& t, const CUmemPoolProps& props,
                        const CUmemAccessDesc* access, size_t access_count, size_t bytesize,
                        CUdeviceptr* dptr, client::GraphNode** out) {
  if (t.node || t.exec) return CUDA_ERROR_INVALID_VALUE;  // no parameters to set later
  if (!t.graph || (access_count && !access)) return CUDA_ERROR_INVALID_VALUE;
  if (props.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props.handleTypes != CU_MEM_HANDLE_TYPE_NONE ||
      props.location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    LOG_ERROR(
        "cuGraphAddMemAllocNode: the pool properties must ask for pinned device memory without "
        "handle types");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (props.location.id != t.graph->device) {
    LOG_WARN(
        "rgpu: a graph allocation on device %d in a graph of device %d is not supported "
        "(allocate on the graph's device)",
        props.location.id, t.graph->device);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  for (size_t i = 0; i < access_count; ++i) {
    const CUmemAccessDesc& d = access[i];
    if (d.location.type != CU_MEM_LOCATION_TYPE_DEVICE || d.location.id != t.graph->device ||
        d.flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      LOG_WARN(
          "rgpu: graph allocations are accessible by their own device only (an access "
          "descriptor names another device or less than read-write access)");
      return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  client::GraphNode* n = nullptr;
  CUresult r = to_driver(core().graph_add_mem_alloc(t.graph, t.deps, bytesize, &n));
  if (r != CUDA_SUCCESS) return r;
  *dptr = reinterpret_cast<CUdeviceptr>(n->alloc->ptr);
  auto c = std::make_shared<AllocNodeCopy>();
  c->params.poolProps = props;
  c->params.accessDescCount = access_count;
  c->params.bytesize = bytesize;
  c->params.dptr = *dptr;
  c->access.assign(access, access + access_count);
  c->params.accessDescs = c->access.empty() ? nullptr : c->access.data();
  n->params = std::move(c);
  if (out) *out = n;
  return CUDA_SUCCESS;
}

CUresult mem_free_node(const client::NodeTarget& t, CUdeviceptr dptr, client::GraphNode** out) {
  if (t.node || t.exec || !t.graph) return CUDA_ERROR_INVALID_VALUE;
  client::GraphNode* n = nullptr;
  CUresult r =
      to_driver(core().graph_add_mem_free(t.graph, t.deps, reinterpret_cast<void*>(dptr), &n));
  if (r == CUDA_SUCCESS && out) *out = n;
  return r;
}

}  // namespace rgpu::cuda_fe

RGPU_CU CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                                        size_t n, CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  RGPU_INIT();
  if (!node || !g || !p || (n && !deps)) return CUDA_ERROR_INVALID_VALUE;
  client::GraphNode* out = nullptr;
  CUresult r =
      cuda_fe::mem_alloc_node({graph_of(g), nodes_of(deps, n)}, p->poolProps, p->accessDescs,
                              p->accessDescCount, p->bytesize, &p->dptr, &out);
  if (r == CUDA_SUCCESS) *node = cuda_fe::cu(out);
  return r;
}

RGPU_CU CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS* out) {
  RGPU_INIT();
  if (!node || !out) return CUDA_ERROR_INVALID_VALUE;
  const client::GraphNode* n = node_of(node);
  if (n->kind != CU_GRAPH_NODE_TYPE_MEM_ALLOC || !n->alloc) return CUDA_ERROR_INVALID_VALUE;
  if (n->params) {  // added explicitly: the parameters given
    *out = static_cast<const cuda_fe::AllocNodeCopy*>(n->params.get())->params;
    return CUDA_SUCCESS;
  }
  *out = CUDA_MEM_ALLOC_NODE_PARAMS{};  // captured (cuMemAllocAsync): pinned device memory
  out->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  out->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  out->poolProps.location.id = n->alloc->device;
  out->bytesize = n->alloc->bytes;
  out->dptr = reinterpret_cast<CUdeviceptr>(n->alloc->ptr);
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuGraphAddMemFreeNode(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                                       size_t n, CUdeviceptr dptr) {
  RGPU_INIT();
  if (!node || !g || (n && !deps)) return CUDA_ERROR_INVALID_VALUE;
  client::GraphNode* out = nullptr;
  CUresult r = cuda_fe::mem_free_node({graph_of(g), nodes_of(deps, n)}, dptr, &out);
  if (r == CUDA_SUCCESS) *node = cuda_fe::cu(out);
  return r;
}

RGPU_CU CUresult cuGraphMemFreeNodeGetParams(CUgraphNode node, CUdeviceptr* dptr_out) {
  RGPU_INIT();
  if (!node || !dptr_out) return CUDA_ERROR_INVALID_VALUE;
  const client::GraphNode* n = node_of(node);
  if (n->kind != CU_GRAPH_NODE_TYPE_MEM_FREE) return CUDA_ERROR_INVALID_VALUE;
  *dptr_out = reinterpret_cast<CUdeviceptr>(n->free_ptr);
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                              void* value) {
  RGPU_INIT();
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  uint64_t v = 0;
  CUresult r = to_driver(core().graph_mem_attribute(device, static_cast<int>(attr), &v));
  if (r == CUDA_SUCCESS) *static_cast<cuuint64_t*>(value) = v;
  return r;
}

RGPU_CU CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                              void* value) {
  RGPU_INIT();
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().graph_mem_reset(device, static_cast<int>(attr),
                                          *static_cast<const cuuint64_t*>(value)));
}

RGPU_CU CUresult cuDeviceGraphMemTrim(CUdevice device) {
  RGPU_INIT();
  return to_driver(core().graph_mem_trim(device));
}
