// What a cuBLAS program costs at start: cublasCreate (timed, on stderr) and one SGEMM of 64 x 64
// matrices, with the toolkit's cuBLAS (NVIDIA's runtime linked into it, on whichever libcuda.so.1
// the process gets).  The product is checked when the device runs it; the host backend has no
// host implementation of cuBLAS's kernels, so there the launch fails and the program prints the
// error (tests/integration/startup_test.cc counts the images shipped and the round trips).
#include <cublas_v2.h>

#include <chrono>
#include <cmath>
#include <vector>

#include "check.h"

int main() {
  REQUIRE_OK(cudaFree(nullptr));  // the context, before the clock starts
  auto t0 = std::chrono::steady_clock::now();
  cublasHandle_t h = nullptr;
  cublasStatus_t st = cublasCreate(&h);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  fprintf(stderr, "startup_blas: cublasCreate took %.1f ms\n", ms);
  EXPECT_TRUE(st == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  if (st != CUBLAS_STATUS_SUCCESS) return finish("startup_blas");
  const int n = 64;
  std::vector<float> a(n * n), b(n * n), c(n * n, 0.f);
  for (int i = 0; i < n * n; ++i) {
    a[i] = static_cast<float>(i % 7) - 3.f;
    b[i] = static_cast<float>(i % 5) * 0.5f;
  }
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  REQUIRE_OK(cudaMalloc(&da, a.size() * 4));
  REQUIRE_OK(cudaMalloc(&db, b.size() * 4));
  REQUIRE_OK(cudaMalloc(&dc, c.size() * 4));
  REQUIRE_OK(cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice));
  REQUIRE_OK(cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice));
  const float one = 1.f, zero = 0.f;
  st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, da, n, db, n, &zero, dc, n);
  cudaError_t e = cudaDeviceSynchronize();
  printf("startup_blas: sgemm %s, synchronize %s\n",
         st == CUBLAS_STATUS_SUCCESS ? "launched" : "refused", cudaGetErrorName(e));
  if (st == CUBLAS_STATUS_SUCCESS && e == cudaSuccess) {
    REQUIRE_OK(cudaMemcpy(c.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost));
    bool same = true;
    for (int i = 0; i < n && same; ++i)
      for (int j = 0; j < n; ++j) {
        float want = 0.f;
        for (int k = 0; k < n; ++k) want += a[k * n + i] * b[j * n + k];
        same = same && std::fabs(c[j * n + i] - want) <= 1e-3f * (1.f + std::fabs(want));
      }
    EXPECT_TRUE(same, "SGEMM equals the host's product");
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  EXPECT_TRUE(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS, "cublasDestroy");
  return finish("startup_blas");
}
