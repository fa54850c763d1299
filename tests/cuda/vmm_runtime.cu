// The runtime on memory from the driver's virtual memory management, as PyTorch's expandable
// segments use it: the VMM entry points found with cudaGetDriverEntryPointByVersion, two physical
// chunks mapped back to back, then cudaMemset, cudaMemcpy (explicit and default kinds, async on a
// stream), a kernel over the whole range and pointer attributes, across the boundary.  The same
// lines natively, through rgpu's runtime and through NVIDIA's runtime on rgpu's libcuda.so.1.
#include <cuda.h>

#include <cstring>
#include <vector>

#include "check.h"

extern "C" __global__ void lib_add(int* x, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}

template <class F>
static F entry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  REQUIRE_OK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q));
  if (!fn || q != cudaDriverEntryPointSuccess) {
    printf("FAIL %s not found\n", name);
    exit(2);
  }
  return reinterpret_cast<F>(fn);
}

#define DRV_OK(expr) EXPECT_TRUE((expr) == CUDA_SUCCESS, #expr)

int main() {
  REQUIRE_OK(cudaSetDevice(0));
  REQUIRE_OK(cudaFree(nullptr));
  auto granularity =
      entry<decltype(&cuMemGetAllocationGranularity)>("cuMemGetAllocationGranularity");
  auto reserve = entry<decltype(&cuMemAddressReserve)>("cuMemAddressReserve");
  auto address_free = entry<decltype(&cuMemAddressFree)>("cuMemAddressFree");
  auto create = entry<decltype(&cuMemCreate)>("cuMemCreate");
  auto release = entry<decltype(&cuMemRelease)>("cuMemRelease");
  auto map = entry<decltype(&cuMemMap)>("cuMemMap");
  auto unmap = entry<decltype(&cuMemUnmap)>("cuMemUnmap");
  auto set_access = entry<decltype(&cuMemSetAccess)>("cuMemSetAccess");

  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;  // as PyTorch asks
  size_t chunk = 0;
  DRV_OK(granularity(&chunk, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUdeviceptr va = 0;
  DRV_OK(reserve(&va, 2 * chunk, 0, 0, 0));
  CUmemGenericAllocationHandle h[2] = {};
  CUmemAccessDesc access;
  memset(&access, 0, sizeof access);
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (int i = 0; i < 2; ++i) {  // chunk by chunk, as the caching allocator grows a segment
    DRV_OK(create(&h[i], chunk, &prop, 0));
    DRV_OK(map(va + i * chunk, chunk, 0, h[i], 0));
    DRV_OK(set_access(va + i * chunk, chunk, &access, 1));
  }

  int* d = reinterpret_cast<int*>(va);
  const int n = static_cast<int>(2 * chunk / sizeof(int)), mid = n / 2;
  EXPECT_OK(cudaMemset(d, 0, 2 * chunk));
  std::vector<int> pattern(4096);
  for (int i = 0; i < 4096; ++i) pattern[i] = i;
  EXPECT_OK(cudaMemcpy(d + mid - 2048, pattern.data(), 4096 * sizeof(int), cudaMemcpyHostToDevice));
  lib_add<<<(n + 255) / 256, 256>>>(d, 3, n);
  EXPECT_OK(cudaGetLastError());
  cudaStream_t s = nullptr;
  EXPECT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<int> back(n);
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT_OK(cudaMemcpyAsync(back.data(), d, 2 * chunk, cudaMemcpyDeviceToHost, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  bool good = true;
  for (int i = 0; i < n; ++i) {
    int want = (i >= mid - 2048 && i < mid + 2048 ? i - (mid - 2048) : 0) + 3;
    good = good && back[i] == want;
  }
  EXPECT_TRUE(good, "memset, copy and kernel across two mappings");
  int edge[8] = {};
  EXPECT_OK(cudaMemcpy(edge, d + mid - 4, sizeof edge, cudaMemcpyDefault));
  EXPECT_TRUE(edge[0] == 2047 && edge[7] == 2054, "cudaMemcpyDefault across the boundary");
  int* other = nullptr;
  EXPECT_OK(cudaMalloc(&other, 4096));
  EXPECT_OK(cudaMemcpy(other, d + mid - 512, 4096, cudaMemcpyDeviceToDevice));
  EXPECT_OK(cudaMemcpy(edge, other + 508, sizeof edge, cudaMemcpyDefault));
  EXPECT_TRUE(edge[4] == 2048 + 3, "device-to-device out of the range");
  EXPECT_OK(cudaFree(other));
  cudaPointerAttributes attr;
  EXPECT_OK(cudaPointerGetAttributes(&attr, d + mid));
  EXPECT_TRUE(attr.type == cudaMemoryTypeDevice && attr.device == 0,
              "pointer attributes: device memory of device 0");
  EXPECT_OK(cudaStreamDestroy(s));

  DRV_OK(unmap(va, 2 * chunk));
  DRV_OK(release(h[0]));
  DRV_OK(release(h[1]));
  DRV_OK(address_free(va, 2 * chunk));
  printf("vmm_runtime: %s\n", g_failures ? "FAILED" : "passed");
  return g_failures ? 1 : 0;
}
