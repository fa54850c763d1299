// Probes per-client limits; prints what it saw, one line per probe (the integration tests decide
// what is right).  Usage:
//   limits malloc MiB COUNT   COUNT allocations of MiB each: "malloc <i> <error name>"
//   limits streams N          creates N streams, then synchronizes: "streams sync <error name>"
//   limits events N           creates N events, then synchronizes: "events sync <error name>"
#include <cstdlib>
#include <cstring>
#include <vector>

#include "check.h"

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* mode = argv[1];
  long n = strtol(argv[2], nullptr, 10);
  if (!strcmp(mode, "malloc") && argc > 3) {
    long count = strtol(argv[3], nullptr, 10);
    for (long i = 0; i < count; ++i) {
      void* p = nullptr;
      cudaError_t e = cudaMalloc(&p, static_cast<size_t>(n) << 20);
      printf("malloc %ld %s\n", i, cudaGetErrorName(e));
    }
  } else if (!strcmp(mode, "streams")) {
    std::vector<cudaStream_t> s(static_cast<size_t>(n));
    for (auto& x : s) cudaStreamCreate(&x);
    printf("streams sync %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
  } else if (!strcmp(mode, "events")) {
    std::vector<cudaEvent_t> ev(static_cast<size_t>(n));
    for (auto& x : ev) cudaEventCreate(&x);
    printf("events sync %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
  } else {
    return 2;
  }
  fflush(stdout);
  return 0;
}
