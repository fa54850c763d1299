// 100,000 small launches in a row; the rate goes to stderr ("launches/s N").
#include <chrono>

#include "check.h"

extern "C" __global__ void bump(int* c) { *c += 1; }

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 100000;
  int* d;
  REQUIRE_OK(cudaMalloc(&d, 4));
  REQUIRE_OK(cudaMemset(d, 0, 4));
  bump<<<1, 1>>>(d);  // first launch loads the module
  REQUIRE_OK(cudaDeviceSynchronize());
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i < n; ++i) bump<<<1, 1>>>(d);
  EXPECT_OK(cudaDeviceSynchronize());
  auto t1 = std::chrono::steady_clock::now();
  int v = 0;
  EXPECT_OK(cudaMemcpy(&v, d, 4, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(v == n, "every launch ran, in order");
  double s = std::chrono::duration<double>(t1 - t0).count();
  fprintf(stderr, "launches/s %.0f\n", (n - 1) / s);
  cudaFree(d);
  return finish("kernels_launch_loop");
}
