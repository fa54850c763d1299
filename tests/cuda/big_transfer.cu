// Moves 1 GiB back and forth until it is killed (the harness kills it in the middle of a copy).
#include <cstring>
#include <vector>

#include "check.h"

int main() {
  const size_t bytes = 1ull << 30;
  void* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, bytes));
  std::vector<char> h(bytes, 7);
  printf("starting\n");
  fflush(stdout);
  for (;;) {
    REQUIRE_OK(cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice));
    REQUIRE_OK(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost));
  }
}
