// Kernels whose parameter layouts the fatbin unit test checks (nvcc builds this several ways).
#include "kernel_types.h"

extern "C" __global__ void k_empty() {}
extern "C" __global__ void k_basic(float* a, int b, double c, const int* d) {
  if (a) a[0] = b + c + d[0];
}
extern "C" __global__ void k_struct(float* a, int b, double c, Padded s, const int* e) {
  if (a) a[0] = b + c + s.d + s.c + s.i + s.s + e[0];
}
extern "C" __global__ void k_vectors(float4 a, int3 b, double2 c, bool d, unsigned char e, long f,
                                     float* __restrict__ g, int h, WithArray w) {
  if (g) g[0] = a.x + b.y + c.x + d + e + f + h + w.a[4] + w.c;
}
extern "C" __global__ void k_many(int a0, char a1, double a2, short a3, float a4, long long a5,
                                  int a6, char a7, int a8, double a9, int a10, float a11, char a12,
                                  int a13, short a14, int a15, double a16, char a17, int a18,
                                  float a19, int a20, int* out) {
  if (out)
    out[0] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12 + a13 + a14 + a15 +
             a16 + a17 + a18 + a19 + a20;
}
extern "C" __global__ void k_huge(Big big, int* out, char tail) {
  if (out) out[0] = big.v[0] + big.v[1199] + tail;
}
template <class T>
__global__ void k_template(T* out, T value, int n) {
  if (out && n) out[0] = value;
}
template __global__ void k_template<int>(int*, int, int);
template __global__ void k_template<double>(double*, double, int);
template __global__ void k_template<Padded>(Padded*, Padded, int);

__device__ int g_init = 5;
__device__ float g_zero[8];
__constant__ float g_const[4] = {1.0f, 2.0f, 3.0f, 4.0f};
