// Ordinary kernels: vector add, tiled matrix multiply, reduction, templates, structs by value,
// 22 parameters, and more than 4 KiB of parameters, each checked against the CPU.
#include <cmath>
#include <cstring>
#include <vector>

#include "check.h"

extern "C" __global__ void vec_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

#define TILE 16
extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N,
                                        int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0;
  for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
    int ka = t * TILE + threadIdx.x, kb = t * TILE + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[row * K + ka] : 0.f;
    Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[kb * N + col] : 0.f;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

extern "C" __global__ void reduce_sum(const int* in, unsigned long long* out, int n) {
  extern __shared__ int buf[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = i < n ? in[i] : 0;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, static_cast<unsigned long long>(buf[0]));
}

template <class T>
__global__ void scale(T* data, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * factor;
}

struct Padded {
  char c;
  double d;
  int i;
  short s;
};
struct WithArray {
  int a[5];
  char c;
};
extern "C" __global__ void struct_args(Padded p, WithArray w, double* out) {
  out[0] = p.c + p.d + p.i + p.s;
  double s = w.c;
  for (int k = 0; k < 5; ++k) s += w.a[k] * (k + 1);
  out[1] = s;
}

extern "C" __global__ void many_params(int a0, char a1, double a2, short a3, float a4, long long a5,
                                       int a6, char a7, int a8, double a9, int a10, float a11,
                                       char a12, int a13, short a14, int a15, double a16, char a17,
                                       int a18, float a19, int a20, double* out) {
  out[0] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12 + a13 + a14 + a15 +
           a16 + a17 + a18 + a19 + a20;
}

struct Big {
  int v[1200];
};
extern "C" __global__ void big_params(Big big, long long* out, char tail) {
  long long s = tail;
  for (int k = 0; k < 1200; ++k) s += static_cast<long long>(big.v[k]) * (k % 7);
  out[0] = s;
}

template <class T>
static bool check_scale(T factor) {
  const int n = 1000;
  std::vector<T> h(n);
  for (int i = 0; i < n; ++i) h[i] = static_cast<T>(i % 17);
  T* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, n * sizeof(T)));
  REQUIRE_OK(cudaMemcpy(d, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  scale<T><<<(n + 255) / 256, 256>>>(d, factor, n);
  std::vector<T> back(n);
  REQUIRE_OK(cudaMemcpy(back.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  REQUIRE_OK(cudaFree(d));
  for (int i = 0; i < n; ++i)
    if (back[i] != static_cast<T>(i % 17) * factor) return false;
  return true;
}

int main() {
  {  // vector add
    const int n = (1 << 20) + 7;
    std::vector<float> a(n), b(n), c(n);
    for (int i = 0; i < n; ++i) a[i] = i * 0.5f, b[i] = 1000.f - i;
    float *da, *db, *dc;
    REQUIRE_OK(cudaMalloc(&da, n * 4));
    REQUIRE_OK(cudaMalloc(&db, n * 4));
    REQUIRE_OK(cudaMalloc(&dc, n * 4));
    REQUIRE_OK(cudaMemcpy(da, a.data(), n * 4, cudaMemcpyHostToDevice));
    REQUIRE_OK(cudaMemcpy(db, b.data(), n * 4, cudaMemcpyHostToDevice));
    vec_add<<<(n + 255) / 256, 256>>>(da, db, dc, n);
    EXPECT_OK(cudaGetLastError());
    EXPECT_OK(cudaMemcpy(c.data(), dc, n * 4, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int i = 0; i < n; ++i) ok = ok && c[i] == a[i] + b[i];
    EXPECT_TRUE(ok, "vector add of 1M+7 floats");
    cudaFree(da), cudaFree(db), cudaFree(dc);
  }
  {  // tiled matrix multiply
    const int M = 100, N = 90, K = 130;
    std::vector<float> A(M * K), B(K * N), C(M * N), ref(M * N, 0.f);
    for (int i = 0; i < M * K; ++i) A[i] = static_cast<float>((i * 7) % 11) - 5;
    for (int i = 0; i < K * N; ++i) B[i] = static_cast<float>((i * 3) % 13) - 6;
    for (int r = 0; r < M; ++r)
      for (int k = 0; k < K; ++k)
        for (int c = 0; c < N; ++c) ref[r * N + c] += A[r * K + k] * B[k * N + c];
    float *dA, *dB, *dC;
    REQUIRE_OK(cudaMalloc(&dA, A.size() * 4));
    REQUIRE_OK(cudaMalloc(&dB, B.size() * 4));
    REQUIRE_OK(cudaMalloc(&dC, C.size() * 4));
    REQUIRE_OK(cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice));
    REQUIRE_OK(cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice));
    dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    matmul_tiled<<<grid, block>>>(dA, dB, dC, M, N, K);
    EXPECT_OK(cudaMemcpy(C.data(), dC, C.size() * 4, cudaMemcpyDeviceToHost));
    EXPECT_TRUE(C == ref, "tiled matrix multiply 100x130 * 130x90 (exact small integers)");
    cudaFree(dA), cudaFree(dB), cudaFree(dC);
  }
  {  // reduction with dynamic shared memory
    const int n = 1000003;
    std::vector<int> h(n);
    unsigned long long ref = 0;
    for (int i = 0; i < n; ++i) h[i] = (i * 31) % 1000, ref += h[i];
    int* d;
    unsigned long long* dsum;
    REQUIRE_OK(cudaMalloc(&d, n * 4));
    REQUIRE_OK(cudaMalloc(&dsum, 8));
    REQUIRE_OK(cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice));
    REQUIRE_OK(cudaMemset(dsum, 0, 8));
    reduce_sum<<<(n + 511) / 512, 512, 512 * sizeof(int)>>>(d, dsum, n);
    unsigned long long sum = 0;
    EXPECT_OK(cudaMemcpy(&sum, dsum, 8, cudaMemcpyDeviceToHost));
    EXPECT_TRUE(sum == ref, "reduction of 1000003 ints (shared memory, atomicAdd)");
    cudaFree(d), cudaFree(dsum);
  }
  EXPECT_TRUE(check_scale<int>(3), "template kernel scale<int>");
  EXPECT_TRUE(check_scale<float>(0.5f), "template kernel scale<float>");
  EXPECT_TRUE(check_scale<double>(-2.0), "template kernel scale<double>");
  {  // structs by value
    Padded p{7, 1.25, -3, 1000};
    WithArray w{{1, 2, 3, 4, 5}, 9};
    double* d;
    REQUIRE_OK(cudaMalloc(&d, 16));
    struct_args<<<1, 1>>>(p, w, d);
    double out[2];
    EXPECT_OK(cudaMemcpy(out, d, 16, cudaMemcpyDeviceToHost));
    EXPECT_TRUE(out[0] == 7 + 1.25 - 3 + 1000 && out[1] == 9 + 1 + 4 + 9 + 16 + 25,
                "structs with padding and arrays passed by value");
    cudaFree(d);
  }
  {  // 22 parameters
    double* d;
    REQUIRE_OK(cudaMalloc(&d, 8));
    many_params<<<1, 1>>>(1, 2, 3.5, 4, 5.5f, 6, 7, 8, 9, 10.25, 11, 12.5f, 13, 14, 15, 16, 17.75,
                          18, 19, 20.5f, 21, d);
    double out = 0;
    EXPECT_OK(cudaMemcpy(&out, d, 8, cudaMemcpyDeviceToHost));
    EXPECT_TRUE(out == 1 + 2 + 3.5 + 4 + 5.5 + 6 + 7 + 8 + 9 + 10.25 + 11 + 12.5 + 13 + 14 + 15 +
                           16 + 17.75 + 18 + 19 + 20.5 + 21,
                "a kernel with 22 parameters of mixed types");
    cudaFree(d);
  }
  {  // > 4 KiB of parameters
    Big big;
    long long ref = 5;
    for (int k = 0; k < 1200; ++k)
      big.v[k] = k * 3 - 100, ref += static_cast<long long>(big.v[k]) * (k % 7);
    long long* d;
    REQUIRE_OK(cudaMalloc(&d, 8));
    big_params<<<1, 1>>>(big, d, 5);
    long long out = 0;
    EXPECT_OK(cudaMemcpy(&out, d, 8, cudaMemcpyDeviceToHost));
    EXPECT_TRUE(out == ref, "a kernel with 4809 bytes of parameters");
    cudaFree(d);
  }
  EXPECT_OK(cudaDeviceSynchronize());
  return finish("kernels_basic");
}
