// The toolkit's cuBLAS without cublasSetWorkspace (its per-stream workspace pool: TOOLS_CONTEXT
// slots 51 and 39 of the driver's export table), as a program built with -lcublas gets it:
// Sgemm, Sdot and Dgemv against host results.  Prints "ok NAME" or "FAIL NAME status".
//   nvcc -o toolkit_blas toolkit_blas.cu -lcublas
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

static int failures = 0;
static void report(const char* name, cublasStatus_t st, bool good) {
  if (st == CUBLAS_STATUS_SUCCESS && good) {
    printf("ok   %s\n", name);
  } else {
    printf("FAIL %s status=%d values=%s\n", name, (int)st, good ? "ok" : "wrong");
    ++failures;
  }
}

int main() {
  const int n = 64;
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    printf("FAIL cublasCreate\n");
    return 1;
  }
  std::vector<float> a(n * n), b(n * n), c(n * n, 0), want(n * n, 0);
  for (int i = 0; i < n * n; ++i) a[i] = (i % 7) * 0.25f, b[i] = (i % 5) * 0.5f;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < n; ++k) want[i + j * n] += a[i + k * n] * b[k + j * n];
  float *da, *db, *dc;
  cudaMalloc(&da, n * n * 4), cudaMalloc(&db, n * n * 4), cudaMalloc(&dc, n * n * 4);
  cudaMemcpy(da, a.data(), n * n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), n * n * 4, cudaMemcpyHostToDevice);
  const float one = 1, zero = 0;
  cublasStatus_t st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, da, n, db, n, &zero, dc, n);
  cudaMemcpy(c.data(), dc, n * n * 4, cudaMemcpyDeviceToHost);
  bool good = true;
  for (int i = 0; i < n * n; ++i) good = good && std::fabs(c[i] - want[i]) < 1e-2f * (1 + std::fabs(want[i]));
  report("sgemm", st, good);
  float dot = 0, wdot = 0;
  for (int i = 0; i < n; ++i) wdot += a[i] * b[i];
  st = cublasSdot(h, n, da, 1, db, 1, &dot);
  report("sdot", st, std::fabs(dot - wdot) < 1e-3f * (1 + std::fabs(wdot)));
  std::vector<double> m(n * n), x(n), y(n, 0), wy(n, 0);
  for (int i = 0; i < n * n; ++i) m[i] = (i % 11) * 0.125;
  for (int i = 0; i < n; ++i) x[i] = i * 0.5;
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < n; ++k) wy[i] += m[i + k * n] * x[k];
  double *dm, *dx, *dy;
  cudaMalloc(&dm, n * n * 8), cudaMalloc(&dx, n * 8), cudaMalloc(&dy, n * 8);
  cudaMemcpy(dm, m.data(), n * n * 8, cudaMemcpyHostToDevice);
  cudaMemcpy(dx, x.data(), n * 8, cudaMemcpyHostToDevice);
  const double d1 = 1, d0 = 0;
  st = cublasDgemv(h, CUBLAS_OP_N, n, n, &d1, dm, n, dx, 1, &d0, dy, 1);
  cudaMemcpy(y.data(), dy, n * 8, cudaMemcpyDeviceToHost);
  good = true;
  for (int i = 0; i < n; ++i) good = good && std::fabs(y[i] - wy[i]) < 1e-9 * (1 + std::fabs(wy[i]));
  report("dgemv", st, good);
  cublasDestroy(h);
  printf("toolkit_blas: %d failures\n", failures);
  return failures != 0;
}
