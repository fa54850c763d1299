// Issue 30 item 6: a launch that fails asynchronously (a device assert), then a pageable
// device-to-host cudaMemcpy of argv[1] bytes: the copy (or the synchronization after it) must
// return the failure, natively and through rgpu over every transport.
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
extern "C" __global__ void devmem_assert(int v) { assert(v == 0); }
int main(int argc, char** argv) {
  size_t n = argc > 1 ? strtoull(argv[1], nullptr, 10) : (4u << 20);
  void* d = nullptr;
  cudaError_t e = cudaMalloc(&d, n);
  printf("malloc %d\n", e);
  cudaMemset(d, 0, n);
  cudaDeviceSynchronize();
  devmem_assert<<<1, 1>>>(1);
  printf("launch %d\n", cudaGetLastError());
  std::vector<char> h(n);
  e = cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost);
  printf("copy %zu: %s\n", n, cudaGetErrorName(e));
  e = cudaDeviceSynchronize();
  printf("sync: %s\n", cudaGetErrorName(e));
  printf("last: %s\n", cudaGetErrorName(cudaGetLastError()));
  return 0;
}
