// Graph queries (edges, dependent nodes, nodes in a clone, event and host node parameters,
// instantiation flags, a DOT file), user objects owned by graphs and executable graphs, and
// stream ids.  Prints the same lines natively and through rgpu.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"

extern "C" __global__ void add_one(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

static bool all_equal(const int* d, int n, int want) {
  std::vector<int> h(n);
  if (cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess) return false;
  for (int v : h)
    if (v != want) return false;
  return true;
}
static void count_call(void* p) { ++*static_cast<int*>(p); }

static int g_destroyed = 0;
static void destroyed(void* p) { g_destroyed += *static_cast<int*>(p); }
static void noop(void*) {}

int main() {
  cudaStream_t s, s2;
  REQUIRE_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  REQUIRE_OK(cudaStreamCreate(&s2));
  cudaEvent_t ev;
  REQUIRE_OK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));

  // 1. a -> b, a -> c, b -> d, c -> d.
  cudaGraph_t g;
  REQUIRE_OK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t a, b, c, d;
  cudaHostNodeParams hp = {noop, &g_destroyed};
  EXPECT_OK(cudaGraphAddEventRecordNode(&a, g, nullptr, 0, ev));
  EXPECT_OK(cudaGraphAddHostNode(&b, g, &a, 1, &hp));
  EXPECT_OK(cudaGraphAddEventWaitNode(&c, g, &a, 1, ev));
  cudaGraphNode_t bc[2] = {b, c};
  EXPECT_OK(cudaGraphAddEmptyNode(&d, g, bc, 2));

  size_t n = 0;
  EXPECT_OK(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &n));
  EXPECT_TRUE(n == 4, "the graph has 4 edges");
  cudaGraphNode_t from[6], to[6];
  n = 6;
  EXPECT_OK(cudaGraphGetEdges(g, from, to, nullptr, &n));
  EXPECT_TRUE(n == 4, "4 edges returned into room for 6");
  EXPECT_TRUE(from[4] == nullptr && to[5] == nullptr, "the rest is NULL");
  int seen = 0;
  for (size_t i = 0; i < 4; ++i) {
    if (from[i] == a && to[i] == b) seen |= 1;
    if (from[i] == a && to[i] == c) seen |= 2;
    if (from[i] == b && to[i] == d) seen |= 4;
    if (from[i] == c && to[i] == d) seen |= 8;
  }
  EXPECT_TRUE(seen == 15, "every edge is reported");
  n = 0;
  EXPECT_OK(cudaGraphNodeGetDependentNodes(a, nullptr, nullptr, &n));
  EXPECT_TRUE(n == 2, "a has 2 dependent nodes");
  cudaGraphNode_t dep[2];
  EXPECT_OK(cudaGraphNodeGetDependentNodes(a, dep, nullptr, &n));
  EXPECT_TRUE((dep[0] == b && dep[1] == c) || (dep[0] == c && dep[1] == b), "they are b and c");
  n = 2;
  EXPECT_OK(cudaGraphNodeGetDependentNodes(d, dep, nullptr, &n));
  EXPECT_TRUE(n == 0, "d has none");

  // 2. Node parameters.
  cudaEvent_t got = nullptr;
  EXPECT_OK(cudaGraphEventRecordNodeGetEvent(a, &got));
  EXPECT_TRUE(got == ev, "the record node's event");
  got = nullptr;
  EXPECT_OK(cudaGraphEventWaitNodeGetEvent(c, &got));
  EXPECT_TRUE(got == ev, "the wait node's event");
  EXPECT_ERR(cudaGraphEventWaitNodeGetEvent(a, &got), cudaErrorInvalidValue);
  cudaGetLastError();
  cudaHostNodeParams hq = {};
  EXPECT_OK(cudaGraphHostNodeGetParams(b, &hq));
  EXPECT_TRUE(hq.fn == noop && hq.userData == &g_destroyed, "the host node's function and data");

  // 3. Clones.
  cudaGraph_t cl;
  EXPECT_OK(cudaGraphClone(&cl, g));
  cudaGraphNode_t cb = nullptr, cc = nullptr;
  EXPECT_OK(cudaGraphNodeFindInClone(&cb, b, cl));
  EXPECT_OK(cudaGraphNodeFindInClone(&cc, c, cl));
  EXPECT_TRUE(cb && cb != b, "the clone has its own node for b");
  cudaGraphNodeType t;
  EXPECT_OK(cudaGraphNodeGetType(cb, &t));
  EXPECT_TRUE(t == cudaGraphNodeTypeHost, "b's clone is a host node");
  hq = {};
  EXPECT_OK(cudaGraphHostNodeGetParams(cb, &hq));
  EXPECT_TRUE(hq.fn == noop, "the clone keeps the host function");
  got = nullptr;
  EXPECT_OK(cudaGraphEventWaitNodeGetEvent(cc, &got));
  EXPECT_TRUE(got == ev, "the clone keeps the event");
  cudaGraph_t other;
  EXPECT_OK(cudaGraphCreate(&other, 0));
  EXPECT_ERR(cudaGraphNodeFindInClone(&cb, b, other), cudaErrorInvalidValue);
  cudaGetLastError();

  // 4. Flags of an executable graph.
  cudaGraphExec_t x, x2;
  EXPECT_OK(cudaGraphInstantiateWithFlags(&x, g, cudaGraphInstantiateFlagAutoFreeOnLaunch));
  unsigned long long flags = 99;
  EXPECT_OK(cudaGraphExecGetFlags(x, &flags));
  EXPECT_TRUE(flags == cudaGraphInstantiateFlagAutoFreeOnLaunch, "the instantiation flags");
  EXPECT_OK(cudaGraphInstantiate(&x2, g, 0));
  EXPECT_OK(cudaGraphExecGetFlags(x2, &flags));
  EXPECT_TRUE(flags == 0, "no flags");
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_OK(cudaGraphExecDestroy(x2));

  // 5. A DOT file of the graph.
  char path[] = "/tmp/rgpu_graph_dot_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE_OK(fd >= 0 ? cudaSuccess : cudaErrorUnknown);
  close(fd);
  EXPECT_OK(cudaGraphDebugDotPrint(g, path, 0));
  std::ifstream in(path);
  std::stringstream dot;
  dot << in.rdbuf();
  const std::string text = dot.str();
  size_t arrows = 0;
  for (size_t p = text.find("->"); p != std::string::npos; p = text.find("->", p + 2)) ++arrows;
  EXPECT_TRUE(text.find("digraph") != std::string::npos, "the DOT file is a digraph");
  EXPECT_TRUE(arrows >= 4, "the DOT file has the edges");
  unlink(path);
  EXPECT_ERR(cudaGraphDebugDotPrint(g, "/nonexistent-dir/x.dot", 0), cudaErrorOperatingSystem);
  cudaGetLastError();

  // 6. User objects: the destructor runs once the last reference (caller's, graphs',
  // executable graphs') is released.
  int one = 1;
  cudaUserObject_t uo;
  EXPECT_OK(cudaUserObjectCreate(&uo, &one, destroyed, 1, cudaUserObjectNoDestructorSync));
  EXPECT_OK(cudaUserObjectRetain(uo, 2));
  EXPECT_OK(cudaUserObjectRelease(uo, 2));
  EXPECT_TRUE(g_destroyed == 0, "alive while the caller holds a reference");
  EXPECT_OK(cudaGraphRetainUserObject(g, uo, 1, cudaGraphUserObjectMove));  // caller's ref moves
  cudaGraph_t g2;
  EXPECT_OK(cudaGraphClone(&g2, g));
  EXPECT_OK(cudaGraphInstantiate(&x2, g, 0));
  EXPECT_OK(cudaGraphDestroy(g));
  EXPECT_TRUE(g_destroyed == 0, "the clone and the executable graph still hold it");
  EXPECT_OK(cudaGraphReleaseUserObject(g2, uo, 1));
  EXPECT_TRUE(g_destroyed == 0, "the executable graph still holds it");
  EXPECT_OK(cudaGraphExecDestroy(x2));
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT_TRUE(g_destroyed == 1, "destroyed once with the last reference");
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(g2));
  EXPECT_OK(cudaGraphDestroy(cl));
  EXPECT_OK(cudaGraphDestroy(other));
  EXPECT_ERR(cudaUserObjectCreate(&uo, &one, destroyed, 1, 0), cudaErrorInvalidValue);
  cudaGetLastError();

  // 7. Stream ids: stable per stream, different between streams.
  unsigned long long i1 = 0, i1b = 0, i2 = 0, i0 = 0;
  EXPECT_OK(cudaStreamGetId(s, &i1));
  EXPECT_OK(cudaStreamGetId(s, &i1b));
  EXPECT_OK(cudaStreamGetId(s2, &i2));
  EXPECT_OK(cudaStreamGetId(cudaStreamLegacy, &i0));
  EXPECT_TRUE(i1 == i1b, "a stream's id is stable");
  EXPECT_TRUE(i1 != i2 && i1 != i0 && i2 != i0, "streams have different ids");

  // 8. Node parameter setters: on an executable graph (the graph keeps its own), on the graph
  // (later instantiations take them).
  const int m = 64;
  const size_t bytes = m * sizeof(int);
  int *d1, *d2, *d3;
  REQUIRE_OK(cudaMalloc(&d1, bytes));
  REQUIRE_OK(cudaMalloc(&d2, bytes));
  REQUIRE_OK(cudaMalloc(&d3, bytes));
  REQUIRE_OK(cudaMemset(d1, 0, bytes));
  REQUIRE_OK(cudaMemset(d2, 0, bytes));
  REQUIRE_OK(cudaMemset(d3, 0, bytes));
  REQUIRE_OK(cudaDeviceSynchronize());
  int calls1 = 0, calls2 = 0, len = m;
  cudaGraph_t pg;
  REQUIRE_OK(cudaGraphCreate(&pg, 0));
  cudaGraphNode_t mn, kn, hn;
  cudaMemsetParams mp = {};
  mp.dst = d1, mp.value = 0, mp.elementSize = 1, mp.width = bytes, mp.height = 1;
  EXPECT_OK(cudaGraphAddMemsetNode(&mn, pg, nullptr, 0, &mp));
  void* args1[] = {&d1, &len};
  cudaKernelNodeParams kp = {};
  kp.func = reinterpret_cast<void*>(add_one);
  kp.gridDim = dim3(1), kp.blockDim = dim3(m), kp.kernelParams = args1;
  EXPECT_OK(cudaGraphAddKernelNode(&kn, pg, &mn, 1, &kp));
  cudaHostNodeParams cp = {count_call, &calls1};
  EXPECT_OK(cudaGraphAddHostNode(&hn, pg, &kn, 1, &cp));
  cudaGraphExec_t px;
  EXPECT_OK(cudaGraphInstantiate(&px, pg, 0));
  EXPECT_OK(cudaGraphLaunch(px, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d1, m, 1) && calls1 == 1, "the graph as built");

  void* args2[] = {&d2, &len};
  cudaKernelNodeParams kp2 = kp;
  kp2.kernelParams = args2;
  EXPECT_OK(cudaGraphExecKernelNodeSetParams(px, kn, &kp2));
  cudaHostNodeParams cp2 = {count_call, &calls2};
  EXPECT_OK(cudaGraphExecHostNodeSetParams(px, hn, &cp2));
  cudaMemsetParams mp2 = mp;
  mp2.value = 7;
  EXPECT_OK(cudaGraphExecMemsetNodeSetParams(px, mn, &mp2));
  EXPECT_OK(cudaGraphLaunch(px, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d1, m, 0x07070707), "the executable graph's memset takes the new value");
  EXPECT_TRUE(all_equal(d2, m, 1), "the executable graph's kernel takes the new arguments");
  EXPECT_TRUE(calls1 == 1 && calls2 == 1, "the executable graph's host node calls the new one");
  hq = {};
  EXPECT_OK(cudaGraphHostNodeGetParams(hn, &hq));
  EXPECT_TRUE(hq.userData == &calls1, "the graph's host node is unchanged");

  cudaGraphExec_t px2;
  EXPECT_OK(cudaGraphInstantiate(&px2, pg, 0));
  EXPECT_OK(cudaGraphLaunch(px2, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d1, m, 1) && all_equal(d2, m, 1) && calls1 == 2,
              "the graph itself kept its parameters");
  EXPECT_OK(cudaGraphKernelNodeSetParams(kn, &kp2));
  EXPECT_OK(cudaGraphHostNodeSetParams(hn, &cp2));
  EXPECT_OK(cudaGraphExecDestroy(px2));
  EXPECT_OK(cudaGraphInstantiate(&px2, pg, 0));
  EXPECT_OK(cudaGraphLaunch(px2, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d1, m, 0) && all_equal(d2, m, 2) && calls2 == 2 && calls1 == 2,
              "a graph's new parameters reach a later instantiation");
  EXPECT_ERR(cudaGraphKernelNodeSetParams(hn, &kp), cudaErrorInvalidValue);
  cudaGetLastError();
  EXPECT_ERR(cudaGraphMemsetNodeSetParams(kn, &mp), cudaErrorInvalidValue);
  cudaGetLastError();
  cudaGraphNodeParams gp = {};
  gp.type = cudaGraphNodeTypeHost;
  gp.host.fn = count_call;
  gp.host.userData = &calls1;
  EXPECT_OK(cudaGraphExecNodeSetParams(px, hn, &gp));
  EXPECT_OK(cudaGraphLaunch(px, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(calls1 == 3 && calls2 == 2, "cudaGraphExecNodeSetParams of a host node");
  EXPECT_ERR(cudaGraphNodeSetParams(kn, &gp), cudaErrorInvalidValue);
  cudaGetLastError();
  gp.host.userData = &calls2;
  EXPECT_OK(cudaGraphNodeSetParams(hn, &gp));

  // Copies: 1-D and 3-D parameters, device to device and host to device.
  cudaGraph_t cg;
  REQUIRE_OK(cudaGraphCreate(&cg, 0));
  cudaGraphNode_t cn;
  EXPECT_OK(cudaGraphAddMemcpyNode1D(&cn, cg, nullptr, 0, d3, d1, bytes, cudaMemcpyDeviceToDevice));
  cudaGraphExec_t cx;
  EXPECT_OK(cudaGraphInstantiate(&cx, cg, 0));
  EXPECT_OK(cudaGraphExecMemcpyNodeSetParams1D(cx, cn, d3, d2, bytes, cudaMemcpyDeviceToDevice));
  EXPECT_OK(cudaGraphLaunch(cx, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d3, m, 3), "the executable copy node copies from the new source");
  std::vector<int> h42(m, 42);
  EXPECT_OK(cudaGraphMemcpyNodeSetParams1D(cn, d3, h42.data(), bytes, cudaMemcpyHostToDevice));
  cudaGraphExec_t cx2;
  EXPECT_OK(cudaGraphInstantiate(&cx2, cg, 0));
  EXPECT_OK(cudaGraphLaunch(cx2, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d3, m, 42), "the copy node now copies from host memory");
  cudaMemcpy3DParms p3 = {};
  p3.srcPtr = make_cudaPitchedPtr(d1, bytes, bytes, 1);
  p3.dstPtr = make_cudaPitchedPtr(d3, bytes, bytes, 1);
  p3.extent = make_cudaExtent(bytes, 1, 1);
  p3.kind = cudaMemcpyDeviceToDevice;
  EXPECT_OK(cudaGraphMemcpyNodeSetParams(cn, &p3));
  EXPECT_OK(cudaGraphExecDestroy(cx2));
  EXPECT_OK(cudaGraphInstantiate(&cx2, cg, 0));
  EXPECT_OK(cudaGraphLaunch(cx2, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d3, m, 0x07070707), "3-D parameters");

  // Events.
  cudaEvent_t ev2;
  REQUIRE_OK(cudaEventCreateWithFlags(&ev2, cudaEventDisableTiming));
  cudaGraph_t evg;
  REQUIRE_OK(cudaGraphCreate(&evg, 0));
  cudaGraphNode_t rn, wn;
  EXPECT_OK(cudaGraphAddEventRecordNode(&rn, evg, nullptr, 0, ev));
  EXPECT_OK(cudaGraphAddEventWaitNode(&wn, evg, &rn, 1, ev));
  cudaGraphExec_t evx;
  EXPECT_OK(cudaGraphInstantiate(&evx, evg, 0));
  EXPECT_OK(cudaGraphEventRecordNodeSetEvent(rn, ev2));
  EXPECT_OK(cudaGraphEventWaitNodeSetEvent(wn, ev2));
  got = nullptr;
  EXPECT_OK(cudaGraphEventRecordNodeGetEvent(rn, &got));
  EXPECT_TRUE(got == ev2, "the record node's new event");
  EXPECT_OK(cudaGraphEventWaitNodeGetEvent(wn, &got));
  EXPECT_TRUE(got == ev2, "the wait node's new event");
  EXPECT_OK(cudaGraphExecEventRecordNodeSetEvent(evx, rn, ev2));
  EXPECT_OK(cudaGraphExecEventWaitNodeSetEvent(evx, wn, ev2));
  EXPECT_OK(cudaGraphLaunch(evx, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_OK(cudaEventQuery(ev2));
  EXPECT_ERR(cudaGraphEventWaitNodeSetEvent(rn, ev2), cudaErrorInvalidValue);
  cudaGetLastError();

  EXPECT_OK(cudaGraphExecDestroy(evx));
  EXPECT_OK(cudaGraphExecDestroy(cx));
  EXPECT_OK(cudaGraphExecDestroy(cx2));
  EXPECT_OK(cudaGraphExecDestroy(px));
  EXPECT_OK(cudaGraphExecDestroy(px2));
  EXPECT_OK(cudaGraphDestroy(evg));
  EXPECT_OK(cudaGraphDestroy(cg));
  EXPECT_OK(cudaGraphDestroy(pg));
  cudaEventDestroy(ev2);
  cudaFree(d1);
  cudaFree(d2);
  cudaFree(d3);
  cudaEventDestroy(ev);
  cudaStreamDestroy(s);
  cudaStreamDestroy(s2);
  if (g_failures) {
    printf("graphs_query: %d failed\n", g_failures);
    return 1;
  }
  printf("graphs_query: passed\n");
  return 0;
}
