// CUDA graphs through the driver API alone (libcuda.so.1): graphs built node by node (memset,
// kernel, memcpy, host, event, empty, child graph, memory alloc/free, cuGraphAddNode), their
// shape and parameter queries, kernel nodes with `extra` buffers, a child graph moved into its
// parent, kernel node attributes, graph memory attributes, setters in the
// graph and in the executable graph, update, enabling, clones, stream capture (into a new graph
// and into an existing one), user objects and the DOT description.
// Built like driver_api.cpp against the toolkit's stub libcuda.so; it runs on NVIDIA's driver
// natively and on rgpu's libcuda.so.1 under LD_LIBRARY_PATH, printing the same lines.
#include <cuda.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "driver_check.h"
#include "launch_lib_cubin.h"

constexpr int kN = 1000;
static int g_host_calls = 0;
static void host_fn(void* p) { *static_cast<int*>(p) += 1; }
static int g_destroyed = 0;
static void destroy_fn(void*) { ++g_destroyed; }

// Every element of `h` equals `want`.  The graphs copy into a second device buffer, g_out (rgpu's
// graphs copy into device memory only), read back into `h` here, outside the graph.
static CUdeviceptr g_out = 0;
static int* g_h = nullptr;
static bool all_equal(int* h, int want) {
  if (h == g_h && cuMemcpyDtoH(h, g_out, kN * sizeof(int)) != CUDA_SUCCESS) return false;
  for (int i = 0; i < kN; ++i)
    if (h[i] != want) return false;
  return true;
}

static CUDA_KERNEL_NODE_PARAMS kernel_params(CUfunction f, void** args) {
  CUDA_KERNEL_NODE_PARAMS k{};
  k.func = f;
  k.gridDimX = (kN + 255) / 256, k.gridDimY = 1, k.gridDimZ = 1;
  k.blockDimX = 256, k.blockDimY = 1, k.blockDimZ = 1;
  k.kernelParams = args;
  return k;
}

static CUDA_MEMCPY3D d2d(CUdeviceptr src, CUdeviceptr dst, size_t bytes) {
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = src;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = dst;
  c.WidthInBytes = bytes;
  c.Height = 1;
  c.Depth = 1;
  return c;
}

int main() {
  EXPECT_OK(cuInit(0));
  CUdevice dev = 0;
  EXPECT_OK(cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  EXPECT_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
  EXPECT_OK(cuCtxSetCurrent(ctx));
  CUmodule m = nullptr;
  EXPECT_OK(cuModuleLoadData(&m, lib_cubin));
  CUfunction f = nullptr;
  EXPECT_OK(cuModuleGetFunction(&f, m, "lib_add"));
  CUdeviceptr d = 0;
  EXPECT_OK(cuMemAlloc(&d, kN * sizeof(int)));
  int* h = nullptr;
  EXPECT_OK(cuMemAllocHost(reinterpret_cast<void**>(&h), kN * sizeof(int)));
  EXPECT_OK(cuMemAlloc(&g_out, kN * sizeof(int)));
  g_h = h;
  CUstream s = nullptr;
  EXPECT_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent ev = nullptr;
  EXPECT_OK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  char line[200];

  // ---- a graph built node by node: memset -> kernel -> memcpy -> host, and an event record
  CUgraph g = nullptr;
  EXPECT_ERR(cuGraphCreate(&g, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_OK(cuGraphCreate(&g, 0));
  CUgraphNode nset = nullptr, nker = nullptr, ncpy = nullptr, nhost = nullptr, nrec = nullptr;
  CUDA_MEMSET_NODE_PARAMS ms{};
  ms.dst = d, ms.value = 0, ms.elementSize = 4, ms.width = kN, ms.height = 1;
  EXPECT_OK(cuGraphAddMemsetNode(&nset, g, nullptr, 0, &ms, ctx));
  int v = 5, n = kN;
  void* args[] = {&d, &v, &n};
  CUDA_KERNEL_NODE_PARAMS kp = kernel_params(f, args);
  EXPECT_OK(cuGraphAddKernelNode(&nker, g, &nset, 1, &kp));
  v = 99;  // the node keeps the values given when it was added
  CUDA_MEMCPY3D cp = d2d(d, g_out, kN * sizeof(int));
  EXPECT_OK(cuGraphAddMemcpyNode(&ncpy, g, &nker, 1, &cp, ctx));
  CUDA_HOST_NODE_PARAMS hp{host_fn, &g_host_calls};
  EXPECT_OK(cuGraphAddHostNode(&nhost, g, &ncpy, 1, &hp));
  EXPECT_OK(cuGraphAddEventRecordNode(&nrec, g, &ncpy, 1, ev));
  CUgraphNode bad = nullptr;
  EXPECT_ERR(cuGraphAddHostNode(&bad, g, nullptr, 0, nullptr), CUDA_ERROR_INVALID_VALUE);

  CUgraphExec x = nullptr;
  EXPECT_OK(cuGraphInstantiate(&x, g, 0));
  EXPECT_OK(cuGraphLaunch(x, s));
  EXPECT_OK(cuGraphLaunch(x, s));
  EXPECT_OK(cuStreamSynchronize(s));
  EXPECT_TRUE(all_equal(h, 5), "two launches: memset, +5, copied");
  snprintf(line, sizeof line, "host node ran %d times", g_host_calls);
  EXPECT_TRUE(g_host_calls == 2, line);
  EXPECT_OK(cuEventQuery(ev));

  // ---- shape queries
  size_t count = 0;
  EXPECT_OK(cuGraphGetNodes(g, nullptr, &count));
  snprintf(line, sizeof line, "graph has %zu nodes", count);
  EXPECT_TRUE(count == 5, line);
  CUgraphNode roots[4] = {};
  count = 4;
  EXPECT_OK(cuGraphGetRootNodes(g, roots, &count));
  EXPECT_TRUE(count == 1 && roots[0] == nset, "the memset is the only root");
  EXPECT_OK(cuGraphGetEdges(g, nullptr, nullptr, nullptr, &count));
  snprintf(line, sizeof line, "graph has %zu edges", count);
  EXPECT_TRUE(count == 4, line);
  CUgraphNode deps[4] = {};
  count = 4;
  EXPECT_OK(cuGraphNodeGetDependentNodes(ncpy, deps, nullptr, &count));
  EXPECT_TRUE(count == 2 &&
                  ((deps[0] == nhost && deps[1] == nrec) || (deps[0] == nrec && deps[1] == nhost)),
              "the copy's dependents are the host and event nodes");
  count = 4;
  EXPECT_OK(cuGraphNodeGetDependencies(nker, deps, nullptr, &count));
  EXPECT_TRUE(count == 1 && deps[0] == nset, "the kernel depends on the memset");
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  EXPECT_OK(cuGraphNodeGetType(nker, &type));
  EXPECT_TRUE(type == CU_GRAPH_NODE_TYPE_KERNEL, "kernel node type");
  EXPECT_OK(cuGraphNodeGetType(nrec, &type));
  EXPECT_TRUE(type == CU_GRAPH_NODE_TYPE_EVENT_RECORD, "event record node type");

  // ---- parameter getters
  CUDA_KERNEL_NODE_PARAMS kq{};
  EXPECT_OK(cuGraphKernelNodeGetParams(nker, &kq));
  EXPECT_TRUE(kq.func == f && kq.gridDimX == (kN + 255) / 256 && kq.blockDimX == 256 &&
                  *static_cast<int*>(kq.kernelParams[1]) == 5,
              "kernel node parameters read back (argument 1 is 5)");
  EXPECT_ERR(cuGraphKernelNodeGetParams(nset, &kq), CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMSET_NODE_PARAMS mq{};
  EXPECT_OK(cuGraphMemsetNodeGetParams(nset, &mq));
  EXPECT_TRUE(mq.dst == d && mq.elementSize == 4 && mq.width == kN, "memset node parameters");
  CUDA_MEMCPY3D cq{};
  EXPECT_OK(cuGraphMemcpyNodeGetParams(ncpy, &cq));
  EXPECT_TRUE(cq.srcDevice == d && cq.dstDevice == g_out && cq.WidthInBytes == kN * sizeof(int),
              "memcpy node parameters");
  CUDA_HOST_NODE_PARAMS hq{};
  EXPECT_OK(cuGraphHostNodeGetParams(nhost, &hq));
  EXPECT_TRUE(hq.fn == host_fn && hq.userData == &g_host_calls, "host node parameters");
  CUevent evq = nullptr;
  EXPECT_OK(cuGraphEventRecordNodeGetEvent(nrec, &evq));
  EXPECT_TRUE(evq == ev, "event record node's event");
  EXPECT_ERR(cuGraphEventWaitNodeGetEvent(nrec, &evq), CUDA_ERROR_INVALID_VALUE);

  // ---- setters: in the executable graph, then in the graph and cuGraphExecUpdate
  v = 7;
  EXPECT_OK(cuGraphExecKernelNodeSetParams(x, nker, &kp));
  EXPECT_OK(cuGraphLaunch(x, s));
  EXPECT_OK(cuStreamSynchronize(s));
  EXPECT_TRUE(all_equal(h, 7), "executable graph's kernel node set to +7");
  v = 11;
  EXPECT_OK(cuGraphKernelNodeSetParams(nker, &kp));
  CUgraphExecUpdateResultInfo info{};
  EXPECT_OK(cuGraphExecUpdate(x, g, &info));
  EXPECT_TRUE(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS, "update result success");
  EXPECT_OK(cuGraphLaunch(x, s));
  EXPECT_OK(cuStreamSynchronize(s));
  EXPECT_TRUE(all_equal(h, 11), "graph's kernel node set to +11 and the update applied");
  ms.value = 0x02020202;  // one repeated byte: 4-byte elements of 0x02020202
  EXPECT_OK(cuGraphExecMemsetNodeSetParams(x, nset, &ms, ctx));
  EXPECT_OK(cuGraphLaunch(x, s));
  EXPECT_OK(cuStreamSynchronize(s));
  EXPECT_TRUE(all_equal(h, 0x02020202 + 11), "executable graph's memset set to 0x02020202");
  ms.value = 0;
  EXPECT_OK(cuGraphExecMemsetNodeSetParams(x, nset, &ms, ctx));

  // ---- enabling
  unsigned enabled = 9;
  EXPECT_OK(cuGraphNodeSetEnabled(x, nker, 0));
  EXPECT_OK(cuGraphNodeGetEnabled(x, nker, &enabled));
  EXPECT_TRUE(enabled == 0, "kernel node disabled");
  EXPECT_OK(cuGraphLaunch(x, s));
  EXPECT_OK(cuStreamSynchronize(s));
  EXPECT_TRUE(all_equal(h, 0), "a disabled kernel node does not run");
  EXPECT_OK(cuGraphNodeSetEnabled(x, nker, 1));
  EXPECT_ERR(cuGraphNodeSetEnabled(x, nhost, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_OK(cuGraphExecDestroy(x));

  // ---- clones, child graphs, empty nodes, edges, node removal
  CUgraph clone = nullptr;
  EXPECT_OK(cuGraphClone(&clone, g));
  CUgraphNode found = nullptr;
  EXPECT_OK(cuGraphNodeFindInClone(&found, nker, clone));
  EXPECT_OK(cuGraphNodeGetType(found, &type));
  EXPECT_TRUE(found != nker && type == CU_GRAPH_NODE_TYPE_KERNEL, "the kernel node's clone");
  EXPECT_ERR(cuGraphNodeFindInClone(&found, nker, g), CUDA_ERROR_INVALID_VALUE);
  CUgraph outer = nullptr;
  EXPECT_OK(cuGraphCreate(&outer, 0));
  CUgraphNode nchild = nullptr, nempty = nullptr, nextra = nullptr;
  EXPECT_OK(cuGraphAddEmptyNode(&nempty, outer, nullptr, 0));
  EXPECT_OK(cuGraphAddChildGraphNode(&nchild, outer, &nempty, 1, clone));
  CUgraph embedded = nullptr;
  EXPECT_OK(cuGraphChildGraphNodeGetGraph(nchild, &embedded));
  EXPECT_TRUE(embedded != nullptr && embedded != clone, "the child node embeds a copy");
  v = 3;
  CUgraphNodeParams np{};
  np.type = CU_GRAPH_NODE_TYPE_KERNEL;
  np.kernel.func = f;
  np.kernel.gridDimX = (kN + 255) / 256, np.kernel.gridDimY = 1, np.kernel.gridDimZ = 1;
  np.kernel.blockDimX = 256, np.kernel.blockDimY = 1, np.kernel.blockDimZ = 1;
  np.kernel.kernelParams = args;
  EXPECT_OK(cuGraphAddNode(&nextra, outer, nullptr, nullptr, 0, &np));
  EXPECT_OK(cuGraphAddDependencies(outer, &nchild, &nextra, nullptr, 1));
  EXPECT_OK(cuGraphGetEdges(outer, nullptr, nullptr, nullptr, &count));
  snprintf(line, sizeof line, "outer graph has %zu edges", count);
  EXPECT_TRUE(count == 2, line);
  EXPECT_OK(cuGraphRemoveDependencies(outer, &nchild, &nextra, nullptr, 1));
  EXPECT_OK(cuGraphGetEdges(outer, nullptr, nullptr, nullptr, &count));
  EXPECT_TRUE(count == 1, "an edge removed");
  EXPECT_OK(cuGraphDestroyNode(nextra));
  EXPECT_OK(cuGraphGetNodes(outer, nullptr, &count));
  snprintf(line, sizeof line, "outer graph has %zu nodes after removing one", count);
  EXPECT_TRUE(count == 2, line);
  CUDA_GRAPH_INSTANTIATE_PARAMS ip{};
  ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
  EXPECT_OK(cuGraphInstantiateWithParams(&x, outer, &ip));
  EXPECT_TRUE(ip.result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS, "instantiated with parameters");
  cuuint64_t xflags = 0;
  EXPECT_OK(cuGraphExecGetFlags(x, &xflags));
  EXPECT_TRUE(xflags == CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, "flags read back");
  g_host_calls = 0;
  EXPECT_OK(cuGraphUpload(x, s));
  EXPECT_OK(cuGraphLaunch(x, s));
  EXPECT_OK(cuStreamSynchronize(s));
  EXPECT_TRUE(all_equal(h, 11) && g_host_calls == 1, "the child graph ran (+11, host node)");
  EXPECT_OK(cuGraphExecDestroy(x));
  char dot[] = "/tmp/driver_graphs_XXXXXX";
  const int fd = mkstemp(dot);
  if (fd >= 0) close(fd);
  EXPECT_OK(cuGraphDebugDotPrint(outer, dot, 0));
  FILE* df = fopen(dot, "r");
  char head[16] = {};
  if (df) {
    size_t got = fread(head, 1, 7, df);
    head[got] = '\0';
    fclose(df);
  }
  EXPECT_TRUE(std::strcmp(head, "digraph") == 0, "the DOT file is a digraph");
  unlink(dot);
  EXPECT_OK(cuGraphDestroy(outer));
  EXPECT_OK(cuGraphDestroy(clone));

  // ---- stream capture
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  EXPECT_OK(cuStreamIsCapturing(s, &status));
  EXPECT_TRUE(status == CU_STREAM_CAPTURE_STATUS_NONE, "not capturing");
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  EXPECT_OK(cuThreadExchangeStreamCaptureMode(&mode));
  EXPECT_TRUE(mode == CU_STREAM_CAPTURE_MODE_GLOBAL, "the thread's mode was global");
  EXPECT_OK(cuThreadExchangeStreamCaptureMode(&mode));
  EXPECT_TRUE(mode == CU_STREAM_CAPTURE_MODE_RELAXED, "the thread's mode restored");
  EXPECT_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_OK(cuStreamIsCapturing(s, &status));
  EXPECT_TRUE(status == CU_STREAM_CAPTURE_STATUS_ACTIVE, "capturing");
  cuuint64_t cid = 0;
  CUgraph cg = nullptr;
  EXPECT_OK(cuStreamGetCaptureInfo(s, &status, &cid, &cg, nullptr, nullptr, nullptr));
  EXPECT_TRUE(status == CU_STREAM_CAPTURE_STATUS_ACTIVE && cid != 0, "capture info");
  v = 20;
  EXPECT_OK(cuMemsetD32Async(d, 0x01010101, kN, s));
  EXPECT_OK(cuLaunchKernel(f, (kN + 255) / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
  EXPECT_OK(cuMemcpyDtoDAsync(g_out, d, kN * sizeof(int), s));
  CUgraph captured = nullptr;
  EXPECT_OK(cuStreamEndCapture(s, &captured));
  EXPECT_OK(cuGraphGetNodes(captured, nullptr, &count));
  snprintf(line, sizeof line, "captured graph has %zu nodes", count);
  EXPECT_TRUE(count == 3, line);
  EXPECT_TRUE(all_equal(h, 11), "nothing ran during capture");
  EXPECT_OK(cuGraphInstantiate(&x, captured, 0));
  EXPECT_OK(cuGraphLaunch(x, s));
  EXPECT_OK(cuStreamSynchronize(s));
  EXPECT_TRUE(all_equal(h, 0x01010101 + 20), "captured graph ran: 0x01010101 + 20");
  EXPECT_OK(cuGraphExecDestroy(x));
  // Into an existing graph, after its node.
  CUgraph into = nullptr;
  CUgraphNode first = nullptr;
  EXPECT_OK(cuGraphCreate(&into, 0));
  ms.value = 2;
  ms.elementSize = 1;
  ms.width = kN * sizeof(int);
  EXPECT_OK(cuGraphAddMemsetNode(&first, into, nullptr, 0, &ms, ctx));
  EXPECT_OK(
      cuStreamBeginCaptureToGraph(s, into, &first, nullptr, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_OK(cuMemcpyDtoDAsync(g_out, d, kN * sizeof(int), s));
  CUgraph back = nullptr;
  EXPECT_OK(cuStreamEndCapture(s, &back));
  EXPECT_TRUE(back == into, "capture into a graph returns that graph");
  EXPECT_OK(cuGraphGetNodes(into, nullptr, &count));
  EXPECT_TRUE(count == 2, "the existing graph has the captured copy");
  EXPECT_OK(cuGraphInstantiate(&x, into, 0));
  EXPECT_OK(cuGraphLaunch(x, s));
  EXPECT_OK(cuStreamSynchronize(s));
  EXPECT_TRUE(all_equal(h, 0x02020202), "memset then the captured copy");
  EXPECT_OK(cuGraphExecDestroy(x));
  EXPECT_OK(cuGraphDestroy(into));
  EXPECT_OK(cuGraphDestroy(captured));

  // ---- graph memory: alloc -> memset -> kernel (+7) -> copy out -> free (cuGraphAddNode)
  {
    CUgraph gm = nullptr;
    EXPECT_OK(cuGraphCreate(&gm, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS ap{};
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.poolProps.location.id = dev;
    ap.bytesize = kN * sizeof(int);
    CUgraphNode na = nullptr, nm = nullptr, nk = nullptr, nk2 = nullptr, nc = nullptr, nf = nullptr;
    CUDA_MEM_ALLOC_NODE_PARAMS badp = ap;
    badp.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
    EXPECT_ERR(cuGraphAddMemAllocNode(&na, gm, nullptr, 0, &badp), CUDA_ERROR_INVALID_VALUE);
    EXPECT_OK(cuGraphAddMemAllocNode(&na, gm, nullptr, 0, &ap));
    EXPECT_TRUE(ap.dptr != 0, "the allocation node gives its address");
    CUDA_MEM_ALLOC_NODE_PARAMS back{};
    EXPECT_OK(cuGraphMemAllocNodeGetParams(na, &back));
    EXPECT_TRUE(
        back.dptr == ap.dptr && back.bytesize == ap.bytesize && back.poolProps.location.id == dev,
        "the allocation node's parameters read back");
    CUDA_MEMSET_NODE_PARAMS zm{};
    zm.dst = ap.dptr, zm.value = 0, zm.elementSize = 4, zm.width = kN, zm.height = 1;
    EXPECT_OK(cuGraphAddMemsetNode(&nm, gm, &na, 1, &zm, ctx));
    CUdeviceptr gp = ap.dptr;
    int v7 = 7;
    void* a7[] = {&gp, &v7, &n};
    CUDA_KERNEL_NODE_PARAMS k7 = kernel_params(f, a7);
    EXPECT_OK(cuGraphAddKernelNode(&nk, gm, &nm, 1, &k7));
    EXPECT_OK(cuGraphAddKernelNode(&nk2, gm, &nk, 1, &k7));
    CUDA_MEMCPY3D c7 = d2d(ap.dptr, g_out, kN * sizeof(int));
    EXPECT_OK(cuGraphAddMemcpyNode(&nc, gm, &nk2, 1, &c7, ctx));
    CUgraphNodeParams fp{};
    fp.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    fp.free.dptr = ap.dptr;
    EXPECT_OK(cuGraphAddNode(&nf, gm, &nc, nullptr, 1, &fp));
    CUdeviceptr freed = 0;
    EXPECT_OK(cuGraphMemFreeNodeGetParams(nf, &freed));
    EXPECT_TRUE(freed == ap.dptr, "the free node's address reads back");
    CUgraphNodeType type;
    EXPECT_OK(cuGraphNodeGetType(na, &type));
    EXPECT_TRUE(type == CU_GRAPH_NODE_TYPE_MEM_ALLOC, "an allocation node's type");

    // Kernel node attributes: priority set, read back, copied, kept across new parameters.
    int least = 0, greatest = 0;
    EXPECT_OK(cuCtxGetStreamPriorityRange(&least, &greatest));
    CUkernelNodeAttrValue av{};
    EXPECT_OK(cuGraphKernelNodeGetAttribute(nk, CU_LAUNCH_ATTRIBUTE_PRIORITY, &av));
    EXPECT_TRUE(av.priority == 0, "an unset priority reads 0");
    av.priority = greatest;
    EXPECT_OK(cuGraphKernelNodeSetAttribute(nk, CU_LAUNCH_ATTRIBUTE_PRIORITY, &av));
    av = {};
    EXPECT_OK(cuGraphKernelNodeGetAttribute(nk, CU_LAUNCH_ATTRIBUTE_PRIORITY, &av));
    EXPECT_TRUE(av.priority == greatest, "a kernel node's priority reads back");
    EXPECT_OK(cuGraphKernelNodeCopyAttributes(nk2, nk));
    av = {};
    EXPECT_OK(cuGraphKernelNodeGetAttribute(nk2, CU_LAUNCH_ATTRIBUTE_PRIORITY, &av));
    EXPECT_TRUE(av.priority == greatest, "copied attributes read back");
    EXPECT_OK(cuGraphKernelNodeSetParams(nk2, &k7));
    av = {};
    EXPECT_OK(cuGraphKernelNodeGetAttribute(nk2, CU_LAUNCH_ATTRIBUTE_PRIORITY, &av));
    EXPECT_TRUE(av.priority == greatest, "new kernel parameters keep the attributes");
    EXPECT_ERR(cuGraphKernelNodeGetAttribute(nm, CU_LAUNCH_ATTRIBUTE_PRIORITY, &av),
               CUDA_ERROR_INVALID_VALUE);

    CUgraphExec xm = nullptr;
    EXPECT_OK(cuGraphInstantiate(&xm, gm, 0));
    EXPECT_OK(cuGraphLaunch(xm, s));
    EXPECT_OK(cuGraphLaunch(xm, s));
    EXPECT_OK(cuStreamSynchronize(s));
    EXPECT_TRUE(all_equal(h, 14), "allocated, zeroed, +7 twice, copied out, freed (twice)");
    cuuint64_t used = 1, high = 0, zero = 0;
    EXPECT_OK(cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used));
    // CUDA may keep memory freed by the graph's free node counted as used while the executable
    // graph lives (nonzero on an H200, driver 580; rgpu answers 0): only the bound is checked.
    EXPECT_OK(cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &high));
    EXPECT_TRUE(high >= kN * sizeof(int), "the high mark saw the allocation");
    EXPECT_TRUE(used <= high, "graph memory in use is within the high mark");
    EXPECT_OK(cuDeviceSetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero));
    EXPECT_ERR(cuDeviceSetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &zero),
               CUDA_ERROR_INVALID_VALUE);
    EXPECT_OK(cuDeviceGraphMemTrim(dev));
    EXPECT_OK(cuGraphExecDestroy(xm));
    EXPECT_OK(cuGraphDestroy(gm));
  }

  // ---- a kernel node whose arguments are an `extra` buffer (no kernelParams)
  {
    struct {
      CUdeviceptr x;
      int v, n;
    } packed{d, 4, kN};
    size_t packed_size = sizeof packed;
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &packed_size, CU_LAUNCH_PARAM_END};
    CUDA_MEMSET_NODE_PARAMS zero{};
    zero.dst = d, zero.value = 0, zero.elementSize = 4, zero.width = kN, zero.height = 1;
    CUDA_MEMCPY3D out = d2d(d, g_out, kN * sizeof(int));
    CUgraph ge = nullptr;
    CUgraphNode eset = nullptr, eker = nullptr, ecpy = nullptr;
    EXPECT_OK(cuGraphCreate(&ge, 0));
    EXPECT_OK(cuGraphAddMemsetNode(&eset, ge, nullptr, 0, &zero, ctx));
    CUDA_KERNEL_NODE_PARAMS ke = kernel_params(f, nullptr);
    ke.extra = extra;
    EXPECT_OK(cuGraphAddKernelNode(&eker, ge, &eset, 1, &ke));
    packed.v = 99;  // the node keeps the buffer's bytes of when it was added
    EXPECT_OK(cuGraphAddMemcpyNode(&ecpy, ge, &eker, 1, &out, ctx));
    CUgraphExec xe = nullptr;
    EXPECT_OK(cuGraphInstantiate(&xe, ge, 0));
    EXPECT_OK(cuGraphLaunch(xe, s));
    EXPECT_OK(cuStreamSynchronize(s));
    EXPECT_TRUE(all_equal(h, 4), "kernel node with `extra`: zeroed, +4, copied");
    packed.v = 6;
    EXPECT_OK(cuGraphExecKernelNodeSetParams(xe, eker, &ke));
    EXPECT_OK(cuGraphLaunch(xe, s));
    EXPECT_OK(cuStreamSynchronize(s));
    EXPECT_TRUE(all_equal(h, 6), "the executable graph's kernel node took a new `extra` buffer");
    packed.v = 8;
    EXPECT_OK(cuGraphKernelNodeSetParams(eker, &ke));
    CUgraphExec xe2 = nullptr;
    EXPECT_OK(cuGraphInstantiate(&xe2, ge, 0));
    EXPECT_OK(cuGraphLaunch(xe2, s));
    EXPECT_OK(cuStreamSynchronize(s));
    EXPECT_TRUE(all_equal(h, 8), "the graph's kernel node took a new `extra` buffer");
    CUDA_KERNEL_NODE_PARAMS kg{};
    EXPECT_OK(cuGraphKernelNodeGetParams(eker, &kg));
    EXPECT_TRUE(kg.func == f && kg.gridDimX == ke.gridDimX, "kernel node with `extra`: its params");
    void* both_args[] = {&d, &v, &n};
    CUDA_KERNEL_NODE_PARAMS both = kernel_params(f, both_args);
    both.extra = extra;
    EXPECT_ERR(cuGraphKernelNodeSetParams(eker, &both), CUDA_ERROR_INVALID_VALUE);
    size_t small = 8;  // too small for the function's parameters
    void* short_extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                           &small, CU_LAUNCH_PARAM_END};
    ke.extra = short_extra;
    // CUDA takes a buffer shorter than the parameters here (seen on an H200, driver 580).
    CUgraphNode short_node = nullptr;
    EXPECT_OK(cuGraphAddKernelNode(&short_node, ge, nullptr, 0, &ke));
    EXPECT_OK(cuGraphExecDestroy(xe));
    EXPECT_OK(cuGraphExecDestroy(xe2));
    EXPECT_OK(cuGraphDestroy(ge));
  }

  // ---- a child graph moved into its parent (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
  {
    CUDA_MEMSET_NODE_PARAMS zero{};
    zero.dst = d, zero.value = 0, zero.elementSize = 4, zero.width = kN, zero.height = 1;
    CUDA_MEMCPY3D out = d2d(d, g_out, kN * sizeof(int));
    CUgraph child = nullptr, parent = nullptr;
    CUgraphNode cset = nullptr, cker = nullptr, nmoved = nullptr, pcpy = nullptr;
    EXPECT_OK(cuGraphCreate(&child, 0));
    EXPECT_OK(cuGraphAddMemsetNode(&cset, child, nullptr, 0, &zero, ctx));
    int cv = 11, cn = kN;
    void* cargs[] = {&d, &cv, &cn};
    CUDA_KERNEL_NODE_PARAMS ck = kernel_params(f, cargs);
    EXPECT_OK(cuGraphAddKernelNode(&cker, child, &cset, 1, &ck));
    EXPECT_OK(cuGraphCreate(&parent, 0));
    CUgraphNodeParams mp{};
    mp.type = CU_GRAPH_NODE_TYPE_GRAPH;
    mp.graph.graph = child;
    mp.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
    EXPECT_OK(cuGraphAddNode(&nmoved, parent, nullptr, nullptr, 0, &mp));
    CUgraph embedded = nullptr;
    EXPECT_OK(cuGraphChildGraphNodeGetGraph(nmoved, &embedded));
    EXPECT_TRUE(embedded == child, "the moved graph is the node's own graph (no copy)");
    EXPECT_OK(cuGraphAddMemcpyNode(&pcpy, parent, &nmoved, 1, &out, ctx));
    CUgraphExec xp = nullptr;
    EXPECT_OK(cuGraphInstantiate(&xp, parent, 0));
    EXPECT_OK(cuGraphLaunch(xp, s));
    EXPECT_OK(cuStreamSynchronize(s));
    EXPECT_TRUE(all_equal(h, 11), "the moved child graph ran before the parent's copy");
    CUgraphExec xc = nullptr;
    EXPECT_TRUE(cuGraphInstantiate(&xc, child, 0) != CUDA_SUCCESS,
                "a moved graph cannot be instantiated on its own");
    EXPECT_TRUE(cuGraphDestroy(child) != CUDA_SUCCESS,
                "a moved graph cannot be destroyed on its own");
    CUgraph other = nullptr;
    CUgraphNode again = nullptr;
    EXPECT_OK(cuGraphCreate(&other, 0));
    EXPECT_TRUE(cuGraphAddNode(&again, other, nullptr, nullptr, 0, &mp) != CUDA_SUCCESS,
                "a moved graph cannot be moved into a second parent");
    EXPECT_OK(cuGraphDestroy(other));
    EXPECT_OK(cuGraphExecDestroy(xp));
    EXPECT_OK(cuGraphDestroy(parent));  // the child goes with it
  }

  // ---- user objects
  CUuserObject uo = nullptr;
  EXPECT_ERR(cuUserObjectCreate(&uo, nullptr, destroy_fn, 1, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_OK(cuUserObjectCreate(&uo, nullptr, destroy_fn, 2, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  EXPECT_OK(cuUserObjectRetain(uo, 1));
  EXPECT_OK(cuUserObjectRelease(uo, 2));
  EXPECT_OK(cuGraphRetainUserObject(g, uo, 1, CU_GRAPH_USER_OBJECT_MOVE));
  EXPECT_OK(cuGraphInstantiate(&x, g, 0));
  EXPECT_OK(cuGraphDestroy(g));
  EXPECT_TRUE(g_destroyed == 0, "the executable graph still holds the user object");
  EXPECT_OK(cuGraphExecDestroy(x));
  EXPECT_OK(cuCtxSynchronize());
  for (int i = 0; i < 100 && g_destroyed == 0; ++i) usleep(10000);  // destructors may be deferred
  EXPECT_TRUE(g_destroyed == 1, "the user object destroyed with its last owner");

  EXPECT_OK(cuEventDestroy(ev));
  EXPECT_OK(cuStreamDestroy(s));
  EXPECT_OK(cuMemFree(d));
  EXPECT_OK(cuMemFree(g_out));
  EXPECT_OK(cuMemFreeHost(h));
  EXPECT_OK(cuModuleUnload(m));
  EXPECT_OK(cuDevicePrimaryCtxRelease(dev));
  printf("driver_graphs: %s\n", g_failures ? "FAILED" : "passed");
  return g_failures ? 1 : 0;
}
