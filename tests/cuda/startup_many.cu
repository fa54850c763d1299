// A program that registers many kernels in many fat binaries (this file and the startup_part.cu
// objects linked with it) and uses one of them: a __device__ variable's initial value read by
// cudaMemcpyFromSymbol before any launch, then one kernel launched and its result checked.  With
// lazy modules only this file's image is ever shipped (tests/integration/startup_test.cc counts).
#include "check.h"

#define KERNEL(n) \
  extern "C" __global__ void startup_main_k##n(int* p) { p[n] *= 2; }
KERNEL(0)
KERNEL(1)
KERNEL(2)
KERNEL(3)
KERNEL(4)
KERNEL(5)
KERNEL(6)
KERNEL(7)

__device__ int startup_initial = 1234;

extern "C" __global__ void fill_value(int* out, int value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

int main() {
  int initial = 0;
  EXPECT_OK(cudaMemcpyFromSymbol(&initial, startup_initial, sizeof initial));
  EXPECT_TRUE(initial == 1234, "a __device__ variable's initial value, read before any launch");
  const int n = 1000;
  int* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, n * sizeof(int)));
  fill_value<<<(n + 255) / 256, 256>>>(d, 7, n);
  EXPECT_OK(cudaGetLastError());
  int h[n] = {};
  EXPECT_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  bool all = true;
  for (int i = 0; i < n; ++i) all = all && h[i] == 7;
  EXPECT_TRUE(all, "the one kernel launched filled its buffer");
  EXPECT_OK(cudaFree(d));
  return finish("startup_many");
}
