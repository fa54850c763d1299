// Conditional graph nodes (issue 11, item 1): while, if/else and switch nodes whose handles
// kernels set with cudaGraphSetConditional, bodies built node by node and by capture into them,
// cudaGraphCondAssignDefault, nested conditionals, the driver's form, and the calls CUDA
// refuses.  Output is identical natively and through rgpu.
#include <cuda.h>

#include <cstring>

#include "check.h"

// Adds the counter to *acc and counts it down; at 0 the loop's handle goes to 0.
extern "C" __global__ void cond_countdown(int* counter, int* acc, cudaGraphConditionalHandle h) {
  *acc += *counter;
  if (--*counter <= 0) cudaGraphSetConditional(h, 0);
}
// The handle takes *v.
extern "C" __global__ void cond_set(cudaGraphConditionalHandle h, const int* v) {
  cudaGraphSetConditional(h, static_cast<unsigned>(*v));
}
extern "C" __global__ void cond_add(int* out, int v) { *out += v; }

static int read_int(const int* d) {
  int v = 0;
  REQUIRE_OK(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost));
  return v;
}
static void write_int(int* d, int v) {
  REQUIRE_OK(cudaMemcpy(d, &v, sizeof v, cudaMemcpyHostToDevice));
}

static cudaGraphNode_t add_kernel(cudaGraph_t g, const cudaGraphNode_t* deps, size_t n,
                                  const void* fn, void** args) {
  cudaKernelNodeParams k{};
  k.func = const_cast<void*>(fn);
  k.gridDim = dim3(1);
  k.blockDim = dim3(1);
  k.kernelParams = args;
  cudaGraphNode_t node = nullptr;
  REQUIRE_OK(cudaGraphAddKernelNode(&node, g, deps, n, &k));
  return node;
}

static cudaGraphNode_t add_cond(cudaGraph_t g, const cudaGraphNode_t* deps, size_t n,
                                cudaGraphConditionalHandle h, cudaGraphConditionalNodeType type,
                                unsigned size, cudaGraph_t* bodies) {
  cudaGraphNodeParams p{};
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = h;
  p.conditional.type = type;
  p.conditional.size = size;
  cudaGraphNode_t node = nullptr;
  REQUIRE_OK(cudaGraphAddNode(&node, g, deps, nullptr, n, &p));
  for (unsigned i = 0; i < size; ++i) bodies[i] = p.conditional.phGraph_out[i];
  return node;
}

int main() {
  cudaStream_t s;
  // A blocking stream: the synchronous copies that set inputs (legacy stream) come first.
  REQUIRE_OK(cudaStreamCreate(&s));
  int *counter, *acc, *sel, *out;
  REQUIRE_OK(cudaMalloc(&counter, sizeof(int)));
  REQUIRE_OK(cudaMalloc(&acc, sizeof(int)));
  REQUIRE_OK(cudaMalloc(&sel, sizeof(int)));
  REQUIRE_OK(cudaMalloc(&out, sizeof(int)));

  // 1. while: the body counts down from *counter; the handle's default (1, assigned at each
  // launch) starts the loop.  Then memset + add after the loop.
  {
    cudaGraph_t g;
    REQUIRE_OK(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle h;
    EXPECT_OK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
    cudaGraphNode_t zero;
    cudaMemsetParams m{};
    m.dst = acc;
    m.elementSize = 4;
    m.width = 1;
    m.height = 1;
    REQUIRE_OK(cudaGraphAddMemsetNode(&zero, g, nullptr, 0, &m));
    cudaGraph_t body;
    cudaGraphNode_t loop = add_cond(g, &zero, 1, h, cudaGraphCondTypeWhile, 1, &body);
    void* args[] = {&counter, &acc, &h};
    add_kernel(body, nullptr, 0, reinterpret_cast<const void*>(cond_countdown), args);
    int v = 1000;
    void* add_args[] = {&acc, &v};
    add_kernel(g, &loop, 1, reinterpret_cast<const void*>(cond_add), add_args);
    cudaGraphNodeType t;
    EXPECT_OK(cudaGraphNodeGetType(loop, &t));
    EXPECT_TRUE(t == cudaGraphNodeTypeConditional, "a conditional node's type");
    size_t nodes = 0;
    EXPECT_OK(cudaGraphGetNodes(g, nullptr, &nodes));
    EXPECT_TRUE(nodes == 3, "the graph lists its 3 nodes (bodies' nodes are the bodies')");
    cudaGraphExec_t x;
    EXPECT_OK(cudaGraphInstantiate(&x, g, 0));
    for (int start : {5, 3, 1}) {
      write_int(counter, start);
      EXPECT_OK(cudaGraphLaunch(x, s));
      EXPECT_OK(cudaStreamSynchronize(s));
      const int want = start * (start + 1) / 2 + 1000;
      char what[96];
      snprintf(what, sizeof what, "while loop from %d: sum %d", start, want);
      EXPECT_TRUE(read_int(acc) == want && read_int(counter) == 0, what);
    }
    // The clone and child-graph uses CUDA refuses for graphs with conditional nodes.
    cudaGraph_t clone = nullptr;
    EXPECT_TRUE(cudaGraphClone(&clone, g) != cudaSuccess,
                "a graph with conditional nodes cannot be cloned");
    cudaGetLastError();
    EXPECT_OK(cudaGraphExecDestroy(x));
    EXPECT_OK(cudaGraphDestroy(g));
  }

  // 2. if/else, bodies filled by capture into them (cudaStreamBeginCaptureToGraph); no default
  // flag: a kernel before the node sets the handle from *sel.
  {
    cudaGraph_t g;
    REQUIRE_OK(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle h;
    EXPECT_OK(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
    void* set_args[] = {&h, &sel};
    cudaGraphNode_t set =
        add_kernel(g, nullptr, 0, reinterpret_cast<const void*>(cond_set), set_args);
    cudaGraph_t bodies[2];
    add_cond(g, &set, 1, h, cudaGraphCondTypeIf, 2, bodies);
    for (int b = 0; b < 2; ++b) {
      EXPECT_OK(cudaStreamBeginCaptureToGraph(s, bodies[b], nullptr, nullptr, 0,
                                              cudaStreamCaptureModeRelaxed));
      cond_add<<<1, 1, 0, s>>>(out, b == 0 ? 10 : 1);
      cond_add<<<1, 1, 0, s>>>(out, b == 0 ? 10 : 1);
      cudaGraph_t same;
      EXPECT_OK(cudaStreamEndCapture(s, &same));
      EXPECT_TRUE(same == bodies[b], "capture into a body graph ends with that graph");
    }
    cudaGraphExec_t x;
    EXPECT_OK(cudaGraphInstantiate(&x, g, 0));
    write_int(out, 0);
    for (int v : {1, 0, 7, 0, 0}) {
      write_int(sel, v);
      EXPECT_OK(cudaGraphLaunch(x, s));
      EXPECT_OK(cudaStreamSynchronize(s));
    }
    EXPECT_TRUE(read_int(out) == 2 * 20 + 3 * 2, "if/else ran the then-body twice, else 3 times");
    EXPECT_OK(cudaGraphExecDestroy(x));
    EXPECT_OK(cudaGraphDestroy(g));
  }

  // 3. switch of 3 bodies (a value past the last runs none), nested in a while loop that runs
  // twice per launch; launched 4 times.
  {
    cudaGraph_t g;
    REQUIRE_OK(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle loop_h, sw_h;
    EXPECT_OK(cudaGraphConditionalHandleCreate(&loop_h, g, 1, cudaGraphCondAssignDefault));
    EXPECT_OK(cudaGraphConditionalHandleCreate(&sw_h, g, 0, 0));
    cudaGraph_t loop_body;
    add_cond(g, nullptr, 0, loop_h, cudaGraphCondTypeWhile, 1, &loop_body);
    void* set_args[] = {&sw_h, &sel};
    cudaGraphNode_t set =
        add_kernel(loop_body, nullptr, 0, reinterpret_cast<const void*>(cond_set), set_args);
    cudaGraph_t cases[3];
    cudaGraphNode_t sw = add_cond(loop_body, &set, 1, sw_h, cudaGraphCondTypeSwitch, 3, cases);
    int adds[3] = {1, 100, 10000};
    for (int c = 0; c < 3; ++c) {
      void* a[] = {&out, &adds[c]};
      add_kernel(cases[c], nullptr, 0, reinterpret_cast<const void*>(cond_add), a);
    }
    void* count_args[] = {&counter, &acc, &loop_h};
    add_kernel(loop_body, &sw, 1, reinterpret_cast<const void*>(cond_countdown), count_args);
    cudaGraphExec_t x;
    EXPECT_OK(cudaGraphInstantiate(&x, g, 0));
    write_int(out, 0);
    for (int v : {0, 1, 2, 3}) {
      write_int(sel, v);
      write_int(counter, 2);
      EXPECT_OK(cudaGraphLaunch(x, s));
    }
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT_TRUE(read_int(out) == 2 * (1 + 100 + 10000),
                "switch inside while: each case twice, none for 3");
    EXPECT_OK(cudaGraphExecDestroy(x));
    EXPECT_OK(cudaGraphDestroy(g));
  }

  // 4. The driver's form (entry points found through the runtime, as libraries do):
  // cuGraphConditionalHandleCreate and cuGraphAddNode, an if node whose handle's default (1)
  // runs its body at every launch.
  {
    cudaGraph_t g;
    REQUIRE_OK(cudaGraphCreate(&g, 0));
    CUresult (*get_ctx)(CUcontext*) = nullptr;
    CUresult (*create)(CUgraphConditionalHandle*, CUgraph, CUcontext, unsigned, unsigned) = nullptr;
    CUresult (*add)(CUgraphNode*, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,
                    CUgraphNodeParams*) = nullptr;
    cudaDriverEntryPointQueryResult q;
    REQUIRE_OK(cudaGetDriverEntryPointByVersion(
        "cuCtxGetCurrent", reinterpret_cast<void**>(&get_ctx), 12000, cudaEnableDefault, &q));
    REQUIRE_OK(cudaGetDriverEntryPointByVersion("cuGraphConditionalHandleCreate",
                                                reinterpret_cast<void**>(&create), 12030,
                                                cudaEnableDefault, &q));
    REQUIRE_OK(cudaGetDriverEntryPointByVersion("cuGraphAddNode", reinterpret_cast<void**>(&add),
                                                12030, cudaEnableDefault, &q));
    CUcontext ctx = nullptr;
    EXPECT_TRUE(get_ctx(&ctx) == CUDA_SUCCESS, "cuCtxGetCurrent");
    CUgraphConditionalHandle h = 0;
    EXPECT_TRUE(create(&h, reinterpret_cast<CUgraph>(g), ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT) ==
                    CUDA_SUCCESS,
                "cuGraphConditionalHandleCreate");
    CUgraphNodeParams p{};
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = h;
    p.conditional.type = CU_GRAPH_COND_TYPE_IF;
    p.conditional.size = 1;
    p.conditional.ctx = ctx;
    CUgraphNode node = nullptr;
    EXPECT_TRUE(add(&node, reinterpret_cast<CUgraph>(g), nullptr, nullptr, 0, &p) == CUDA_SUCCESS,
                "cuGraphAddNode (conditional)");
    cudaGraph_t body = reinterpret_cast<cudaGraph_t>(p.conditional.phGraph_out[0]);
    int v = 5;
    void* a[] = {&out, &v};
    add_kernel(body, nullptr, 0, reinterpret_cast<const void*>(cond_add), a);
    cudaGraphExec_t x;
    EXPECT_OK(cudaGraphInstantiate(&x, g, 0));
    write_int(out, 0);
    for (int i = 0; i < 3; ++i) EXPECT_OK(cudaGraphLaunch(x, s));
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT_TRUE(read_int(out) == 15, "the driver's if node ran its body at each of 3 launches");
    EXPECT_OK(cudaGraphExecDestroy(x));
    EXPECT_OK(cudaGraphDestroy(g));
  }

  // 5. What CUDA refuses: a while node of 2 bodies, bad flags.
  {
    cudaGraph_t g;
    REQUIRE_OK(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle h;
    cudaGraphNodeParams p{};
    p.type = cudaGraphNodeTypeConditional;
    cudaGraphNode_t node;
    cudaGraphConditionalHandle mine;
    EXPECT_OK(cudaGraphConditionalHandleCreate(&mine, g, 0, 0));
    p.conditional.handle = mine;
    p.conditional.type = cudaGraphCondTypeWhile;
    p.conditional.size = 2;
    EXPECT_ERR(cudaGraphAddNode(&node, g, nullptr, nullptr, 0, &p), cudaErrorInvalidValue);
    EXPECT_ERR(cudaGraphConditionalHandleCreate(&h, g, 0, 2), cudaErrorInvalidValue);
    cudaGetLastError();
    EXPECT_OK(cudaGraphDestroy(g));
  }

  // 6. Rebuilds: a graph instantiated again after its first executable graph went, a kernel
  // node's parameters changed in the executable graph, and a launch whose executable graph and
  // graph are destroyed before the stream reached it.
  {
    cudaGraph_t g;
    REQUIRE_OK(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle h;
    EXPECT_OK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
    int one = 1;
    void* add_args[] = {&out, &one};
    cudaGraphNode_t first =
        add_kernel(g, nullptr, 0, reinterpret_cast<const void*>(cond_add), add_args);
    cudaGraph_t body;
    add_cond(g, &first, 1, h, cudaGraphCondTypeWhile, 1, &body);
    void* args[] = {&counter, &acc, &h};
    add_kernel(body, nullptr, 0, reinterpret_cast<const void*>(cond_countdown), args);
    for (int round = 0; round < 2; ++round) {
      write_int(out, 0);
      write_int(acc, 0);
      write_int(counter, 4);
      cudaGraphExec_t x;
      EXPECT_OK(cudaGraphInstantiate(&x, g, 0));
      EXPECT_OK(cudaGraphLaunch(x, s));
      EXPECT_OK(cudaStreamSynchronize(s));
      EXPECT_TRUE(read_int(out) == 1 && read_int(acc) == 10,
                  round ? "instantiated again: the loop ran 4 times" : "the loop ran 4 times");
      EXPECT_OK(cudaGraphExecDestroy(x));
    }
    cudaGraphExec_t x;
    EXPECT_OK(cudaGraphInstantiate(&x, g, 0));
    int seven = 7;
    void* seven_args[] = {&out, &seven};
    cudaKernelNodeParams k{};
    k.func = reinterpret_cast<void*>(cond_add);
    k.gridDim = dim3(1);
    k.blockDim = dim3(1);
    k.kernelParams = seven_args;
    EXPECT_OK(cudaGraphExecKernelNodeSetParams(x, first, &k));
    write_int(out, 0);
    write_int(acc, 0);
    write_int(counter, 2);
    EXPECT_OK(cudaGraphLaunch(x, s));
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT_TRUE(read_int(out) == 7 && read_int(acc) == 3,
                "a kernel node changed in the executable graph, the loop around it intact");
    write_int(acc, 0);
    write_int(counter, 3);
    EXPECT_OK(cudaGraphLaunch(x, s));
    EXPECT_OK(cudaGraphExecDestroy(x));
    EXPECT_OK(cudaGraphDestroy(g));
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT_TRUE(read_int(acc) == 6 && read_int(counter) == 0,
                "a launch outlives its executable graph and graph");
  }

  // 7. A conditional node added to a graph while it is being captured (cudaStreamGetCaptureInfo,
  // cudaGraphAddNode, cudaStreamUpdateCaptureDependencies), its body captured on another stream
  // and ended with a null graph, as CUDA's samples do; launched on the legacy stream.
  {
    cudaStream_t outer, inner;
    REQUIRE_OK(cudaStreamCreate(&outer));
    REQUIRE_OK(cudaStreamCreate(&inner));
    EXPECT_OK(cudaStreamBeginCapture(outer, cudaStreamCaptureModeGlobal));
    cond_add<<<1, 1, 0, outer>>>(out, 1);
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaGraph_t g = nullptr;
    const cudaGraphNode_t* deps = nullptr;
    size_t n = 0;
    EXPECT_OK(cudaStreamGetCaptureInfo(outer, &st, nullptr, &g, &deps, nullptr, &n));
    EXPECT_TRUE(st == cudaStreamCaptureStatusActive && g && n == 1 && deps,
                "the capture's graph and the node its next node depends on");
    cudaGraphConditionalHandle h = 0;
    EXPECT_OK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams p{};
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = h;
    p.conditional.type = cudaGraphCondTypeWhile;
    p.conditional.size = 1;
    cudaGraphNode_t node = nullptr;
    EXPECT_OK(cudaGraphAddNode(&node, g, deps, nullptr, n, &p));
    EXPECT_OK(cudaStreamBeginCaptureToGraph(inner, p.conditional.phGraph_out[0], nullptr, nullptr,
                                            0, cudaStreamCaptureModeRelaxed));
    cond_countdown<<<1, 1, 0, inner>>>(counter, acc, h);
    EXPECT_OK(cudaStreamEndCapture(inner, nullptr));
    EXPECT_OK(cudaStreamUpdateCaptureDependencies(outer, &node, nullptr, 1,
                                                  cudaStreamSetCaptureDependencies));
    cond_add<<<1, 1, 0, outer>>>(out, 100);
    cudaGraph_t captured = nullptr;
    EXPECT_OK(cudaStreamEndCapture(outer, &captured));
    EXPECT_TRUE(captured == g, "the capture ends with the graph the node was added to");
    cudaGraphExec_t x;
    EXPECT_OK(cudaGraphInstantiate(&x, captured, 0));
    write_int(out, 0);
    write_int(acc, 0);
    write_int(counter, 3);
    EXPECT_OK(cudaGraphLaunch(x, 0));
    EXPECT_OK(cudaDeviceSynchronize());
    EXPECT_TRUE(read_int(out) == 101 && read_int(acc) == 6 && read_int(counter) == 0,
                "a loop added during capture runs between the captured kernels");
    EXPECT_OK(cudaGraphExecDestroy(x));
    EXPECT_OK(cudaGraphDestroy(captured));
    cudaStreamDestroy(inner);
    cudaStreamDestroy(outer);
  }

  cudaFree(counter);
  cudaFree(acc);
  cudaFree(sel);
  cudaFree(out);
  cudaStreamDestroy(s);
  return finish("graphs_cond");
}
