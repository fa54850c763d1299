// rgpu host backend only: a kernel without a host implementation fails its launch with a clear
// error at the next synchronizing call, and the program keeps working.
#include "check.h"

extern "C" __global__ void nobody_implements_me(int* p) { *p = 1; }

int main() {
  int* d;
  REQUIRE_OK(cudaMalloc(&d, 4));
  nobody_implements_me<<<1, 1>>>(d);
  EXPECT_ERR(cudaDeviceSynchronize(), cudaErrorNotSupported);
  EXPECT_OK(cudaMemset(d, 0, 4));
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT_OK(cudaFree(d));
  return finish("kernel_no_host_impl");
}
