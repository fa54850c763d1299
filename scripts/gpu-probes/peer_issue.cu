// Probe: the cost of one cudaMemcpyPeer between two rgpuds, split into the client's part (the
// time to queue it) and the whole (queued copies, then one synchronization).  Run through rgpu
// with RGPU_SERVERS naming two servers.  Usage: peer_issue [COPIES] [BYTES]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 2000;
  const size_t bytes = argc > 2 ? strtoull(argv[2], nullptr, 10) : 4;
  char *a, *b;
  if (cudaSetDevice(0) || cudaMalloc(&a, bytes) || cudaSetDevice(1) || cudaMalloc(&b, bytes)) {
    fprintf(stderr, "peer_issue: needs two devices\n");
    return 1;
  }
  for (int i = 0; i < 100; ++i) cudaMemcpyPeer(b, 1, a, 0, bytes);
  cudaDeviceSynchronize();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) cudaMemcpyPeer(b, 1, a, 0, bytes);
  auto t1 = std::chrono::steady_clock::now();
  cudaError_t e = cudaDeviceSynchronize();
  auto t2 = std::chrono::steady_clock::now();
  printf("peer_issue: %zu bytes: queued in %.2f us/copy, done in %.2f us/copy (%s)\n", bytes,
         std::chrono::duration<double, std::micro>(t1 - t0).count() / n,
         std::chrono::duration<double, std::micro>(t2 - t0).count() / n, cudaGetErrorName(e));
  return e == cudaSuccess ? 0 : 1;
}
