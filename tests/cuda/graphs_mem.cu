// Graph memory nodes: allocation and free nodes added explicitly and by stream capture
// (cudaMallocAsync / cudaFreeAsync), their parameters, the lifetime of an allocation that outlives
// its launch (freed by cudaFreeAsync, cudaFree or cudaGraphInstantiateFlagAutoFreeOnLaunch), the
// restrictions on graphs with memory nodes, and the graph memory attributes; memset nodes of 2-
// and 4-byte elements and 2-D; a 3-D copy node; kernel node attributes; capture modes across
// threads.  Prints the same lines natively and
// through rgpu.
#include <cstdio>
#include <thread>
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

static cudaMemAllocNodeParams alloc_params(size_t bytes) {
  cudaMemAllocNodeParams p = {};
  p.poolProps.allocType = cudaMemAllocationTypePinned;
  p.poolProps.handleTypes = cudaMemHandleTypeNone;
  p.poolProps.location.type = cudaMemLocationTypeDevice;
  p.poolProps.location.id = 0;
  p.bytesize = bytes;
  return p;
}

static cudaMemsetParams zero_params(void* d, size_t bytes) {
  cudaMemsetParams m = {};
  m.dst = d;
  m.value = 0;
  m.elementSize = 1;
  m.width = bytes;
  m.height = 1;
  return m;
}

static cudaKernelNodeParams add_one_params(void** args, int n) {
  cudaKernelNodeParams k = {};
  k.func = reinterpret_cast<void*>(add_one);
  k.gridDim = dim3((n + 255) / 256);
  k.blockDim = dim3(256);
  k.kernelParams = args;
  return k;
}

int main() {
  const int n = 1024;
  const size_t bytes = n * sizeof(int);
  int* out = nullptr;
  REQUIRE_OK(cudaMalloc(&out, bytes));
  cudaStream_t s;
  REQUIRE_OK(cudaStreamCreate(&s));

  // 1. Allocation, zeroing, two increments, a copy out and the free, in one graph.
  cudaGraph_t g;
  REQUIRE_OK(cudaGraphCreate(&g, 0));
  cudaMemAllocNodeParams ap = alloc_params(bytes);
  cudaGraphNode_t a, m, k1, k2, c, f;
  EXPECT_OK(cudaGraphAddMemAllocNode(&a, g, nullptr, 0, &ap));
  int* buf = static_cast<int*>(ap.dptr);
  EXPECT_TRUE(buf != nullptr, "an allocation node returns its address");
  cudaMemsetParams mp = zero_params(buf, bytes);
  EXPECT_OK(cudaGraphAddMemsetNode(&m, g, &a, 1, &mp));
  int count = n;
  void* args[] = {&buf, &count};
  cudaKernelNodeParams kp = add_one_params(args, n);
  EXPECT_OK(cudaGraphAddKernelNode(&k1, g, &m, 1, &kp));
  EXPECT_OK(cudaGraphAddKernelNode(&k2, g, &k1, 1, &kp));
  EXPECT_OK(cudaGraphAddMemcpyNode1D(&c, g, &k2, 1, out, buf, bytes, cudaMemcpyDeviceToDevice));
  EXPECT_OK(cudaGraphAddMemFreeNode(&f, g, &c, 1, buf));
  cudaGraphNodeType t = cudaGraphNodeTypeCount;
  EXPECT_OK(cudaGraphNodeGetType(a, &t));
  EXPECT_TRUE(t == cudaGraphNodeTypeMemAlloc, "an allocation node's type is MemAlloc");
  EXPECT_OK(cudaGraphNodeGetType(f, &t));
  EXPECT_TRUE(t == cudaGraphNodeTypeMemFree, "a free node's type is MemFree");
  cudaMemAllocNodeParams got = {};
  EXPECT_OK(cudaGraphMemAllocNodeGetParams(a, &got));
  EXPECT_TRUE(got.bytesize == bytes && got.dptr == buf, "allocation node parameters read back");
  EXPECT_TRUE(
      got.poolProps.location.type == cudaMemLocationTypeDevice && got.poolProps.location.id == 0,
      "allocation node location read back");
  void* freed = nullptr;
  EXPECT_OK(cudaGraphMemFreeNodeGetParams(f, &freed));
  EXPECT_TRUE(freed == buf, "free node parameter read back");
  cudaGraph_t clone = nullptr;
  EXPECT_TRUE(cudaGraphClone(&clone, g) != cudaSuccess, "a graph with memory nodes is not cloned");
  cudaGraphExec_t x, x2;
  REQUIRE_OK(cudaGraphInstantiate(&x, g, 0));
  EXPECT_TRUE(cudaGraphInstantiate(&x2, g, 0) != cudaSuccess,
              "a graph with memory nodes has one executable graph at a time");
  for (int i = 0; i < 3; ++i) {
    REQUIRE_OK(cudaMemset(out, 0xff, bytes));
    EXPECT_OK(cudaGraphLaunch(x, s));
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT_TRUE(all_equal(out, n, 2), "the graph's allocation was zeroed, incremented, copied");
  }
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(g));

  // 2. An allocation that outlives its launch.
  cudaGraph_t g2;
  REQUIRE_OK(cudaGraphCreate(&g2, 0));
  ap = alloc_params(bytes);
  EXPECT_OK(cudaGraphAddMemAllocNode(&a, g2, nullptr, 0, &ap));
  int* keep = static_cast<int*>(ap.dptr);
  mp = zero_params(keep, bytes);
  EXPECT_OK(cudaGraphAddMemsetNode(&m, g2, &a, 1, &mp));
  void* args2[] = {&keep, &count};
  kp = add_one_params(args2, n);
  EXPECT_OK(cudaGraphAddKernelNode(&k1, g2, &m, 1, &kp));
  REQUIRE_OK(cudaGraphInstantiate(&x, g2, 0));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(keep, n, 1), "work after the launch reads the graph's allocation");
  unsigned long long used = 0, reserved = 0, high = 0;
  EXPECT_OK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used));
  EXPECT_OK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrReservedMemCurrent, &reserved));
  EXPECT_OK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &high));
  EXPECT_TRUE(used >= bytes, "an outstanding allocation counts as used graph memory");
  EXPECT_TRUE(reserved >= used && high >= used, "reserved and high marks cover what is used");
  EXPECT_ERR(cudaGraphLaunch(x, s), cudaErrorInvalidValue);
  EXPECT_OK(cudaFreeAsync(keep, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(keep, n, 1), "a relaunch after the free allocates again");
  EXPECT_OK(cudaFree(keep));
  unsigned long long zero = 0, one = 1;
  EXPECT_OK(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero));
  EXPECT_OK(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrReservedMemHigh, &zero));
  EXPECT_ERR(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &one),
             cudaErrorInvalidValue);
  EXPECT_ERR(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &zero),
             cudaErrorInvalidValue);
  EXPECT_OK(cudaDeviceGraphMemTrim(0));
  EXPECT_OK(cudaGraphExecDestroy(x));

  // 3. Freed by each relaunch (cudaGraphInstantiateFlagAutoFreeOnLaunch).
  REQUIRE_OK(cudaGraphInstantiate(&x, g2, cudaGraphInstantiateFlagAutoFreeOnLaunch));
  for (int i = 0; i < 3; ++i) EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(keep, n, 1), "relaunches with auto free allocate again");
  EXPECT_OK(cudaFree(keep));
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(g2));

  // 4. cudaMallocAsync and cudaFreeAsync captured as memory nodes.
  cudaGraph_t g3 = nullptr;
  int* p = nullptr;
  REQUIRE_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EXPECT_OK(cudaMallocAsync(reinterpret_cast<void**>(&p), bytes, s));
  EXPECT_OK(cudaMemsetAsync(p, 0, bytes, s));
  add_one<<<(n + 255) / 256, 256, 0, s>>>(p, n);
  add_one<<<(n + 255) / 256, 256, 0, s>>>(p, n);
  add_one<<<(n + 255) / 256, 256, 0, s>>>(p, n);
  EXPECT_OK(cudaMemcpyAsync(out, p, bytes, cudaMemcpyDeviceToDevice, s));
  EXPECT_OK(cudaFreeAsync(p, s));
  EXPECT_OK(cudaStreamEndCapture(s, &g3));
  size_t nodes = 0;
  EXPECT_OK(cudaGraphGetNodes(g3, nullptr, &nodes));
  EXPECT_TRUE(nodes == 7, "the capture made seven nodes");
  std::vector<cudaGraphNode_t> list(nodes);
  EXPECT_OK(cudaGraphGetNodes(g3, list.data(), &nodes));
  int allocs = 0, frees = 0;
  for (cudaGraphNode_t node : list) {
    cudaGraphNodeType type;
    if (cudaGraphNodeGetType(node, &type) != cudaSuccess) continue;
    if (type == cudaGraphNodeTypeMemAlloc) {
      ++allocs;
      got = {};
      EXPECT_OK(cudaGraphMemAllocNodeGetParams(node, &got));
      EXPECT_TRUE(got.dptr == p && got.bytesize == bytes, "the captured allocation's parameters");
    }
    if (type == cudaGraphNodeTypeMemFree) {
      ++frees;
      EXPECT_OK(cudaGraphMemFreeNodeGetParams(node, &freed));
      EXPECT_TRUE(freed == p, "the captured free's parameter");
    }
  }
  EXPECT_TRUE(allocs == 1 && frees == 1, "one allocation and one free node were captured");
  REQUIRE_OK(cudaGraphInstantiate(&x, g3, 0));
  for (int i = 0; i < 2; ++i) {
    REQUIRE_OK(cudaMemset(out, 0xff, bytes));
    EXPECT_OK(cudaGraphLaunch(x, s));
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT_TRUE(all_equal(out, n, 3), "the captured graph allocates, computes and frees");
  }
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(g3));

  // 5. Memset nodes of 2- and 4-byte elements, 1-D and 2-D.
  const size_t pitch = 512, rows = 8;
  unsigned char* box = nullptr;
  REQUIRE_OK(cudaMalloc(&box, pitch * rows));
  REQUIRE_OK(cudaMemset(box, 0, pitch * rows));
  cudaGraph_t g4;
  REQUIRE_OK(cudaGraphCreate(&g4, 0));
  cudaMemsetParams m4 = {};
  m4.dst = box;
  m4.pitch = pitch;
  m4.value = 0x01020304u;
  m4.elementSize = 4;
  m4.width = 100;
  m4.height = rows - 2;
  cudaGraphNode_t ms4, ms2;
  EXPECT_OK(cudaGraphAddMemsetNode(&ms4, g4, nullptr, 0, &m4));
  cudaMemsetParams m2 = {};
  m2.dst = box + (rows - 1) * pitch;
  m2.value = 0xABCDu;
  m2.elementSize = 2;
  m2.width = 64;
  m2.height = 1;
  EXPECT_OK(cudaGraphAddMemsetNode(&ms2, g4, &ms4, 1, &m2));
  cudaMemsetParams back = {};
  EXPECT_OK(cudaGraphMemsetNodeGetParams(ms4, &back));
  EXPECT_TRUE(back.elementSize == 4 && back.height == rows - 2 && back.pitch == pitch,
              "a 2-D memset node's parameters read back");
  REQUIRE_OK(cudaGraphInstantiate(&x, g4, 0));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  std::vector<unsigned char> h(pitch * rows);
  REQUIRE_OK(cudaMemcpy(h.data(), box, h.size(), cudaMemcpyDeviceToHost));
  bool box_ok = true;
  for (size_t r = 0; r < rows; ++r)
    for (size_t b = 0; b < pitch; ++b) {
      unsigned want = 0;
      if (r < rows - 2 && b < 400) want = (0x01020304u >> (8 * (b % 4))) & 0xff;
      if (r == rows - 1 && b < 128) want = (0xABCDu >> (8 * (b % 2))) & 0xff;
      box_ok = box_ok && h[r * pitch + b] == want;
    }
  EXPECT_TRUE(box_ok, "4-byte 2-D and 2-byte memset nodes set exactly their elements");
  // An executable graph's 2-byte memset node takes a new value.
  m2.value = 0x0909u;
  EXPECT_OK(cudaGraphExecMemsetNodeSetParams(x, ms2, &m2));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  REQUIRE_OK(cudaMemcpy(h.data(), box, h.size(), cudaMemcpyDeviceToHost));
  box_ok = true;
  for (size_t b = 0; b < pitch; ++b)
    box_ok = box_ok && h[(rows - 1) * pitch + b] == (b < 128 ? 9 : 0);
  EXPECT_TRUE(box_ok, "an executable graph's memset node took a new value");
  m2.elementSize = 3;
  EXPECT_ERR(cudaGraphMemsetNodeSetParams(ms2, &m2), cudaErrorInvalidValue);
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(g4));

  // A 3-D copy node between pitched boxes, from an offset.
  const size_t sp = 256, dp = 128, ys = 4, zs = 3;
  unsigned char *src3 = nullptr, *dst3 = nullptr;
  REQUIRE_OK(cudaMalloc(&src3, sp * ys * zs));
  REQUIRE_OK(cudaMalloc(&dst3, dp * ys * zs));
  std::vector<unsigned char> hs(sp * ys * zs), hd(dp * ys * zs);
  for (size_t i = 0; i < hs.size(); ++i) hs[i] = static_cast<unsigned char>(i * 7 + 3);
  REQUIRE_OK(cudaMemcpy(src3, hs.data(), hs.size(), cudaMemcpyHostToDevice));
  REQUIRE_OK(cudaMemset(dst3, 0, hd.size()));
  cudaMemcpy3DParms c3 = {};
  c3.srcPtr = make_cudaPitchedPtr(src3, sp, sp, ys);
  c3.srcPos = make_cudaPos(16, 0, 0);
  c3.dstPtr = make_cudaPitchedPtr(dst3, dp, dp, ys);
  c3.extent = make_cudaExtent(64, ys, zs);
  c3.kind = cudaMemcpyDeviceToDevice;
  cudaGraph_t g6;
  cudaGraphNode_t cp3;
  REQUIRE_OK(cudaGraphCreate(&g6, 0));
  EXPECT_OK(cudaGraphAddMemcpyNode(&cp3, g6, nullptr, 0, &c3));
  REQUIRE_OK(cudaGraphInstantiate(&x, g6, 0));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  REQUIRE_OK(cudaMemcpy(hd.data(), dst3, hd.size(), cudaMemcpyDeviceToHost));
  bool box3 = true;
  for (size_t z = 0; z < zs; ++z)
    for (size_t y = 0; y < ys; ++y)
      for (size_t b = 0; b < dp; ++b) {
        unsigned char want = b < 64 ? hs[(z * ys + y) * sp + 16 + b] : 0;
        box3 = box3 && hd[(z * ys + y) * dp + b] == want;
      }
  EXPECT_TRUE(box3, "a 3-D copy node copied the box from its offset");
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(g6));
  EXPECT_OK(cudaFree(src3));
  EXPECT_OK(cudaFree(dst3));

  // 6. Kernel node attributes: set, read back, copied; launches honour them.
  int least = 0, greatest = 0;
  REQUIRE_OK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaGraph_t g5;
  REQUIRE_OK(cudaGraphCreate(&g5, 0));
  void* args5[] = {&out, &count};
  kp = add_one_params(args5, n);
  EXPECT_OK(cudaGraphAddKernelNode(&k1, g5, nullptr, 0, &kp));
  EXPECT_OK(cudaGraphAddKernelNode(&k2, g5, &k1, 1, &kp));
  cudaKernelNodeAttrValue av = {};
  av.priority = greatest;
  EXPECT_OK(cudaGraphKernelNodeSetAttribute(k1, cudaLaunchAttributePriority, &av));
  av = {};
  EXPECT_OK(cudaGraphKernelNodeGetAttribute(k1, cudaLaunchAttributePriority, &av));
  EXPECT_TRUE(av.priority == greatest, "a kernel node's priority attribute reads back");
  EXPECT_OK(cudaGraphKernelNodeCopyAttributes(k2, k1));
  av = {};
  EXPECT_OK(cudaGraphKernelNodeGetAttribute(k2, cudaLaunchAttributePriority, &av));
  EXPECT_TRUE(av.priority == greatest, "copied attributes read back");
  kp = add_one_params(args5, n);
  EXPECT_OK(cudaGraphKernelNodeSetParams(k2, &kp));
  av = {};
  EXPECT_OK(cudaGraphKernelNodeGetAttribute(k2, cudaLaunchAttributePriority, &av));
  EXPECT_TRUE(av.priority == greatest, "new kernel parameters keep the attributes");
  REQUIRE_OK(cudaGraphInstantiate(&x, g5, 0));
  REQUIRE_OK(cudaMemset(out, 0, bytes));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaGraphLaunch(x, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(out, n, 4), "kernel nodes with attributes ran");
  EXPECT_OK(cudaGraphExecDestroy(x));
  EXPECT_OK(cudaGraphDestroy(g5));

  EXPECT_OK(cudaFree(box));

  // 7. Capture modes across threads: cudaMalloc is potentially unsafe during a capture.
  cudaStream_t cs;
  REQUIRE_OK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  cudaGraph_t cg = nullptr;
  cudaError_t other = cudaSuccess;
  void* tmp = nullptr;
  REQUIRE_OK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
  std::thread([&] { other = cudaMalloc(&tmp, 256); }).join();
  EXPECT_TRUE(other == cudaErrorStreamCaptureUnsupported,
              "another thread's cudaMalloc during a global capture is refused");
  EXPECT_ERR(cudaStreamEndCapture(cs, &cg), cudaErrorStreamCaptureInvalidated);
  REQUIRE_OK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
  std::thread([&] {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    if (cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess) other = cudaMalloc(&tmp, 256);
  }).join();
  EXPECT_TRUE(other == cudaSuccess, "a relaxed thread's cudaMalloc during a global capture works");
  EXPECT_OK(cudaStreamEndCapture(cs, &cg));
  EXPECT_OK(cudaGraphDestroy(cg));
  EXPECT_OK(cudaFree(tmp));
  REQUIRE_OK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
  std::thread([&] { other = cudaMalloc(&tmp, 256); }).join();
  EXPECT_TRUE(other == cudaSuccess,
              "another thread's cudaMalloc during a thread-local capture works");
  EXPECT_OK(cudaStreamEndCapture(cs, &cg));
  EXPECT_OK(cudaGraphDestroy(cg));
  EXPECT_OK(cudaFree(tmp));
  EXPECT_OK(cudaStreamDestroy(cs));
  EXPECT_OK(cudaFree(out));
  EXPECT_OK(cudaStreamDestroy(s));
  return finish("graphs_mem");
}
