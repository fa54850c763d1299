// Allocates MiB of device memory (argv[1]), prints "holding", then waits to be killed.
#include <unistd.h>

#include <cstdlib>

#include "check.h"

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? strtoull(argv[1], nullptr, 10) : 64;
  void* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, mib << 20));
  REQUIRE_OK(cudaMemset(d, 0x11, mib << 20));
  REQUIRE_OK(cudaDeviceSynchronize());
  printf("holding %zu MiB\n", mib);
  fflush(stdout);
  for (;;) pause();
}
