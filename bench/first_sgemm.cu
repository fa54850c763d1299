// rgpu bench's time-to-first-kernel program: a fresh process creates a cuBLAS handle, runs one
// SGEMM of 64 x 64 matrices and synchronizes.  `rgpu bench` times the whole process (exec to
// exit: library loading, connecting, the context, cuBLAS's modules); this program prints its own
// share from main() on, and whether the SGEMM ran:
//   first_sgemm_main_s <seconds>
//   first_sgemm_ran <1|0>
// 0 only where the server cannot run cuBLAS's kernel (cudaErrorNotSupported at the
// synchronization: rgpud's host backend, which has no host implementation of it); then the time
// still covers everything up to the launch.  Any other failure, or a wrong product, exits 1.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  const auto t0 = std::chrono::steady_clock::now();
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "first_sgemm: cublasCreate failed\n");
    return 1;
  }
  const int n = 64;
  std::vector<float> a(n * n), b(n * n), c(n * n, 0.f);
  for (int i = 0; i < n * n; ++i) {
    a[i] = static_cast<float>(i % 7) - 3.f;
    b[i] = static_cast<float>(i % 5) * 0.5f;
  }
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  const size_t bytes = a.size() * sizeof(float);
  if (cudaMalloc(&da, bytes) != cudaSuccess || cudaMalloc(&db, bytes) != cudaSuccess ||
      cudaMalloc(&dc, bytes) != cudaSuccess ||
      cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    fprintf(stderr, "first_sgemm: cannot set up the matrices\n");
    return 1;
  }
  const float one = 1.f, zero = 0.f;
  if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, da, n, db, n, &zero, dc, n) !=
      CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "first_sgemm: cublasSgemm refused\n");
    return 1;
  }
  const cudaError_t e = cudaDeviceSynchronize();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (e != cudaSuccess && e != cudaErrorNotSupported) {
    fprintf(stderr, "first_sgemm: synchronize: %s\n", cudaGetErrorName(e));
    return 1;
  }
  if (e == cudaSuccess) {
    // The product, so that a fast wrong answer is not a result.
    if (cudaMemcpy(c.data(), dc, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        float want = 0.f;
        for (int k = 0; k < n; ++k) want += a[k * n + i] * b[j * n + k];
        if (std::fabs(c[j * n + i] - want) > 1e-3f * (1.f + std::fabs(want))) {
          fprintf(stderr, "first_sgemm: wrong product at (%d, %d)\n", i, j);
          return 1;
        }
      }
  }
  printf("first_sgemm_main_s %.6f\nfirst_sgemm_ran %d\n", s, e == cudaSuccess ? 1 : 0);
  return 0;  // the handle and memory go with the process, as a short program's would
}
