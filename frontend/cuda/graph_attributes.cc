// Kernel node attributes through the driver: cuGraphKernelNode{Get,Set}Attribute and
// cuGraphKernelNodeCopyAttributes.  Kept with the node's parameters (KernelNodeCopy); a change
// records the node's request again, a LaunchEx carrying them, as the runtime's
// (frontend/cudart/graphs4.cc): launches of executable graphs instantiated afterwards honour them.
// The attributes are those cuLaunchKernelEx takes (frontend/common/launch_attributes.h); event
// attributes are refused (graph edges order nodes).
#include <algorithm>
#include <vector>

#include "common/log.h"
#include "frontend/common/launch_attributes.h"
#include "frontend/cuda/api.h"
#include "frontend/cuda/graph_nodes.h"

using namespace rgpu;
using rgpu::cuda_fe::node_of;

namespace {

CUresult kernel_copy(CUgraphNode node, const cuda_fe::KernelNodeCopy** out) {
  if (!node) return CUDA_ERROR_INVALID_VALUE;
  const client::GraphNode* n = node_of(node);
  if (n->kind != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  *out = static_cast<const cuda_fe::KernelNodeCopy*>(n->params.get());
  if (!*out) {
    LOG_WARN(
        "rgpu: kernel node attributes are kept for nodes added explicitly, not for captured "
        "ones");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}

bool known(const CUlaunchAttribute& a) {
  client::Client::LaunchAttribute w;
  return frontend::launch_attribute(static_cast<int>(a.id), a.value, w,
                                    [](CUevent) -> client::Event* { return nullptr; });
}

CUresult set_attributes(CUgraphNode node, const cuda_fe::KernelNodeCopy* c,
                        std::vector<CUlaunchAttribute> attrs) {
  client::NodeTarget t{node_of(node)->graph, {}, node_of(node), nullptr};
  return cuda_fe::kernel_node(t, &c->params, nullptr, &attrs);
}

}  // namespace

RGPU_CU CUresult cuGraphKernelNodeGetAttribute(CUgraphNode node, CUkernelNodeAttrID attr,
                                               CUkernelNodeAttrValue* out) {
  RGPU_INIT();
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  const cuda_fe::KernelNodeCopy* c = nullptr;
  if (CUresult r = kernel_copy(node, &c); r != CUDA_SUCCESS) return r;
  CUlaunchAttribute probe{};
  probe.id = attr;
  if (!known(probe)) return CUDA_ERROR_INVALID_VALUE;
  *out = CUkernelNodeAttrValue{};  // not set: the default
  for (const CUlaunchAttribute& a : c->attrs)
    if (a.id == attr) *out = a.value;
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuGraphKernelNodeSetAttribute(CUgraphNode node, CUkernelNodeAttrID attr,
                                               const CUkernelNodeAttrValue* value) {
  RGPU_INIT();
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  const cuda_fe::KernelNodeCopy* c = nullptr;
  if (CUresult r = kernel_copy(node, &c); r != CUDA_SUCCESS) return r;
  CUlaunchAttribute a{};
  a.id = attr;
  a.value = *value;
  if (!known(a)) {
    LOG_ERROR("cuGraphKernelNodeSetAttribute: attribute %d is unknown to rgpu",
              static_cast<int>(attr));
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (attr == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT ||
      attr == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT) {
    LOG_WARN("rgpu: event attributes of kernel nodes are not supported (use graph edges)");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  std::vector<CUlaunchAttribute> attrs = c->attrs;
  std::erase_if(attrs, [&](const CUlaunchAttribute& x) { return x.id == attr; });
  attrs.push_back(a);
  return set_attributes(node, c, std::move(attrs));
}

RGPU_CU CUresult cuGraphKernelNodeCopyAttributes(CUgraphNode dst, CUgraphNode src) {
  RGPU_INIT();
  const cuda_fe::KernelNodeCopy *d = nullptr, *s = nullptr;
  if (CUresult r = kernel_copy(src, &s); r != CUDA_SUCCESS) return r;
  if (CUresult r = kernel_copy(dst, &d); r != CUDA_SUCCESS) return r;
  if (node_of(dst)->graph->device != node_of(src)->graph->device) return CUDA_ERROR_INVALID_VALUE;
  return set_attributes(dst, d, s->attrs);
}
