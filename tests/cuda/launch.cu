// Launches beyond the triple-chevron: cooperative launches with a grid-wide sync, launch
// attributes of cudaLaunchKernelExC (programmatic stream serialization in order, cluster
// dimensions, priority, completion and programmatic events, access policy window, memsync
// domains, carveout), kernel queries, cluster occupancy, and the library API on an embedded fat
// binary and PTX image.
#include <cooperative_groups.h>

#include <cstring>

#include "check.h"
#include "launch_lib_fatbin.h"  // lib_fatbin[]: launch_lib.cu as a fat binary (bin2c)
#include "launch_lib_ptx.h"     // lib_ptx[]: launch_lib.cu as PTX text, NUL-terminated

// cudaFuncSetSharedMemConfig is deprecated, and still exported: it is checked here.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace cg = cooperative_groups;

// Every thread writes its slot, the grid synchronizes, then thread 0 adds all slots.
extern "C" __global__ void coop_sum(int* slots, long long* out, int n) {
  cg::grid_group grid = cg::this_grid();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) slots[i] = i + 1;
  grid.sync();
  if (i == 0) {
    long long s = 0;
    for (int k = 0; k < n; ++k) s += slots[k];
    *out = s;
  }
}

// One step of a chain: waits for the previous kernel's results (programmatic dependent launch),
// then v = v * 2 + k.  Only the right order gives the expected final values.
extern "C" __global__ void chain_step(int* v, int k, int n) {
  cudaGridDependencySynchronize();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = v[i] * 2 + k;
}

// Block 0 reports the cluster's shape and the number of clusters in the grid.
extern "C" __global__ void cluster_shape(unsigned* out) {
  cg::cluster_group c = cg::this_cluster();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    dim3 d = c.dim_blocks();
    out[0] = d.x, out[1] = d.y, out[2] = d.z;
    out[3] = gridDim.x / d.x;
  }
}

extern "C" __global__ void fill_value(int* out, int value, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

static cudaLaunchAttribute attr(cudaLaunchAttributeID id) {
  cudaLaunchAttribute a;
  memset(&a, 0, sizeof a);
  a.id = id;
  return a;
}

static void cooperative() {
  const int blocks = 4, threads = 128, n = blocks * threads;
  int* slots;
  long long* out;
  REQUIRE_OK(cudaMalloc(&slots, n * sizeof(int)));
  REQUIRE_OK(cudaMalloc(&out, sizeof(long long)));
  int count = n;
  void* args[] = {&slots, &out, &count};
  long long h = 0;
  const long long want = (long long)n * (n + 1) / 2;
  EXPECT_OK(cudaMemset(out, 0, sizeof h));
  EXPECT_OK(cudaLaunchCooperativeKernel((const void*)coop_sum, blocks, threads, args, 0, 0));
  EXPECT_OK(cudaMemcpy(&h, out, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(h == want, "cudaLaunchCooperativeKernel: grid sync sees every block's writes");

  EXPECT_OK(cudaMemset(out, 0, sizeof h));
  cudaLaunchAttribute a = attr(cudaLaunchAttributeCooperative);
  a.val.cooperative = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = blocks;
  cfg.blockDim = threads;
  cfg.attrs = &a;
  cfg.numAttrs = 1;
  EXPECT_OK(cudaLaunchKernelExC(&cfg, (const void*)coop_sum, args));
  EXPECT_OK(cudaMemcpy(&h, out, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(h == want, "cudaLaunchKernelExC cooperative attribute: grid sync");

  // More blocks than the GPU holds at once: refused (at the launch, or at the next sync remotely).
  cudaError_t e = cudaLaunchCooperativeKernel((const void*)coop_sum, 1 << 20, threads, args, 0, 0);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  EXPECT_ERR(e, cudaErrorCooperativeLaunchTooLarge);
  (void)cudaGetLastError();
  EXPECT_OK(cudaFree(slots));
  EXPECT_OK(cudaFree(out));
}

static void programmatic_chain() {
  const int n = 4096, steps = 8;
  int* v;
  REQUIRE_OK(cudaMalloc(&v, n * sizeof(int)));
  cudaStream_t s;
  REQUIRE_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_OK(cudaMemsetAsync(v, 0, n * sizeof(int), s));
  cudaLaunchAttribute a = attr(cudaLaunchAttributeProgrammaticStreamSerialization);
  a.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = n / 256;
  cfg.blockDim = 256;
  cfg.stream = s;
  cfg.attrs = &a;
  cfg.numAttrs = 1;
  bool launched = true;
  int count = n;
  for (int k = 1; k <= steps; ++k) {
    void* args[] = {&v, &k, &count};
    launched = cudaLaunchKernelExC(&cfg, (const void*)chain_step, args) == cudaSuccess && launched;
  }
  EXPECT_TRUE(launched, "cudaLaunchKernelExC programmatic stream serialization (attribute 6)");
  EXPECT_OK(cudaStreamSynchronize(s));
  int want = 0;
  for (int k = 1; k <= steps; ++k) want = want * 2 + k;
  int* h = new int[n];
  EXPECT_OK(cudaMemcpy(h, v, n * sizeof(int), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < n; ++i) ok = ok && h[i] == want;
  EXPECT_TRUE(ok, "attribute 6 launches ran in stream order");
  delete[] h;
  EXPECT_OK(cudaStreamDestroy(s));
  EXPECT_OK(cudaFree(v));
}

static void clusters() {
  unsigned* out;
  REQUIRE_OK(cudaMalloc(&out, 4 * sizeof(unsigned)));
  void* args[] = {&out};
  cudaLaunchAttribute a[2] = {attr(cudaLaunchAttributeClusterDimension),
                              attr(cudaLaunchAttributeClusterSchedulingPolicyPreference)};
  a[0].val.clusterDim.x = 2;
  a[0].val.clusterDim.y = 1;
  a[0].val.clusterDim.z = 1;
  a[1].val.clusterSchedulingPolicyPreference = cudaClusterSchedulingPolicySpread;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = 8;
  cfg.blockDim = 64;
  cfg.attrs = a;
  cfg.numAttrs = 2;
  EXPECT_OK(cudaLaunchKernelExC(&cfg, (const void*)cluster_shape, args));
  unsigned h[4] = {};
  EXPECT_OK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(h[0] == 2 && h[1] == 1 && h[2] == 1 && h[3] == 4,
              "cluster dimension 2x1x1: the kernel sees clusters of 2 blocks, 4 of them");

  a[0].val.clusterDim.x = 3;  // does not divide the grid
  cudaError_t e = cudaLaunchKernelExC(&cfg, (const void*)cluster_shape, args);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  EXPECT_TRUE(e != cudaSuccess, "a cluster dimension that does not divide the grid is refused");
  (void)cudaGetLastError();

  int size = 0, active = 0;
  a[0].val.clusterDim.x = 2;
  cfg.numAttrs = 0;
  EXPECT_OK(cudaOccupancyMaxPotentialClusterSize(&size, (const void*)cluster_shape, &cfg));
  EXPECT_TRUE(size >= 2, "cudaOccupancyMaxPotentialClusterSize: clusters of 2 or more");
  cfg.numAttrs = 1;
  EXPECT_OK(cudaOccupancyMaxActiveClusters(&active, (const void*)cluster_shape, &cfg));
  EXPECT_TRUE(active >= 1, "cudaOccupancyMaxActiveClusters: at least one cluster of 2");
  EXPECT_OK(cudaFree(out));
}

static void many_attributes() {
  const int n = 1000;
  int* d;
  REQUIRE_OK(cudaMalloc(&d, n * sizeof(int)));
  cudaStream_t s;
  REQUIRE_OK(cudaStreamCreate(&s));
  cudaEvent_t done, prog;
  REQUIRE_OK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  REQUIRE_OK(cudaEventCreateWithFlags(&prog, cudaEventDisableTiming));
  int least = 0, greatest = 0;
  EXPECT_OK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaLaunchAttribute a[6] = {attr(cudaLaunchAttributePriority),
                              attr(cudaLaunchAttributeLaunchCompletionEvent),
                              attr(cudaLaunchAttributeAccessPolicyWindow),
                              attr(cudaLaunchAttributeMemSyncDomain),
                              attr(cudaLaunchAttributeMemSyncDomainMap),
                              attr(cudaLaunchAttributePreferredSharedMemoryCarveout)};
  a[0].val.priority = greatest;
  a[1].val.launchCompletionEvent.event = done;
  a[2].val.accessPolicyWindow.base_ptr = d;
  a[2].val.accessPolicyWindow.num_bytes = n * sizeof(int);
  a[2].val.accessPolicyWindow.hitRatio = 0.5f;
  a[2].val.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  a[2].val.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  a[3].val.memSyncDomain = cudaLaunchMemSyncDomainRemote;
  a[4].val.memSyncDomainMap.default_ = 0;
  a[4].val.memSyncDomainMap.remote = 1;
  a[5].val.sharedMemCarveout = 50;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = 4;
  cfg.blockDim = 256;
  cfg.stream = s;
  cfg.attrs = a;
  cfg.numAttrs = 6;
  int value = 31, count = n;
  void* args[] = {&d, &value, &count};
  EXPECT_OK(cudaLaunchKernelExC(&cfg, (const void*)fill_value, args));
  EXPECT_OK(cudaEventSynchronize(done));
  EXPECT_OK(cudaStreamSynchronize(s));
  int* h = new int[n];
  EXPECT_OK(cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < n; ++i) ok = ok && h[i] == 31;
  EXPECT_TRUE(ok, "a launch with priority, completion event, access policy, memsync, carveout");

  cudaLaunchAttribute p = attr(cudaLaunchAttributeProgrammaticEvent);
  p.val.programmaticEvent.event = prog;
  p.val.programmaticEvent.triggerAtBlockStart = 0;
  cfg.attrs = &p;
  cfg.numAttrs = 1;
  value = 5;
  EXPECT_OK(cudaLaunchKernelExC(&cfg, (const void*)fill_value, args));
  EXPECT_OK(cudaEventSynchronize(prog));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_OK(cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost));
  ok = true;
  for (int i = 0; i < n; ++i) ok = ok && h[i] == 5;
  EXPECT_TRUE(ok, "a launch with a programmatic event");
  delete[] h;

  cudaLaunchAttribute bad = attr((cudaLaunchAttributeID)99);
  cfg.attrs = &bad;
  EXPECT_TRUE(cudaLaunchKernelExC(&cfg, (const void*)fill_value, args) != cudaSuccess,
              "an unknown launch attribute is refused");
  (void)cudaGetLastError();
  EXPECT_OK(cudaEventDestroy(done));
  EXPECT_OK(cudaEventDestroy(prog));
  EXPECT_OK(cudaStreamDestroy(s));
  EXPECT_OK(cudaFree(d));
}

static void queries() {
  const char* name = nullptr;
  EXPECT_OK(cudaFuncGetName(&name, (const void*)fill_value));
  EXPECT_TRUE(name && strcmp(name, "fill_value") == 0, "cudaFuncGetName: fill_value");
  size_t offset = 0, size = 0;
  EXPECT_OK(cudaFuncGetParamInfo((const void*)fill_value, 1, &offset, &size));
  EXPECT_TRUE(offset == 8 && size == 4, "cudaFuncGetParamInfo: parameter 1 at 8, 4 bytes");
  EXPECT_TRUE(cudaFuncGetParamInfo((const void*)fill_value, 3, &offset, &size) != cudaSuccess,
              "cudaFuncGetParamInfo: no parameter 3");
  (void)cudaGetLastError();
  cudaFunction_t f = nullptr;
  EXPECT_OK(cudaGetFuncBySymbol(&f, (const void*)fill_value));
  EXPECT_TRUE(f != nullptr, "cudaGetFuncBySymbol gives a handle");
  cudaKernel_t k = nullptr;
  EXPECT_OK(cudaGetKernel(&k, (const void*)fill_value));
  EXPECT_OK(cudaFuncSetSharedMemConfig((const void*)fill_value, cudaSharedMemBankSizeFourByte));
  size_t smem = 0;
  EXPECT_OK(cudaOccupancyAvailableDynamicSMemPerBlock(&smem, (const void*)fill_value, 1, 128));
  EXPECT_TRUE(smem >= 48 * 1024, "cudaOccupancyAvailableDynamicSMemPerBlock: 48 KiB or more");
}

static void libraries() {
  cudaLibrary_t lib = nullptr;
  EXPECT_OK(cudaLibraryLoadData(&lib, lib_fatbin, nullptr, nullptr, 0, nullptr, nullptr, 0));
  unsigned count = 0;
  EXPECT_OK(cudaLibraryGetKernelCount(&count, lib));
  EXPECT_TRUE(count == 2, "cudaLibraryGetKernelCount: 2 kernels");
  cudaKernel_t ks[2] = {};
  EXPECT_OK(cudaLibraryEnumerateKernels(ks, 2, lib));
  EXPECT_TRUE(ks[0] && ks[1], "cudaLibraryEnumerateKernels: 2 handles");
  cudaKernel_t scale = nullptr, missing = nullptr;
  EXPECT_OK(cudaLibraryGetKernel(&scale, lib, "lib_scale"));
  EXPECT_TRUE(cudaLibraryGetKernel(&missing, lib, "no_such_kernel") != cudaSuccess,
              "cudaLibraryGetKernel: an unknown name is refused");
  (void)cudaGetLastError();
  EXPECT_OK(cudaKernelSetAttributeForDevice(scale, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            1024, 0));
  const int n = 300;
  float* x;
  REQUIRE_OK(cudaMalloc(&x, n * sizeof(float)));
  float h[n];
  for (int i = 0; i < n; ++i) h[i] = (float)i;
  EXPECT_OK(cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice));
  float factor = 3;
  int count_n = n;
  void* args[] = {&x, &factor, &count_n};
  EXPECT_OK(cudaLaunchKernel((const void*)scale, 2, 256, args, 0, 0));
  EXPECT_OK(cudaMemcpy(h, x, sizeof h, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < n; ++i) ok = ok && h[i] == 3.0f * i;
  EXPECT_TRUE(ok, "a library kernel launched with cudaLaunchKernel");
  void* g = nullptr;
  size_t bytes = 0;
  EXPECT_OK(cudaLibraryGetGlobal(&g, &bytes, lib, "lib_counter"));
  int counter = 0;
  EXPECT_OK(cudaMemcpy(&counter, g, sizeof counter, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(bytes == 4 && counter == 42, "cudaLibraryGetGlobal: lib_counter is 42");
  EXPECT_OK(cudaLibraryUnload(lib));

  cudaLibrary_t ptx = nullptr;
  EXPECT_OK(cudaLibraryLoadData(&ptx, lib_ptx, nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t add = nullptr;
  EXPECT_OK(cudaLibraryGetKernel(&add, ptx, "lib_add"));
  int* v;
  REQUIRE_OK(cudaMalloc(&v, n * sizeof(int)));
  EXPECT_OK(cudaMemset(v, 0, n * sizeof(int)));
  int inc = 9;
  void* add_args[] = {&v, &inc, &count_n};
  EXPECT_OK(cudaLaunchKernel((const void*)add, 2, 256, add_args, 0, 0));
  int hv[n];
  EXPECT_OK(cudaMemcpy(hv, v, sizeof hv, cudaMemcpyDeviceToHost));
  ok = true;
  for (int i = 0; i < n; ++i) ok = ok && hv[i] == 9;
  EXPECT_TRUE(ok, "a kernel of a PTX library");
  EXPECT_OK(cudaLibraryUnload(ptx));
  EXPECT_OK(cudaFree(v));
  EXPECT_OK(cudaFree(x));
}

int main() {
  cooperative();
  programmatic_chain();
  clusters();
  many_attributes();
  queries();
  libraries();
  return finish("launch");
}
