// rgpu bench's small-call loop: what a Thrust-style program does per step, written out in
// runtime calls so that it runs on rgpud's host backend too (its kernel has an extern "C" name
// and a host implementation in tests/host_kernels/host_kernels.cc).  Per iteration: allocate a
// 256-byte vector and a 4-byte result, copy the vector in, search it with a tiny kernel, copy the
// result back, synchronize, write one element (as `d[3] = x` does), synchronize, free both.  Every
// answer is checked (a wrong one exits 1).  argv[1]: iterations (default 1000).  Prints
//   loop_us <microseconds per iteration>
//   loop_iters <iterations>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

// The index of the first element equal to `want`, or n.
extern "C" __global__ void bench_find(const int* v, int n, int want, int* out) {
  __shared__ int best;
  if (threadIdx.x == 0) best = n;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    if (v[i] == want) atomicMin(&best, i);
  __syncthreads();
  if (threadIdx.x == 0) *out = best;
}

namespace {

constexpr int kN = 64;  // 256 bytes

// A failed call ends the step with the call and its error on stderr.
#define CALL(x)                                                                             \
  do {                                                                                      \
    cudaError_t e = (x);                                                                    \
    if (e != cudaSuccess) {                                                                 \
      fprintf(stderr, "loop_small: iteration %d: %s: %s\n", iter, #x, cudaGetErrorName(e)); \
      return false;                                                                         \
    }                                                                                       \
  } while (0)

bool step(int iter, int* h) {
  for (int i = 0; i < kN; ++i) h[i] = iter * kN + i;  // distinct values
  const int at = iter % kN;
  int *d = nullptr, *r = nullptr, found = -1;
  CALL(cudaMalloc(&d, kN * sizeof(int)));
  CALL(cudaMalloc(&r, sizeof(int)));
  CALL(cudaMemcpy(d, h, kN * sizeof(int), cudaMemcpyHostToDevice));
  bench_find<<<1, 64>>>(d, kN, h[at], r);
  CALL(cudaGetLastError());  // as Thrust checks each launch
  CALL(cudaMemcpy(&found, r, sizeof(int), cudaMemcpyDeviceToHost));
  CALL(cudaStreamSynchronize(0));
  if (found != at) {
    fprintf(stderr, "loop_small: iteration %d found %d, want %d\n", iter, found, at);
    return false;
  }
  const int v = 12345;
  CALL(cudaMemcpy(d + 3, &v, sizeof v, cudaMemcpyHostToDevice));
  CALL(cudaStreamSynchronize(0));
  CALL(cudaFree(d));
  CALL(cudaFree(r));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 1000;
  int h[kN];
  // A few untimed steps: the context and the kernel's module are start-up, not the loop.
  for (int i = 0; i < 5; ++i)
    if (!step(i, h)) return 1;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    if (!step(i, h)) return 1;
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  printf("loop_us %.3f\nloop_iters %d\n", us / (iters > 0 ? iters : 1), iters);
  return 0;
}
