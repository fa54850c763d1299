// Kernels shared by the asynchrony tests.  slow_fill waits (on the GPU's global timer) before it
// writes, so work queued after it in the same stream can only see its result if rgpu keeps stream
// order; the host backend's plugin implements the same by sleeping.
#pragma once

#include "check.h"

extern "C" __global__ void slow_fill(int* p, int value, int n, unsigned long long wait_ns) {
  if (threadIdx.x == 0 && wait_ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < wait_ns);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = value;
}

// Spins until *flag == expect or timeout_ns passes; *seen = 1 if the flag came (overlap.cu,
// small_loop.cu).
extern "C" __global__ void wait_flag(const int* flag, int expect, unsigned long long timeout_ns,
                                     int* seen) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const volatile int* f = flag;
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  int ok = 0;
  do {
    if (*f == expect) {
      ok = 1;
      break;
    }
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < timeout_ns);
  *seen = ok;
}

extern "C" __global__ void add_one(int* p, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] += 1;
}

static bool all_equal(const int* h, int n, int v) {
  for (int i = 0; i < n; ++i)
    if (h[i] != v) return false;
  return true;
}
