// Prints "free <bytes> total <bytes>" for device 0.
#include "check.h"

int main() {
  size_t free = 0, total = 0;
  REQUIRE_OK(cudaMemGetInfo(&free, &total));
  printf("free %zu total %zu\n", free, total);
  return 0;
}
