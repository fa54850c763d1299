// The bundled example: finds the GPU, moves 256 MiB to it and back, and checks every byte.
// Built with `nvcc -cudart shared`, it runs unchanged natively or through rgpu.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#define CHECK(x)                                                                                 \
  do {                                                                                           \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "%s failed: %s (%s)\n", #x, cudaGetErrorName(e_), cudaGetErrorString(e_)); \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

int main() {
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  size_t free = 0, total = 0;
  CHECK(cudaMemGetInfo(&free, &total));
  printf("%d device(s); device 0: %s, compute capability %d.%d, %d SMs, %.1f of %.1f GiB free\n",
         count, p.name, p.major, p.minor, p.multiProcessorCount, free / 1073741824.0,
         total / 1073741824.0);

  const size_t n = 256u << 20;
  unsigned char *host = nullptr, *back = nullptr;
  CHECK(cudaMallocHost(&host, n));
  CHECK(cudaMallocHost(&back, n));
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<unsigned char>(i * 31 + 7);
  void* dev = nullptr;
  CHECK(cudaMalloc(&dev, n));
  auto t0 = std::chrono::steady_clock::now();
  CHECK(cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice));
  auto t1 = std::chrono::steady_clock::now();
  CHECK(cudaMemcpy(back, dev, n, cudaMemcpyDeviceToHost));
  auto t2 = std::chrono::steady_clock::now();
  bool same = memcmp(host, back, n) == 0;
  auto gbs = [&](auto a, auto b) { return n / std::chrono::duration<double>(b - a).count() / 1e9; };
  printf("256 MiB host->device %.2f GB/s, device->host %.2f GB/s, round trip %s\n", gbs(t0, t1),
         gbs(t1, t2), same ? "byte-exact" : "CORRUPTED");
  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(host));
  CHECK(cudaFreeHost(back));
  return same ? 0 : 1;
}
