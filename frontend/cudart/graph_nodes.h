// Translating cudaGraph*Node parameters into the client core's node requests
// (frontend/cudart/graphs_params.cc): shared by cudaGraphAdd*Node, cudaGraph*NodeSetParams and
// cudaGraphExec*NodeSetParams, which differ only in their target (client::NodeTarget).
#pragma once

#include <memory>
#include <vector>

#include "frontend/cudart/api.h"

namespace rgpu::cudart {

// With `attrs` null, a node's new parameters keep the attributes it had (an added node has none).
CudaError kernel_node(const client::NodeTarget& t, const cudaKernelNodeParams* p,
                      client::GraphNode** out,
                      const std::vector<cudaLaunchAttribute>* attrs = nullptr);
// One launch attribute in the core's terms; false for an id this build does not know
// (frontend/cudart/launch.cc).
bool launch_attribute(const cudaLaunchAttribute& a, client::Client::LaunchAttribute& out);
CudaError memcpy_node(const client::NodeTarget& t, const cudaMemcpy3DParms* p,
                      client::GraphNode** out);
CudaError memcpy1d_node(const client::NodeTarget& t, void* dst, const void* src, size_t count,
                        cudaMemcpyKind kind, client::GraphNode** out);
CudaError memset_node(const client::NodeTarget& t, const cudaMemsetParams* p,
                      client::GraphNode** out);
CudaError host_node(const client::NodeTarget& t, const cudaHostNodeParams* p,
                    client::GraphNode** out);
CudaError event_node(const client::NodeTarget& t, cudaEvent_t event, bool wait,
                     client::GraphNode** out);

// A potentially unsafe call (cudaMalloc) on this thread: cudaErrorStreamCaptureUnsupported when
// a stream capture's mode prohibits it (the capture is then invalidated), else cudaSuccess
// (frontend/cudart/graphs.cc, client/graphs4.cc).
cudaError_t unsafe_call();

// What cudaGraph*NodeGetParams answer: a copy of the parameters last given to a node of the
// graph (client::GraphNode::params); a kernel node's argument values are copied too.
struct KernelNodeCopy {
  cudaKernelNodeParams params{};
  std::vector<cudaLaunchAttribute> attrs;  // cudaGraphKernelNodeSetAttribute's, one per id
  std::vector<std::vector<char>> args;
  std::vector<void*> arg_ptrs;
};
template <class T>
const T* node_params(const client::GraphNode* n) {
  return n ? static_cast<const T*>(n->params.get()) : nullptr;
}

}  // namespace rgpu::cudart
