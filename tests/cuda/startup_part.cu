// Part of startup_many (tests/cuda/startup_many.cu): a translation unit of its own, so one more fat
// binary, compiled several times with PART = 1, 2, ... into distinct images of kernels that never
// run.
#ifndef PART
#define PART 1
#endif
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define KERNEL(n) \
  extern "C" __global__ void CAT(CAT(CAT(startup_part, PART), _k), n)(int* p) { p[n] += PART; }
KERNEL(0)
KERNEL(1)
KERNEL(2)
KERNEL(3)
KERNEL(4)
KERNEL(5)
KERNEL(6)
KERNEL(7)
__device__ int CAT(startup_part_value, PART) = PART;
