// NVIDIA's libraries (cuBLAS, cuBLASLt, cuFFT, cuRAND, cuSOLVER, cuSPARSE) as a program uses
// them: unmodified, loaded from the toolkit, on whichever libcuda.so.1 the process gets (rgpu's
// under `rgpu run`).
//   nvidia_libs handles   handles, plans, streams, workspaces, descriptors, workspace/buffer size
//                         queries and matrix/vector copies: no kernel runs, so CI runs it against
//                         the host backend
//   nvidia_libs compute   also SGEMM/DDOT, a cuBLASLt matmul, FFTs, random numbers, Cholesky and
//                         LU solves and a sparse matrix-vector product, checked against the host
//                         (GPU only)
// Every line printed is the same natively and through rgpu.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cufft.h>
#include <curand.h>
#include <cusolverDn.h>
#include <cusparse.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "check.h"

namespace {

#define EXPECT_LIB(expr, ok_value)                 \
  do {                                             \
    int _s = static_cast<int>(expr);               \
    if (_s == static_cast<int>(ok_value)) {        \
      printf("ok   %s\n", #expr);                  \
    } else {                                       \
      printf("FAIL %-60s status %d\n", #expr, _s); \
      ++g_failures;                                \
    }                                              \
  } while (0)
#define EXPECT_BLAS(expr) EXPECT_LIB(expr, CUBLAS_STATUS_SUCCESS)
#define EXPECT_FFT(expr) EXPECT_LIB(expr, CUFFT_SUCCESS)
#define EXPECT_RAND(expr) EXPECT_LIB(expr, CURAND_STATUS_SUCCESS)
#define EXPECT_SOLVER(expr) EXPECT_LIB(expr, CUSOLVER_STATUS_SUCCESS)
#define EXPECT_SPARSE(expr) EXPECT_LIB(expr, CUSPARSE_STATUS_SUCCESS)

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
    EXPECT_BLAS(
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da, m, db, k, &beta, dc, m));
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
    EXPECT_BLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    EXPECT_BLAS(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &found));
    EXPECT_TRUE(found == 1, "cuBLASLt found an algorithm");
    REQUIRE_OK(cudaMemsetAsync(dc, 0, c.size() * 4, s));
    if (found == 1) {
      EXPECT_BLAS(cublasLtMatmul(lt, op, &alpha, da, la, db, lb, &beta, dc, lc, dc, lc, &heur.algo,
                                 work, ws, s));
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

// x = A \ b by Gaussian elimination with partial pivoting, in double (A: n x n, column-major).
std::vector<double> host_solve(std::vector<double> a, std::vector<double> b, int n) {
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int r = c + 1; r < n; ++r)
      if (std::fabs(a[r + c * n]) > std::fabs(a[p + c * n])) p = r;
    for (int k = 0; k < n; ++k) std::swap(a[c + k * n], a[p + k * n]);
    std::swap(b[c], b[p]);
    for (int r = c + 1; r < n; ++r) {
      double f = a[r + c * n] / a[c + c * n];
      for (int k = c; k < n; ++k) a[r + k * n] -= f * a[c + k * n];
      b[r] -= f * b[c];
    }
  }
  for (int r = n - 1; r >= 0; --r) {
    double v = b[r];
    for (int k = r + 1; k < n; ++k) v -= a[r + k * n] * b[k];
    b[r] = v / a[r + r * n];
  }
  return b;
}

// The largest difference between the n values of x and the host's solution of A x = b (column
// col of b), relative to the solution's largest value.
template <typename T, typename U>
double solve_error(const std::vector<U>& a, const std::vector<U>& b, const T* x, int n, int col) {
  std::vector<double> ref =
      host_solve(std::vector<double>(a.begin(), a.end()),
                 std::vector<double>(b.begin() + col * n, b.begin() + (col + 1) * n), n);
  double worst = 0, scale = 0;
  for (int i = 0; i < n; ++i) {
    worst = std::fmax(worst, std::fabs(ref[i] - double(x[i])));
    scale = std::fmax(scale, std::fabs(ref[i]));
  }
  return worst / std::fmax(scale, 1e-30);
}

// cuSOLVER (dense): a Cholesky solve in single precision and an LU solve in double precision of
// small, well-conditioned systems, against the host's solution.
void solver(bool compute) {
  int version = 0;
  EXPECT_SOLVER(cusolverGetVersion(&version));
  EXPECT_TRUE(version >= 12000, "cuSOLVER 12 (CUDA 13)");
  cusolverDnHandle_t h = nullptr;
  EXPECT_SOLVER(cusolverDnCreate(&h));
  if (!h) return;
  cudaStream_t s = nullptr;
  REQUIRE_OK(cudaStreamCreate(&s));
  EXPECT_SOLVER(cusolverDnSetStream(h, s));
  cudaStream_t got = nullptr;
  EXPECT_SOLVER(cusolverDnGetStream(h, &got));
  EXPECT_TRUE(got == s, "cusolverDnGetStream gives the stream set");

  const int n = 48, nrhs = 2;
  std::vector<float> spd(n * n), bs(n * nrhs);   // symmetric, diagonally dominant: definite
  std::vector<double> gen(n * n), bd(n * nrhs);  // diagonally dominant, not symmetric
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      spd[i + j * n] = 1.f / float(1 + std::abs(i - j)) + (i == j ? float(n) : 0.f);
      gen[i + j * n] = std::sin(3.0 * i + j) + (i == j ? 2.0 * n : 0.0);
    }
  for (int i = 0; i < n * nrhs; ++i) bs[i] = std::cos(0.1f * i), bd[i] = std::sin(0.07 * i) + 0.5;
  float *ds = nullptr, *dbs = nullptr;
  double *dg = nullptr, *dbd = nullptr;
  int *dinfo = nullptr, *dipiv = nullptr;
  REQUIRE_OK(cudaMalloc(&ds, spd.size() * 4));
  REQUIRE_OK(cudaMalloc(&dbs, bs.size() * 4));
  REQUIRE_OK(cudaMalloc(&dg, gen.size() * 8));
  REQUIRE_OK(cudaMalloc(&dbd, bd.size() * 8));
  REQUIRE_OK(cudaMalloc(&dinfo, 4 * sizeof(int)));
  REQUIRE_OK(cudaMalloc(&dipiv, n * sizeof(int)));
  REQUIRE_OK(cudaMemcpyAsync(ds, spd.data(), spd.size() * 4, cudaMemcpyHostToDevice, s));
  REQUIRE_OK(cudaMemcpyAsync(dbs, bs.data(), bs.size() * 4, cudaMemcpyHostToDevice, s));
  REQUIRE_OK(cudaMemcpyAsync(dg, gen.data(), gen.size() * 8, cudaMemcpyHostToDevice, s));
  REQUIRE_OK(cudaMemcpyAsync(dbd, bd.data(), bd.size() * 8, cudaMemcpyHostToDevice, s));
  int lwork_chol = -1, lwork_lu = -1;
  EXPECT_SOLVER(cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, ds, n, &lwork_chol));
  EXPECT_SOLVER(cusolverDnDgetrf_bufferSize(h, n, n, dg, n, &lwork_lu));
  EXPECT_TRUE(lwork_chol >= 0 && lwork_lu >= 0, "potrf and getrf workspace sizes");
  printf("cusolver workspace elements: potrf %d, getrf %d\n", lwork_chol, lwork_lu);

  if (compute && lwork_chol >= 0 && lwork_lu >= 0) {
    float* work_s = nullptr;
    double* work_d = nullptr;
    REQUIRE_OK(cudaMalloc(&work_s, (lwork_chol + 1) * sizeof(float)));
    REQUIRE_OK(cudaMalloc(&work_d, (lwork_lu + 1) * sizeof(double)));
    REQUIRE_OK(cudaMemsetAsync(dinfo, 0xff, 4 * sizeof(int), s));  // -1 until written
    EXPECT_SOLVER(cusolverDnSpotrf(h, CUBLAS_FILL_MODE_LOWER, n, ds, n, work_s, lwork_chol, dinfo));
    EXPECT_SOLVER(cusolverDnSpotrs(h, CUBLAS_FILL_MODE_LOWER, n, nrhs, ds, n, dbs, n, dinfo + 1));
    EXPECT_SOLVER(cusolverDnDgetrf(h, n, n, dg, n, work_d, dipiv, dinfo + 2));
    EXPECT_SOLVER(cusolverDnDgetrs(h, CUBLAS_OP_N, n, nrhs, dg, n, dipiv, dbd, n, dinfo + 3));
    int info[4] = {-1, -1, -1, -1};
    std::vector<float> xs(bs.size());
    std::vector<double> xd(bd.size());
    EXPECT_OK(cudaMemcpyAsync(info, dinfo, sizeof info, cudaMemcpyDeviceToHost, s));
    EXPECT_OK(cudaMemcpyAsync(xs.data(), dbs, xs.size() * 4, cudaMemcpyDeviceToHost, s));
    EXPECT_OK(cudaMemcpyAsync(xd.data(), dbd, xd.size() * 8, cudaMemcpyDeviceToHost, s));
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT_TRUE(info[0] == 0 && info[1] == 0 && info[2] == 0 && info[3] == 0,
                "potrf, potrs, getrf and getrs report success (devInfo 0)");
    double err_s = 0, err_d = 0;
    for (int col = 0; col < nrhs; ++col) {
      err_s = std::fmax(err_s, solve_error(spd, bs, xs.data() + col * n, n, col));
      err_d = std::fmax(err_d, solve_error(gen, bd, xd.data() + col * n, n, col));
    }
    EXPECT_TRUE(err_s < 1e-4, "Cholesky solve (potrf, potrs) equals the host's solution");
    EXPECT_TRUE(err_d < 1e-9, "LU solve (getrf, getrs) equals the host's solution");
    cudaFree(work_s);
    cudaFree(work_d);
  }
  EXPECT_SOLVER(cusolverDnDestroy(h));
  for (void* p : {(void*)ds, (void*)dbs, (void*)dg, (void*)dbd, (void*)dinfo, (void*)dipiv})
    cudaFree(p);
  cudaStreamDestroy(s);
}

// cuSPARSE (generic API): y = alpha A x + beta y for a CSR matrix, against the host's product.
void sparse(bool compute) {
  cusparseHandle_t h = nullptr;
  EXPECT_SPARSE(cusparseCreate(&h));
  if (!h) return;
  int version = 0;
  EXPECT_SPARSE(cusparseGetVersion(h, &version));
  EXPECT_TRUE(version >= 12000, "cuSPARSE 12 (CUDA 13)");
  cudaStream_t s = nullptr;
  REQUIRE_OK(cudaStreamCreate(&s));
  EXPECT_SPARSE(cusparseSetStream(h, s));
  cudaStream_t got = nullptr;
  EXPECT_SPARSE(cusparseGetStream(h, &got));
  EXPECT_TRUE(got == s, "cusparseGetStream gives the stream set");

  const int rows = 1000, cols = 800;
  std::vector<int> offsets(1, 0), ind;
  std::vector<float> val, x(cols), y(rows);
  for (int r = 0; r < rows; ++r) {  // up to four entries a row, sorted columns
    for (int c : std::set<int>{r % cols, (r * 37 + 11) % cols, (r + 5) % cols, (r * r) % cols})
      ind.push_back(c), val.push_back(1.f + float(ind.size() % 7) * 0.25f - float(r % 3));
    offsets.push_back(static_cast<int>(ind.size()));
  }
  for (int i = 0; i < cols; ++i) x[i] = std::cos(0.01f * i);
  for (int i = 0; i < rows; ++i) y[i] = 1.f - 0.001f * i;
  const int nnz = static_cast<int>(ind.size());
  int *doff = nullptr, *dind = nullptr;
  float *dval = nullptr, *dx = nullptr, *dy = nullptr;
  REQUIRE_OK(cudaMalloc(&doff, offsets.size() * 4));
  REQUIRE_OK(cudaMalloc(&dind, ind.size() * 4));
  REQUIRE_OK(cudaMalloc(&dval, val.size() * 4));
  REQUIRE_OK(cudaMalloc(&dx, x.size() * 4));
  REQUIRE_OK(cudaMalloc(&dy, y.size() * 4));
  REQUIRE_OK(cudaMemcpy(doff, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice));
  REQUIRE_OK(cudaMemcpy(dind, ind.data(), ind.size() * 4, cudaMemcpyHostToDevice));
  REQUIRE_OK(cudaMemcpy(dval, val.data(), val.size() * 4, cudaMemcpyHostToDevice));
  REQUIRE_OK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  REQUIRE_OK(cudaMemcpy(dy, y.data(), y.size() * 4, cudaMemcpyHostToDevice));
  cusparseSpMatDescr_t mat = nullptr;
  cusparseDnVecDescr_t vx = nullptr, vy = nullptr;
  EXPECT_SPARSE(cusparseCreateCsr(&mat, rows, cols, nnz, doff, dind, dval, CUSPARSE_INDEX_32I,
                                  CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  EXPECT_SPARSE(cusparseCreateDnVec(&vx, cols, dx, CUDA_R_32F));
  EXPECT_SPARSE(cusparseCreateDnVec(&vy, rows, dy, CUDA_R_32F));
  int64_t r64 = 0, c64 = 0, nnz64 = 0;
  EXPECT_SPARSE(cusparseSpMatGetSize(mat, &r64, &c64, &nnz64));
  EXPECT_TRUE(r64 == rows && c64 == cols && nnz64 == nnz, "the CSR descriptor has its sizes");
  const float alpha = 2.f, beta = 0.5f;
  size_t bytes = SIZE_MAX;
  EXPECT_SPARSE(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, mat, vx, &beta,
                                        vy, CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, &bytes));
  EXPECT_TRUE(bytes != SIZE_MAX, "SpMV buffer size");
  printf("cusparse SpMV buffer: %zu bytes\n", bytes);

  if (compute && bytes != SIZE_MAX) {
    void* buf = nullptr;
    REQUIRE_OK(cudaMalloc(&buf, bytes + 1));
    EXPECT_SPARSE(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, mat, vx, &beta, vy,
                               CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, buf));
    std::vector<float> out(rows);
    EXPECT_OK(cudaMemcpyAsync(out.data(), dy, out.size() * 4, cudaMemcpyDeviceToHost, s));
    EXPECT_OK(cudaStreamSynchronize(s));
    double worst = 0, scale = 0;
    for (int r = 0; r < rows; ++r) {
      double ref = double(beta) * y[r];
      for (int k = offsets[r]; k < offsets[r + 1]; ++k) ref += double(alpha) * val[k] * x[ind[k]];
      worst = std::fmax(worst, std::fabs(ref - out[r]));
      scale = std::fmax(scale, std::fabs(ref));
    }
    EXPECT_TRUE(scale > 0 && worst <= 1e-5 * scale, "SpMV equals the host's product");
    cudaFree(buf);
  }
  EXPECT_SPARSE(cusparseDestroyDnVec(vx));
  EXPECT_SPARSE(cusparseDestroyDnVec(vy));
  EXPECT_SPARSE(cusparseDestroySpMat(mat));
  EXPECT_SPARSE(cusparseDestroy(h));
  for (void* p : {(void*)doff, (void*)dind, (void*)dval, (void*)dx, (void*)dy}) cudaFree(p);
  cudaStreamDestroy(s);
}

}  // namespace

int main(int argc, char** argv) {
  const bool compute = argc > 1 && strcmp(argv[1], "compute") == 0;
  // "handles-quick": cuBLAS and cuFFT only (cuSOLVER's and cuSPARSE's hundreds of module loads
  // take minutes under the sanitizers).
  const bool quick = argc > 1 && strcmp(argv[1], "handles-quick") == 0;
  REQUIRE_OK(cudaSetDevice(0));
  blas(compute);
  fft(compute);
  if (compute) rand_numbers();
  if (!quick) {
    solver(compute);
    sparse(compute);
  }
  return finish("nvidia_libs");
}
