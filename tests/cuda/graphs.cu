// CUDA graphs: stream capture (replayed 100 times), a fork/join capture across streams, illegal
// calls during capture, an explicit graph with each node kind rgpu supports, host nodes called in
// order, executable-graph update, clone and child graphs.  Prints the same lines natively and
// through rgpu.
#include <vector>

#include "check.h"

extern "C" __global__ void add_one(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}
extern "C" __global__ void bump(int* c) { *c += 1; }

static std::vector<int> g_order;
static void record_call(void* p) { g_order.push_back(static_cast<int>(reinterpret_cast<long>(p))); }
static void count_call(void* p) { ++*static_cast<int*>(p); }

static bool all_equal(const int* d, int n, int want) {
  std::vector<int> h(n);
  if (cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess) return false;
  for (int v : h)
    if (v != want) return false;
  return true;
}

int main() {
  const int n = 256;
  int *d = nullptr, *counter = nullptr, *d2 = nullptr;
  REQUIRE_OK(cudaMalloc(&d, n * sizeof(int)));
  REQUIRE_OK(cudaMalloc(&d2, n * sizeof(int)));
  REQUIRE_OK(cudaMalloc(&counter, sizeof(int)));
  REQUIRE_OK(cudaMemset(counter, 0, sizeof(int)));
  cudaStream_t s, s2;
  REQUIRE_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  REQUIRE_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  // The memset above is on the legacy stream, which non-blocking streams do not wait for.
  REQUIRE_OK(cudaDeviceSynchronize());

  // 1. Capture a sequence, replay it 100 times.
  int calls = 0;
  std::vector<int> host(n, 5);
  cudaStreamCaptureStatus st;
  EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EXPECT_OK(cudaStreamIsCapturing(s, &st));
  EXPECT_TRUE(st == cudaStreamCaptureStatusActive, "the stream is capturing");
  EXPECT_OK(cudaMemcpyAsync(d, host.data(), n * sizeof(int), cudaMemcpyHostToDevice, s));
  add_one<<<(n + 127) / 128, 128, 0, s>>>(d, n);
  add_one<<<(n + 127) / 128, 128, 0, s>>>(d, n);
  bump<<<1, 1, 0, s>>>(counter);
  EXPECT_OK(cudaLaunchHostFunc(s, count_call, &calls));
  cudaGraph_t g = nullptr;
  EXPECT_OK(cudaStreamEndCapture(s, &g));
  EXPECT_OK(cudaStreamIsCapturing(s, &st));
  EXPECT_TRUE(st == cudaStreamCaptureStatusNone, "the capture ended");
  size_t count = 0;
  EXPECT_OK(cudaGraphGetNodes(g, nullptr, &count));
  EXPECT_TRUE(count == 5, "the captured graph has 5 nodes");
  EXPECT_TRUE(calls == 0, "nothing ran during capture");
  cudaGraphExec_t x = nullptr;
  EXPECT_OK(cudaGraphInstantiate(&x, g, 0));
  for (int i = 0; i < 100; ++i) cudaGraphLaunch(x, s);
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d, n, 7), "each replay copied and added twice");
  EXPECT_TRUE(all_equal(counter, 1, 100), "100 replays bumped the counter 100 times");
  EXPECT_TRUE(calls == 100, "the captured host function ran once per replay");
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(g));

  // 2. Fork and join across streams with events.
  cudaEvent_t e1, e2;
  REQUIRE_OK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming));
  REQUIRE_OK(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming));
  EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  EXPECT_OK(cudaMemsetAsync(d2, 0, n * sizeof(int), s));
  EXPECT_OK(cudaEventRecord(e1, s));
  EXPECT_OK(cudaStreamWaitEvent(s2, e1, 0));
  EXPECT_OK(cudaStreamIsCapturing(s2, &st));
  EXPECT_TRUE(st == cudaStreamCaptureStatusActive, "the forked stream joined the capture");
  add_one<<<(n + 127) / 128, 128, 0, s2>>>(d2, n);
  EXPECT_OK(cudaEventRecord(e2, s2));
  EXPECT_OK(cudaStreamWaitEvent(s, e2, 0));
  add_one<<<(n + 127) / 128, 128, 0, s>>>(d2, n);
  EXPECT_OK(cudaStreamEndCapture(s, &g));
  EXPECT_OK(cudaStreamIsCapturing(s2, &st));
  EXPECT_TRUE(st == cudaStreamCaptureStatusNone, "the forked stream left the capture");
  EXPECT_OK(cudaGraphInstantiate(&x, g, 0));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d2, n, 2), "fork/join graph ran both branches");
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(g));

  // 3. A fork not joined back; a synchronization during capture.
  EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EXPECT_OK(cudaEventRecord(e1, s));
  EXPECT_OK(cudaStreamWaitEvent(s2, e1, 0));
  add_one<<<1, 1, 0, s2>>>(d2, 1);
  EXPECT_ERR(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureUnjoined);
  EXPECT_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EXPECT_ERR(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  EXPECT_ERR(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();

  // 4. An explicit graph: memset -> kernel -> copy -> host, plus empty and event nodes.
  calls = 0;
  cudaGraph_t eg;
  EXPECT_OK(cudaGraphCreate(&eg, 0));
  cudaMemsetParams mp = {};
  mp.dst = d;
  mp.value = 0;
  mp.elementSize = 1;
  mp.width = n * sizeof(int);
  mp.height = 1;
  cudaGraphNode_t nset, nk, ncopy, nhost, nempty, nrec;
  EXPECT_OK(cudaGraphAddMemsetNode(&nset, eg, nullptr, 0, &mp));
  int nn = n;
  void* kargs[] = {&d, &nn};
  cudaKernelNodeParams kp = {};
  kp.func = reinterpret_cast<void*>(add_one);
  kp.gridDim = dim3((n + 127) / 128);
  kp.blockDim = dim3(128);
  kp.kernelParams = kargs;
  EXPECT_OK(cudaGraphAddKernelNode(&nk, eg, &nset, 1, &kp));
  EXPECT_OK(cudaGraphAddMemcpyNode1D(&ncopy, eg, &nk, 1, d2, d, n * sizeof(int),
                                     cudaMemcpyDeviceToDevice));
  cudaHostNodeParams hp = {count_call, &calls};
  EXPECT_OK(cudaGraphAddHostNode(&nhost, eg, &ncopy, 1, &hp));
  EXPECT_OK(cudaGraphAddEmptyNode(&nempty, eg, &nhost, 1));
  EXPECT_OK(cudaGraphAddEventRecordNode(&nrec, eg, &nempty, 1, e1));
  cudaGraphNodeType type;
  EXPECT_OK(cudaGraphNodeGetType(nk, &type));
  EXPECT_TRUE(type == cudaGraphNodeTypeKernel, "the kernel node's type");
  EXPECT_OK(cudaGraphNodeGetType(nhost, &type));
  EXPECT_TRUE(type == cudaGraphNodeTypeHost, "the host node's type");
  size_t roots = 0;
  EXPECT_OK(cudaGraphGetRootNodes(eg, nullptr, &roots));
  EXPECT_TRUE(roots == 1, "one root node");
  EXPECT_OK(cudaGraphInstantiate(&x, eg, 0));
  for (int i = 0; i < 3; ++i) EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaEventSynchronize(e1));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(d2, n, 1), "memset, kernel and copy nodes ran in order");
  EXPECT_TRUE(calls == 3, "the host node ran once per launch");

  // 5. Exec update: the same shape with another memset value; then a different shape.
  cudaGraph_t eg2;
  EXPECT_OK(cudaGraphClone(&eg2, eg));
  cudaGraphExecUpdateResultInfo info;
  EXPECT_OK(cudaGraphExecUpdate(x, eg2, &info));
  cudaGraphNode_t extra;
  EXPECT_OK(cudaGraphAddEmptyNode(&extra, eg2, nullptr, 0));
  EXPECT_ERR(cudaGraphExecUpdate(x, eg2, &info), cudaErrorGraphExecUpdateFailure);
  cudaGetLastError();
  EXPECT_OK(cudaGraphExecDestroy(x));

  // 6. Host nodes are called in order; a child graph.
  cudaGraph_t hg, parent;
  EXPECT_OK(cudaGraphCreate(&hg, 0));
  cudaGraphNode_t prev = nullptr;
  for (long i = 0; i < 5; ++i) {
    cudaHostNodeParams p = {record_call, reinterpret_cast<void*>(i)};
    cudaGraphNode_t node;
    EXPECT_OK(cudaGraphAddHostNode(&node, hg, prev ? &prev : nullptr, prev ? 1 : 0, &p));
    prev = node;
  }
  EXPECT_OK(cudaGraphCreate(&parent, 0));
  cudaGraphNode_t child, after;
  EXPECT_OK(cudaGraphAddChildGraphNode(&child, parent, nullptr, 0, hg));
  cudaHostNodeParams last = {record_call, reinterpret_cast<void*>(9L)};
  EXPECT_OK(cudaGraphAddHostNode(&after, parent, &child, 1, &last));
  EXPECT_OK(cudaGraphInstantiate(&x, parent, 0));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  std::vector<int> want = {0, 1, 2, 3, 4, 9, 0, 1, 2, 3, 4, 9};
  EXPECT_TRUE(g_order == want, "host nodes ran in order, the child graph's first");
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(parent));
  EXPECT_OK(cudaGraphDestroy(hg));
  EXPECT_OK(cudaGraphDestroy(eg2));
  EXPECT_OK(cudaGraphDestroy(eg));

  cudaEventDestroy(e1);
  cudaEventDestroy(e2);
  cudaStreamDestroy(s);
  cudaStreamDestroy(s2);
  cudaFree(d);
  cudaFree(d2);
  cudaFree(counter);
  if (g_failures) {
    printf("graphs: %d failed\n", g_failures);
    return 1;
  }
  printf("graphs: passed\n");
  return 0;
}
