// Constant memory and device globals: cudaMemcpyToSymbol/FromSymbol, cudaGetSymbolAddress,
// cudaGetSymbolSize, initialised globals, and symbol errors.
#include <vector>

#include "check.h"

__constant__ float coeffs[4];
__device__ int counter = 5;
__device__ float table[64];

extern "C" __global__ void poly(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = coeffs[0] + x[i] * (coeffs[1] + x[i] * (coeffs[2] + x[i] * coeffs[3]));
}
extern "C" __global__ void count_and_fill(int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&counter, 1);
  if (i < 64) table[i] = i * 2.0f;
}

static int not_a_symbol;

int main() {
  const float c[4] = {1.f, 2.f, 0.5f, 0.25f};
  EXPECT_OK(cudaMemcpyToSymbol(coeffs, c, sizeof c));
  const int n = 4096;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = (i % 64) * 0.125f;
  float *dx, *dy;
  REQUIRE_OK(cudaMalloc(&dx, n * 4));
  REQUIRE_OK(cudaMalloc(&dy, n * 4));
  REQUIRE_OK(cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice));
  poly<<<n / 256, 256>>>(dx, dy, n);
  EXPECT_OK(cudaMemcpy(y.data(), dy, n * 4, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < n; ++i) ok = ok && y[i] == c[0] + x[i] * (c[1] + x[i] * (c[2] + x[i] * c[3]));
  EXPECT_TRUE(ok, "__constant__ coefficients set with cudaMemcpyToSymbol");

  int start = 0;
  EXPECT_OK(cudaMemcpyFromSymbol(&start, counter, sizeof start));
  EXPECT_TRUE(start == 5, "an initialised __device__ variable starts at its value");
  count_and_fill<<<4, 256>>>(1000);
  int after = 0;
  EXPECT_OK(cudaMemcpyFromSymbol(&after, counter, sizeof after));
  EXPECT_TRUE(after == 1005, "a __device__ counter read back after atomicAdd in a kernel");

  void* addr = nullptr;
  EXPECT_OK(cudaGetSymbolAddress(&addr, table));
  size_t size = 0;
  EXPECT_OK(cudaGetSymbolSize(&size, table));
  EXPECT_TRUE(size == 64 * sizeof(float), "cudaGetSymbolSize of float[64]");
  std::vector<float> t(64);
  EXPECT_OK(cudaMemcpy(t.data(), addr, size, cudaMemcpyDeviceToHost));
  bool filled = true;
  for (int i = 0; i < 64; ++i) filled = filled && t[i] == i * 2.0f;
  EXPECT_TRUE(filled, "cudaGetSymbolAddress gives a pointer cudaMemcpy can read");
  cudaPointerAttributes pa{};
  EXPECT_OK(cudaPointerGetAttributes(&pa, addr));
  EXPECT_TRUE(pa.type == cudaMemoryTypeDevice, "a symbol address is device memory");

  float two[2] = {-1.f, -2.f};
  EXPECT_OK(cudaMemcpyToSymbol(table, two, sizeof two, 62 * sizeof(float)));
  float back[2] = {};
  EXPECT_OK(cudaMemcpyFromSymbol(back, table, sizeof back, 62 * sizeof(float)));
  EXPECT_TRUE(back[0] == -1.f && back[1] == -2.f, "symbol copies at an offset");

  EXPECT_ERR(cudaMemcpyToSymbol(table, two, sizeof two, 63 * sizeof(float)), cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemcpyToSymbol(&not_a_symbol, two, 4), cudaErrorInvalidSymbol);
  EXPECT_ERR(cudaGetSymbolAddress(&addr, &not_a_symbol), cudaErrorInvalidSymbol);
  EXPECT_ERR(cudaFree(addr), cudaErrorInvalidValue);
  (void)cudaGetLastError();
  cudaFree(dx), cudaFree(dy);
  return finish("kernels_symbols");
}
