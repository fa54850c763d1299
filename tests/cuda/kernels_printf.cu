// Device printf: what a kernel prints appears on stdout, in order, by the time the next
// synchronizing call returns.
#include "check.h"

extern "C" __global__ void say(int round, int lines) {
  for (int i = 0; i < lines; ++i)
    printf("round %d: line %d from the device (%.2f)\n", round, i, i * 0.5);
}

int main() {
  for (int round = 0; round < 3; ++round) {
    printf("host before round %d\n", round);
    fflush(stdout);
    say<<<1, 1>>>(round, 4);
    EXPECT_OK(cudaDeviceSynchronize());
    printf("host after round %d\n", round);
    fflush(stdout);
  }
  // A synchronous copy also delivers the output first.
  int* d;
  REQUIRE_OK(cudaMalloc(&d, 4));
  say<<<1, 1>>>(9, 2);
  int v = 0;
  EXPECT_OK(cudaMemcpy(&v, d, 4, cudaMemcpyDeviceToHost));
  printf("host after the copy\n");
  cudaFree(d);
  return finish("kernels_printf");
}
