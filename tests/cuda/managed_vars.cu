// __managed__ variables (the misc2 group): the host reads a variable's initial value, host writes
// reach kernels, kernel writes reach the host after a synchronization, a large array spans several
// granules, and cudaLibraryGetManaged is left to launch.cu's library tests.
#include <cstdio>

#include "check.h"

__managed__ int counter = 7;
__managed__ float values[40000];  // 160000 bytes: three 64 KiB granules

// One thread adds `add` to the counter; every thread i < n sets values[i] = 2 * values[i] + i.
extern "C" __global__ void bump_managed(int add, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 0) counter += add;
  if (i < n) values[i] = 2 * values[i] + i;
}

int main() {
  const int n = 40000;
  printf("initial counter %d\n", counter);
  EXPECT_TRUE(counter == 7, "a __managed__ variable starts at its initial value on the host");
  bool zero = true;
  for (int i = 0; i < n; ++i) zero = zero && values[i] == 0;
  EXPECT_TRUE(zero, "an uninitialised __managed__ array starts as zeros");

  counter = 10;
  for (int i = 0; i < n; ++i) values[i] = static_cast<float>(i);
  bump_managed<<<(n + 255) / 256, 256>>>(5, n);
  EXPECT_OK(cudaGetLastError());
  EXPECT_OK(cudaDeviceSynchronize());
  printf("after the first kernel: counter %d, values[1] %.0f, values[%d] %.0f\n", counter,
         values[1], n - 1, values[n - 1]);
  bool ok = true;
  for (int i = 0; i < n; ++i) ok = ok && values[i] == 3.0f * i;
  EXPECT_TRUE(counter == 15, "the kernel saw the host's write and the host sees the kernel's");
  EXPECT_TRUE(ok, "every element of the array went to the kernel and came back");

  // Only the counter changes on the host this time: the array's granules stay as they are.
  counter = 100;
  bump_managed<<<(n + 255) / 256, 256>>>(1, n);
  EXPECT_OK(cudaDeviceSynchronize());
  ok = true;
  for (int i = 0; i < n; ++i) ok = ok && values[i] == 7.0f * i;
  printf("after the second kernel: counter %d, values[2] %.0f\n", counter, values[2]);
  EXPECT_TRUE(counter == 101 && ok, "a second round trip");

  return finish("managed_vars");
}
