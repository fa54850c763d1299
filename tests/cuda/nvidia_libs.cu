// NVIDIA's libraries (cuBLAS, cuBLASLt, cuFFT, cuRAND) as a program uses them: unmodified, loaded
// from the toolkit, on whichever libcuda.so.1 the process gets (rgpu's under `rgpu run`).
//   nvidia_libs handles   handles, plans, streams, workspaces and matrix/vector copies: no kernel
//                         runs, so CI runs it against the host backend
//   nvidia_libs compute   also SGEMM/DGEMM, a cuBLASLt matmul, FFTs and random numbers, checked
//                         against the host (GPU only)
// Every line printed is the same natively and through rgpu.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cufft.h>
#include <curand.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <vector>

#include "check.h"

namespace {

#define EXPECT_LIB(expr, ok_value)                                       \
  do {                                                                   \
    int _s = static_cast<int>(expr);                                     \
    if (_s == static_cast<int>(ok_value)) {                              \
      printf("ok   %s\n", #expr);                                     \
    } else {                                                             \
      printf("FAIL %-60s status %d\n", #expr, _s);                       \
      ++g_failures;                                                      \
    }                                                                    \
  } while (0)
#define EXPECT_BLAS(expr) EXPECT_LIB(expr, CUBLAS_STATUS_SUCCESS)
#define EXPECT_FFT(expr) EXPECT_LIB(expr, CUFFT_SUCCESS)
#define EXPECT_RAND(expr) EXPECT_LIB(expr, CURAND_STATUS_SUCCESS)

void blas(bool compute) {
  cublasHandle_t h = nullptr;
  EXPECT_BLAS(cublasCreate(&h));
  if (!h) return;
  int version = 0;
  EXPECT_BLAS(cublasGetVersion(h, &version));
  EXPECT_TRUE(version >= 130000, "cuBLAS 13");
  cudaStream_t s = nullptr;
  REQUIRE_OK(cudaStreamCreate(&s));
  EXPECT_BLAS(cublasSetStream(h, s));
  cudaStream_t got = nullptr;
  EXPECT_BLAS(cublasGetStream(h, &got));
  EXPECT_TRUE(got == s, "cublasGetStream gives the stream set");
  EXPECT_BLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  EXPECT_BLAS(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));

  const int m = 96, n = 80, k = 64;
  std::vector<float> a(m * k), b(k * n), c(m * n, 0.f), back(m * k);
  for (int i = 0; i < m * k; ++i) a[i] = static_cast<float>((i * 7) % 13) - 6.f;
  for (int i = 0; i < k * n; ++i) b[i] = static_cast<float>((i * 5) % 11) * 0.25f - 1.f;
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  REQUIRE_OK(cudaMalloc(&da, a.size() * 4));
  REQUIRE_OK(cudaMalloc(&db, b.size() * 4));
  REQUIRE_OK(cudaMalloc(&dc, c.size() * 4));
  EXPECT_BLAS(cublasSetMatrix(m, k, 4, a.data(), m, da, m));
  EXPECT_BLAS(cublasGetMatrix(m, k, 4, da, m, back.data(), m));
  EXPECT_TRUE(back == a, "cublasSetMatrix/GetMatrix round trip");
  EXPECT_BLAS(cublasSetMatrixAsync(k, n, 4, b.data(), k, db, k, s));
  std::vector<float> vb(k * n);
  EXPECT_BLAS(cublasGetVectorAsync(k * n, 4, db, 1, vb.data(), 1, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(vb == b, "async matrix in, vector out, in stream order");
  void* work = nullptr;
  REQUIRE_OK(cudaMalloc(&work, 1 << 22));
  EXPECT_BLAS(cublasSetWorkspace(h, work, 1 << 22));

  if (compute) {
    const float alpha = 1.f, beta = 0.f;
    EXPECT_BLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da, m, db, k, &beta,
                            dc, m));
    EXPECT_BLAS(cublasGetMatrixAsync(m, n, 4, dc, m, c.data(), m, s));
    EXPECT_OK(cudaStreamSynchronize(s));
    double worst = 0;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double ref = 0;
        for (int l = 0; l < k; ++l) ref += double(a[i + l * m]) * b[l + j * k];
        worst = std::fmax(worst, std::fabs(ref - c[i + j * m]));
      }
    EXPECT_TRUE(worst < 1e-2, "SGEMM equals the host's product");

    std::vector<double> x(4096), y(4096);
    for (int i = 0; i < 4096; ++i) x[i] = std::sin(i * 0.01), y[i] = std::cos(i * 0.02);
    double *dx = nullptr, *dy = nullptr;
    REQUIRE_OK(cudaMalloc(&dx, x.size() * 8));
    REQUIRE_OK(cudaMalloc(&dy, y.size() * 8));
    EXPECT_BLAS(cublasSetVector(4096, 8, x.data(), 1, dx, 1));
    EXPECT_BLAS(cublasSetVector(4096, 8, y.data(), 1, dy, 1));
    double dot = 0, ref = 0;
    for (int i = 0; i < 4096; ++i) ref += x[i] * y[i];
    EXPECT_BLAS(cublasDdot(h, 4096, dx, 1, dy, 1, &dot));
    EXPECT_TRUE(std::fabs(dot - ref) < 1e-9 * 4096, "DDOT equals the host's");
    cudaFree(dx);
    cudaFree(dy);

    // cuBLASLt: the same product through a matmul descriptor and a heuristic's algorithm.
    cublasLtHandle_t lt = nullptr;
    EXPECT_BLAS(cublasLtCreate(&lt));
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    EXPECT_BLAS(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    EXPECT_BLAS(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m));
    EXPECT_BLAS(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k));
    EXPECT_BLAS(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m));
    cublasLtMatmulPreference_t pref = nullptr;
    EXPECT_BLAS(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = 1 << 22;
    EXPECT_BLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    EXPECT_BLAS(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &found));
    EXPECT_TRUE(found == 1, "cuBLASLt found an algorithm");
    REQUIRE_OK(cudaMemsetAsync(dc, 0, c.size() * 4, s));
    if (found == 1) {
      EXPECT_BLAS(cublasLtMatmul(lt, op, &alpha, da, la, db, lb, &beta, dc, lc, dc, lc,
                                 &heur.algo, work, ws, s));
      std::vector<float> c2(m * n);
      EXPECT_OK(cudaMemcpyAsync(c2.data(), dc, c2.size() * 4, cudaMemcpyDeviceToHost, s));
      EXPECT_OK(cudaStreamSynchronize(s));
      double diff = 0;
      for (int i = 0; i < m * n; ++i) diff = std::fmax(diff, std::fabs(c2[i] - c[i]));
      EXPECT_TRUE(diff < 1e-2, "cuBLASLt matmul equals SGEMM");
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
    EXPECT_BLAS(cublasLtDestroy(lt));
  }
  EXPECT_BLAS(cublasDestroy(h));
  cudaFree(work);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cudaStreamDestroy(s);
}

void fft(bool compute) {
  const int n = 1024, batch = 4;
  cufftHandle plan = 0;
  EXPECT_FFT(cufftPlan1d(&plan, n, CUFFT_C2C, batch));
  cudaStream_t s = nullptr;
  REQUIRE_OK(cudaStreamCreate(&s));
  EXPECT_FFT(cufftSetStream(plan, s));
  size_t work = 0;
  EXPECT_FFT(cufftGetSize(plan, &work));
  int version = 0;
  EXPECT_FFT(cufftGetVersion(&version));
  EXPECT_TRUE(version > 0, "cuFFT has a version");
  cufftHandle plan2 = 0;  // a second plan on another stream (multi-stream use)
  int dims[2] = {64, 32};
  EXPECT_FFT(cufftPlanMany(&plan2, 2, dims, nullptr, 1, 0, nullptr, 1, 0, CUFFT_R2C, 2));
  cudaStream_t s2 = nullptr;
  REQUIRE_OK(cudaStreamCreate(&s2));
  EXPECT_FFT(cufftSetStream(plan2, s2));

  if (compute) {
    std::vector<std::complex<float>> in(n * batch), out(n * batch), back(n * batch);
    for (int b = 0; b < batch; ++b)
      for (int i = 0; i < n; ++i)
        in[b * n + i] = {std::cos(0.05f * i * (b + 1)), std::sin(0.03f * i) * b};
    cufftComplex* d = nullptr;
    REQUIRE_OK(cudaMalloc(&d, in.size() * sizeof(cufftComplex)));
    REQUIRE_OK(cudaMemcpyAsync(d, in.data(), in.size() * 8, cudaMemcpyHostToDevice, s));
    EXPECT_FFT(cufftExecC2C(plan, d, d, CUFFT_FORWARD));
    REQUIRE_OK(cudaMemcpyAsync(out.data(), d, out.size() * 8, cudaMemcpyDeviceToHost, s));
    EXPECT_FFT(cufftExecC2C(plan, d, d, CUFFT_INVERSE));
    REQUIRE_OK(cudaMemcpyAsync(back.data(), d, back.size() * 8, cudaMemcpyDeviceToHost, s));
    EXPECT_OK(cudaStreamSynchronize(s));
    double worst = 0;  // bin 7 of batch 1 against a direct DFT, and the round trip
    for (int f : {0, 7, 100}) {
      std::complex<double> ref = 0;
      for (int i = 0; i < n; ++i)
        ref += std::complex<double>(in[n + i]) * std::polar(1.0, -2 * M_PI * f * i / n);
      worst = std::fmax(worst, std::abs(ref - std::complex<double>(out[n + f])));
    }
    EXPECT_TRUE(worst < 1e-2, "C2C forward equals a direct DFT");
    double rt = 0;
    for (int i = 0; i < n * batch; ++i) rt = std::fmax(rt, std::abs(back[i] / float(n) - in[i]));
    EXPECT_TRUE(rt < 1e-4, "C2C inverse gives the input back");
    cudaFree(d);
  }
  EXPECT_FFT(cufftDestroy(plan2));
  EXPECT_FFT(cufftDestroy(plan));
  cudaStreamDestroy(s);
  cudaStreamDestroy(s2);
}

void rand_numbers() {  // compute only: generating runs kernels
  curandGenerator_t g = nullptr;
  EXPECT_RAND(curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10));
  EXPECT_RAND(curandSetPseudoRandomGeneratorSeed(g, 1234));
  float* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, 1 << 20));
  EXPECT_RAND(curandGenerateUniform(g, d, 1 << 18));
  std::vector<float> v(1 << 18);
  EXPECT_OK(cudaMemcpy(v.data(), d, v.size() * 4, cudaMemcpyDeviceToHost));
  double sum = 0;
  bool in_range = true;
  for (float x : v) sum += x, in_range = in_range && x > 0.f && x <= 1.f;
  EXPECT_TRUE(in_range && std::fabs(sum / v.size() - 0.5) < 0.01, "uniform numbers in (0, 1]");
  // The same seed gives the same numbers: print a checksum (identical natively and through rgpu).
  unsigned long long bits = 0;
  for (size_t i = 0; i < v.size(); i += 997) {
    unsigned u;
    memcpy(&u, &v[i], 4);
    bits = bits * 31 + u;
  }
  printf("curand checksum %016llx\n", bits);
  EXPECT_RAND(curandDestroyGenerator(g));
  cudaFree(d);
}

}  // namespace

int main(int argc, char** argv) {
  const bool compute = argc > 1 && strcmp(argv[1], "compute") == 0;
  REQUIRE_OK(cudaSetDevice(0));
  blas(compute);
  fft(compute);
  if (compute) rand_numbers();
  return finish("nvidia_libs");
}
