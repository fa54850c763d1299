// Graph queries (edges, dependent nodes, nodes in a clone, event and host node parameters,
// instantiation flags, a DOT file), user objects owned by graphs and executable graphs, and
// stream ids.  Prints the same lines natively and through rgpu.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "check.h"

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
  EXPECT_ERR(cudaGraphReleaseUserObject(g2, uo, 1), cudaErrorInvalidValue);
  cudaGetLastError();
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
