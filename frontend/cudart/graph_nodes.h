// Translating cudaGraph*Node parameters into the client core's node requests
// (frontend/cudart/graphs_params.cc): shared by cudaGraphAdd*Node, cudaGraph*NodeSetParams and
// cudaGraphExec*NodeSetParams, which differ only in their target (client::NodeTarget).
#pragma once

#include "frontend/cudart/api.h"

namespace rgpu::cudart {

CudaError kernel_node(const client::NodeTarget& t, const cudaKernelNodeParams* p,
                      client::GraphNode** out);
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

}  // namespace rgpu::cudart
