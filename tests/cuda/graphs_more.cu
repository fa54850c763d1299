// More of the graph API and stream attributes: stream attributes set, read back and copied;
// cudaGraphAddNode; kernel, memcpy and memset node parameter queries; nodes disabled and enabled
// in an executable graph; a node destroyed; a child-graph node's graph and its replacement in an
// executable graph; copy nodes to and from a symbol; capture into an existing graph with a
// dependency added during the capture; a kernel node with an `extra` buffer; a child graph moved
// into its parent.  Prints the same lines natively and through rgpu.
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "check.h"

extern "C" __global__ void add_one(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

__device__ int g_table[8];

static bool all_equal(const int* d, int n, int want) {
  std::vector<int> h(n);
  if (cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess) return false;
  for (int v : h)
    if (v != want) return false;
  return true;
}

// A graph that sets `n` ints at `d` to bytes of `value` (a 1-byte memset).
static cudaGraph_t memset_graph(int* d, int n, int value) {
  cudaGraph_t g;
  if (cudaGraphCreate(&g, 0) != cudaSuccess) return nullptr;
  cudaMemsetParams mp = {};
  mp.dst = d;
  mp.value = value;
  mp.elementSize = 1;
  mp.width = n * sizeof(int);
  mp.height = 1;
  cudaGraphNode_t m;
  if (cudaGraphAddMemsetNode(&m, g, nullptr, 0, &mp) != cudaSuccess) return nullptr;
  return g;
}

int main() {
  const int n = 256;
  int* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, n * sizeof(int)));
  int least = 0, greatest = 0;
  REQUIRE_OK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s, s2;
  REQUIRE_OK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
  REQUIRE_OK(cudaStreamCreate(&s2));

  // 1. Stream attributes.
  cudaStreamAttrValue v = {};
  EXPECT_OK(cudaStreamGetAttribute(s, cudaStreamAttributePriority, &v));
  EXPECT_TRUE(v.priority == greatest, "a stream's priority attribute is its priority");
  v = {};
  v.syncPolicy = cudaSyncPolicyBlockingSync;
  EXPECT_OK(cudaStreamSetAttribute(s, cudaStreamAttributeSynchronizationPolicy, &v));
  v = {};
  EXPECT_OK(cudaStreamGetAttribute(s, cudaStreamAttributeSynchronizationPolicy, &v));
  EXPECT_TRUE(v.syncPolicy == cudaSyncPolicyBlockingSync, "the synchronization policy set is read");
  v = {};
  v.accessPolicyWindow.base_ptr = d;
  v.accessPolicyWindow.num_bytes = n * sizeof(int);
  v.accessPolicyWindow.hitRatio = 0.5f;
  v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  EXPECT_OK(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));
  cudaStreamAttrValue w = {};
  EXPECT_OK(cudaStreamGetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &w));
  EXPECT_TRUE(w.accessPolicyWindow.base_ptr == d &&
                  w.accessPolicyWindow.num_bytes == n * sizeof(int) &&
                  w.accessPolicyWindow.hitRatio == 0.5f &&
                  w.accessPolicyWindow.hitProp == cudaAccessPropertyPersisting &&
                  w.accessPolicyWindow.missProp == cudaAccessPropertyStreaming,
              "the access policy window set is read");
  EXPECT_OK(cudaStreamCopyAttributes(s2, s));
  v = {};
  EXPECT_OK(cudaStreamGetAttribute(s2, cudaStreamAttributeSynchronizationPolicy, &v));
  EXPECT_TRUE(v.syncPolicy == cudaSyncPolicyBlockingSync, "attributes copied to another stream");
  w = {};
  EXPECT_OK(cudaStreamGetAttribute(s2, cudaStreamAttributeAccessPolicyWindow, &w));
  EXPECT_TRUE(w.accessPolicyWindow.base_ptr == d, "the access policy window was copied too");
  v = {};
  v.accessPolicyWindow.num_bytes = 0;  // no window
  EXPECT_OK(cudaStreamSetAttribute(s2, cudaStreamAttributeAccessPolicyWindow, &v));

  // 2. cudaGraphAddNode and parameter queries.
  cudaGraph_t g;
  REQUIRE_OK(cudaGraphCreate(&g, 0));
  cudaGraphNodeParams np = {};
  np.type = cudaGraphNodeTypeMemset;
  np.memset.dst = d;
  np.memset.value = 1;
  np.memset.elementSize = 1;
  np.memset.width = n * sizeof(int);
  np.memset.height = 1;
  cudaGraphNode_t ms, k1, k2;
  EXPECT_OK(cudaGraphAddNode(&ms, g, nullptr, nullptr, 0, &np));
  int count = n;
  void* args[] = {&d, &count};
  np = {};
  np.type = cudaGraphNodeTypeKernel;
  np.kernel.func = reinterpret_cast<void*>(add_one);
  np.kernel.gridDim = dim3((n + 127) / 128);
  np.kernel.blockDim = dim3(128);
  np.kernel.kernelParams = args;
  EXPECT_OK(cudaGraphAddNode(&k1, g, &ms, nullptr, 1, &np));
  EXPECT_OK(cudaGraphAddNode(&k2, g, &k1, nullptr, 1, &np));
  cudaGraphNodeType type;
  EXPECT_OK(cudaGraphNodeGetType(k1, &type));
  EXPECT_TRUE(type == cudaGraphNodeTypeKernel, "cudaGraphAddNode made a kernel node");
  count = 7;  // the node keeps its own copy of the arguments
  cudaKernelNodeParams kp = {};
  EXPECT_OK(cudaGraphKernelNodeGetParams(k1, &kp));
  EXPECT_TRUE(kp.func == reinterpret_cast<void*>(add_one) && kp.gridDim.x == 2 &&
                  kp.blockDim.x == 128 && kp.kernelParams &&
                  *static_cast<int**>(kp.kernelParams[0]) == d &&
                  *static_cast<int*>(kp.kernelParams[1]) == n,
              "a kernel node's parameters, its argument values included");
  count = n;
  cudaMemsetParams mp = {};
  EXPECT_OK(cudaGraphMemsetNodeGetParams(ms, &mp));
  EXPECT_TRUE(mp.dst == d && mp.value == 1 && mp.elementSize == 1 && mp.width == n * sizeof(int),
              "a memset node's parameters");
  EXPECT_ERR(cudaGraphMemsetNodeGetParams(k1, &mp), cudaErrorInvalidValue);

  // 3. Disabled nodes do nothing; enabled again they run.
  cudaGraphExec_t x;
  REQUIRE_OK(cudaGraphInstantiate(&x, g, 0));
  unsigned enabled = 9;
  EXPECT_OK(cudaGraphNodeGetEnabled(x, k1, &enabled));
  EXPECT_TRUE(enabled == 1, "nodes start enabled");
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d, n, 0x01010101 + 2), "memset then two kernels");
  EXPECT_OK(cudaGraphNodeSetEnabled(x, k2, 0));
  EXPECT_OK(cudaGraphNodeGetEnabled(x, k2, &enabled));
  EXPECT_TRUE(enabled == 0, "a disabled node reads disabled");
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d, n, 0x01010101 + 1), "the disabled kernel did not run");
  EXPECT_OK(cudaGraphNodeSetEnabled(x, k2, 1));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d, n, 0x01010101 + 2), "enabled again, it runs");
  EXPECT_OK(cudaGraphExecDestroy(x));

  // 4. A destroyed node leaves the graph with its edges.
  EXPECT_OK(cudaGraphDestroyNode(k1));
  size_t nodes = 0, edges = 0;
  EXPECT_OK(cudaGraphGetNodes(g, nullptr, &nodes));
  EXPECT_OK(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &edges));
  EXPECT_TRUE(nodes == 2 && edges == 0, "2 nodes and no edge left");
  EXPECT_OK(cudaGraphAddDependencies(g, &ms, &k2, nullptr, 1));
  REQUIRE_OK(cudaGraphInstantiate(&x, g, 0));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d, n, 0x01010101 + 1), "the destroyed kernel is gone");
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(g));

  // 5. A child-graph node: its graph, and another graph of the same shape in the executable one.
  cudaGraph_t c3 = memset_graph(d, n, 3), c5 = memset_graph(d, n, 5), parent;
  REQUIRE_OK(cudaGraphCreate(&parent, 0));
  cudaGraphNode_t child, after;
  EXPECT_OK(cudaGraphAddChildGraphNode(&child, parent, nullptr, 0, c3));
  np = {};
  np.type = cudaGraphNodeTypeKernel;
  np.kernel.func = reinterpret_cast<void*>(add_one);
  np.kernel.gridDim = dim3((n + 127) / 128);
  np.kernel.blockDim = dim3(128);
  np.kernel.kernelParams = args;
  EXPECT_OK(cudaGraphAddNode(&after, parent, &child, nullptr, 1, &np));
  EXPECT_OK(cudaGraphNodeGetType(child, &type));
  EXPECT_TRUE(type == cudaGraphNodeTypeGraph, "a child-graph node's type");
  cudaGraph_t embedded = nullptr;
  EXPECT_OK(cudaGraphChildGraphNodeGetGraph(child, &embedded));
  nodes = 0;
  EXPECT_OK(cudaGraphGetNodes(embedded, nullptr, &nodes));
  EXPECT_TRUE(embedded != c3 && nodes == 1, "the node embeds a copy of the child graph");
  nodes = 0;
  EXPECT_OK(cudaGraphGetNodes(parent, nullptr, &nodes));
  EXPECT_TRUE(nodes == 2, "the parent has 2 nodes");
  REQUIRE_OK(cudaGraphInstantiate(&x, parent, 0));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d, n, 0x03030303 + 1), "the child graph ran before the kernel");
  EXPECT_OK(cudaGraphExecChildGraphNodeSetParams(x, child, c5));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d, n, 0x05050505 + 1), "the executable graph took the new child graph");
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(parent));
  // A graph with a destroyed node as a child: the node stays gone.
  cudaGraph_t c9 = memset_graph(d, n, 9);
  cudaGraphNode_t gone, holder;
  REQUIRE_OK(c9 ? cudaSuccess : cudaErrorUnknown);
  EXPECT_OK(cudaGraphAddNode(&gone, c9, nullptr, nullptr, 0, &np));
  EXPECT_OK(cudaGraphDestroyNode(gone));
  REQUIRE_OK(cudaGraphCreate(&parent, 0));
  EXPECT_OK(cudaGraphAddChildGraphNode(&holder, parent, nullptr, 0, c9));
  REQUIRE_OK(cudaGraphInstantiate(&x, parent, 0));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d, n, 0x09090909), "a destroyed node of a child graph does not run");
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(parent));
  EXPECT_OK(cudaGraphDestroy(c9));
  EXPECT_OK(cudaGraphDestroy(c3));
  EXPECT_OK(cudaGraphDestroy(c5));

  // 6. Copy nodes to and from a symbol.
  int table[8], again[8];
  for (int i = 0; i < 8; ++i) table[i] = 10 + i, again[i] = 20 + i;
  REQUIRE_OK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t to, from;
  EXPECT_OK(cudaGraphAddMemcpyNodeToSymbol(&to, g, nullptr, 0, g_table, table, sizeof table, 0,
                                           cudaMemcpyHostToDevice));
  EXPECT_OK(cudaGraphAddMemcpyNodeFromSymbol(&from, g, &to, 1, d, g_table, 4 * sizeof(int),
                                             4 * sizeof(int), cudaMemcpyDeviceToDevice));
  EXPECT_ERR(cudaGraphAddMemcpyNodeToSymbol(&to, g, nullptr, 0, g_table, table, sizeof table, 4,
                                            cudaMemcpyHostToDevice),
             cudaErrorInvalidValue);
  cudaMemcpy3DParms cp = {};
  EXPECT_OK(cudaGraphMemcpyNodeGetParams(from, &cp));
  EXPECT_TRUE(cp.extent.width == 4 * sizeof(int) && cp.dstPtr.ptr == d &&
                  cp.kind == cudaMemcpyDeviceToDevice,
              "a copy node's parameters");
  REQUIRE_OK(cudaGraphInstantiate(&x, g, 0));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  int got[8] = {};
  EXPECT_OK(cudaMemcpyFromSymbol(got, g_table, sizeof got));
  EXPECT_TRUE(std::memcmp(got, table, sizeof got) == 0, "the node copied into the symbol");
  EXPECT_OK(cudaMemcpy(got, d, 4 * sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::memcmp(got, table + 4, 4 * sizeof(int)) == 0,
              "the node copied out of the symbol at an offset");
  EXPECT_OK(cudaGraphExecMemcpyNodeSetParamsToSymbol(x, to, g_table, again, sizeof again, 0,
                                                     cudaMemcpyHostToDevice));
  EXPECT_OK(cudaGraphExecMemcpyNodeSetParamsFromSymbol(x, from, d, g_table, 4 * sizeof(int), 0,
                                                       cudaMemcpyDeviceToDevice));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_OK(cudaMemcpy(got, d, 4 * sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::memcmp(got, again, 4 * sizeof(int)) == 0,
              "the executable graph's copy nodes took new symbol parameters");
  EXPECT_OK(cudaGraphMemcpyNodeSetParamsToSymbol(to, g_table, table, sizeof table, 0,
                                                 cudaMemcpyHostToDevice));
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(g));

  // 7. Capture into an existing graph after one of its nodes; a dependency added in capture.
  cudaGraph_t pre = memset_graph(d, n, 2), out = nullptr;
  REQUIRE_OK(pre ? cudaSuccess : cudaErrorUnknown);
  cudaGraphNode_t first;
  size_t one = 1;
  EXPECT_OK(cudaGraphGetNodes(pre, &first, &one));
  EXPECT_OK(cudaStreamBeginCaptureToGraph(s, pre, &first, nullptr, 1, cudaStreamCaptureModeGlobal));
  add_one<<<(n + 127) / 128, 128, 0, s>>>(d, n);
  EXPECT_OK(
      cudaStreamUpdateCaptureDependencies(s, &first, nullptr, 1, cudaStreamAddCaptureDependencies));
  add_one<<<(n + 127) / 128, 128, 0, s>>>(d, n);
  EXPECT_OK(cudaStreamEndCapture(s, &out));
  EXPECT_TRUE(out == pre, "the capture ended in the graph it was given");
  nodes = edges = 0;
  EXPECT_OK(cudaGraphGetNodes(pre, nullptr, &nodes));
  EXPECT_OK(cudaGraphGetEdges(pre, nullptr, nullptr, nullptr, &edges));
  EXPECT_TRUE(nodes == 3 && edges == 3, "3 nodes, 3 edges (the added dependency included)");
  REQUIRE_OK(cudaGraphInstantiate(&x, pre, 0));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d, n, 0x02020202 + 2), "the existing node, then the captured kernels");
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(pre));

  // 8. The runtime's kernel nodes take no `extra` buffer (CUDA's runtime answers invalid value,
  // seen on an H200 with driver 580; the driver API's nodes take one: driver_graphs).
  struct {
    int* p;
    int n;
  } packed{d, n};
  size_t packed_size = sizeof packed;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &packed_size, CU_LAUNCH_PARAM_END};
  g = memset_graph(d, n, 4);
  REQUIRE_OK(g ? cudaSuccess : cudaErrorUnknown);
  cudaGraphNode_t first_set, kx;
  one = 1;
  EXPECT_OK(cudaGraphGetNodes(g, &first_set, &one));
  cudaKernelNodeParams kxp = {};
  kxp.func = reinterpret_cast<void*>(add_one);
  kxp.gridDim = dim3((n + 127) / 128);
  kxp.blockDim = dim3(128);
  kxp.extra = extra;
  EXPECT_ERR(cudaGraphAddKernelNode(&kx, g, &first_set, 1, &kxp), cudaErrorInvalidValue);
  kxp.extra = nullptr;
  kxp.kernelParams = args;
  EXPECT_OK(cudaGraphAddKernelNode(&kx, g, &first_set, 1, &kxp));
  REQUIRE_OK(cudaGraphInstantiate(&x, g, 0));
  kxp.extra = extra;
  EXPECT_ERR(cudaGraphExecKernelNodeSetParams(x, kx, &kxp), cudaErrorInvalidValue);
  EXPECT_ERR(cudaGraphKernelNodeSetParams(kx, &kxp), cudaErrorInvalidValue);
  kxp.kernelParams = nullptr;
  EXPECT_ERR(cudaGraphKernelNodeSetParams(kx, &kxp), cudaErrorInvalidValue);
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d, n, 0x04040404 + 1), "the node as added with kernelParams ran");
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(g));

  // 9. A child graph moved into its parent (cudaGraphChildGraphOwnershipMove).
  cudaGraph_t moved = memset_graph(d, n, 6);
  REQUIRE_OK(moved ? cudaSuccess : cudaErrorUnknown);
  REQUIRE_OK(cudaGraphCreate(&parent, 0));
  np = {};
  np.type = cudaGraphNodeTypeGraph;
  np.graph.graph = moved;
  np.graph.ownership = cudaGraphChildGraphOwnershipMove;
  cudaGraphNode_t mnode, mafter;
  EXPECT_OK(cudaGraphAddNode(&mnode, parent, nullptr, nullptr, 0, &np));
  cudaGraph_t inside = nullptr;
  EXPECT_OK(cudaGraphChildGraphNodeGetGraph(mnode, &inside));
  EXPECT_TRUE(inside == moved, "the moved graph is the node's own graph (no copy)");
  np = {};
  np.type = cudaGraphNodeTypeKernel;
  np.kernel.func = reinterpret_cast<void*>(add_one);
  np.kernel.gridDim = dim3((n + 127) / 128);
  np.kernel.blockDim = dim3(128);
  np.kernel.kernelParams = args;
  EXPECT_OK(cudaGraphAddNode(&mafter, parent, &mnode, nullptr, 1, &np));
  REQUIRE_OK(cudaGraphInstantiate(&x, parent, 0));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d, n, 0x06060606 + 1), "the moved child graph ran before the kernel");
  cudaGraphExec_t xm = nullptr;
  EXPECT_TRUE(cudaGraphInstantiate(&xm, moved, 0) != cudaSuccess,
              "a moved graph cannot be instantiated on its own");
  EXPECT_TRUE(cudaGraphDestroy(moved) != cudaSuccess, "a moved graph cannot be destroyed alone");
  cudaGetLastError();
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(parent));  // the moved graph goes with it

  // A captured copy between page-locked buffers copies at each launch (what the source holds
  // then).
  {
    int *h1 = nullptr, *h2 = nullptr;
    REQUIRE_OK(cudaMallocHost(&h1, 4096));
    REQUIRE_OK(cudaMallocHost(&h2, 4096));
    for (int i = 0; i < 1024; ++i) h1[i] = 1, h2[i] = 0;
    cudaGraph_t hg = nullptr;
    cudaGraphExec_t hx = nullptr;
    EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    EXPECT_OK(cudaMemcpyAsync(h2, h1, 4096, cudaMemcpyHostToHost, s));
    EXPECT_OK(cudaStreamEndCapture(s, &hg));
    REQUIRE_OK(cudaGraphInstantiate(&hx, hg, 0));
    EXPECT_TRUE(h2[0] == 0 && h2[1023] == 0, "the captured host-to-host copy did not run yet");
    for (int i = 0; i < 1024; ++i) h1[i] = 7;
    EXPECT_OK(cudaGraphLaunch(hx, s));
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT_TRUE(h2[0] == 7 && h2[1023] == 7, "a launch copies what the source holds then");
    EXPECT_OK(cudaGraphExecDestroy(hx));
    EXPECT_OK(cudaGraphDestroy(hg));
    EXPECT_OK(cudaFreeHost(h1));
    EXPECT_OK(cudaFreeHost(h2));
  }

  EXPECT_OK(cudaStreamDestroy(s));
  EXPECT_OK(cudaStreamDestroy(s2));
  EXPECT_OK(cudaFree(d));
  return finish("graphs_more");
}
