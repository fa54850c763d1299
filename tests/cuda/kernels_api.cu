// Launch through the API (cudaLaunchKernel, cudaLaunchKernelExC), configuration errors, function
// attributes and occupancy.
#include "check.h"

extern "C" __global__ void fill(int* out, int value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value + i;
}

int main() {
  const int n = 1000;
  int* d;
  REQUIRE_OK(cudaMalloc(&d, n * 4));
  int value = 7, count = n;
  void* args[] = {&d, &value, &count};
  EXPECT_OK(cudaLaunchKernel((const void*)fill, dim3(4), dim3(256), args, 0, nullptr));
  int h[n];
  EXPECT_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < n; ++i) ok = ok && h[i] == 7 + i;
  EXPECT_TRUE(ok, "cudaLaunchKernel with an argument array");

  value = 100;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(8);
  cfg.blockDim = dim3(128);
  EXPECT_OK(cudaLaunchKernelExC(&cfg, (const void*)fill, args));
  EXPECT_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  ok = true;
  for (int i = 0; i < n; ++i) ok = ok && h[i] == 100 + i;
  EXPECT_TRUE(ok, "cudaLaunchKernelExC");

  // CUDA 13 answers these with the driver's codes (as seen natively on an H200, driver 580).
  fill<<<0, 1>>>(d, 1, n);
  EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidValue);
  fill<<<1, 2048>>>(d, 1, n);
  EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_ERR(cudaLaunchKernel((const void*)main, dim3(1), dim3(1), args, 0, nullptr),
             cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();

  cudaFuncAttributes fa{};
  EXPECT_OK(cudaFuncGetAttributes(&fa, (const void*)fill));
  EXPECT_TRUE(fa.maxThreadsPerBlock >= 256 && fa.numRegs > 0,
              "cudaFuncGetAttributes: threads and registers");
  EXPECT_OK(
      cudaFuncSetAttribute((const void*)fill, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  EXPECT_OK(cudaFuncSetCacheConfig((const void*)fill, cudaFuncCachePreferL1));
  int blocks = 0;
  EXPECT_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (const void*)fill, 256, 0));
  EXPECT_TRUE(blocks >= 1, "occupancy: at least one block of 256 threads per SM");
  EXPECT_ERR(cudaFuncGetAttributes(&fa, (const void*)main), cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
  EXPECT_OK(cudaFree(d));
  return finish("kernels_api");
}
