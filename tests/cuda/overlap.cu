// Copies and kernels on different streams overlap.  Calibrates a kernel as long as a 256 MiB
// host-to-device copy, then runs both at once; times go to stderr.
#include <chrono>
#include <cstring>

#include "async_common.h"

static double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int main() {
  const size_t bytes = 256u << 20;
  char* h;
  int* dcopy;
  int* dk;
  REQUIRE_OK(cudaMallocHost(&h, bytes));
  memset(h, 1, bytes);
  REQUIRE_OK(cudaMalloc(&dcopy, bytes));
  REQUIRE_OK(cudaMalloc(&dk, 4096));
  cudaStream_t sc, sk;
  REQUIRE_OK(cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking));
  REQUIRE_OK(cudaStreamCreateWithFlags(&sk, cudaStreamNonBlocking));
  // Warm up both paths.
  REQUIRE_OK(cudaMemcpyAsync(dcopy, h, bytes, cudaMemcpyHostToDevice, sc));
  slow_fill<<<1, 256, 0, sk>>>(dk, 1, 1024, 1000);
  REQUIRE_OK(cudaDeviceSynchronize());

  double t0 = now_ms();
  REQUIRE_OK(cudaMemcpyAsync(dcopy, h, bytes, cudaMemcpyHostToDevice, sc));
  REQUIRE_OK(cudaStreamSynchronize(sc));
  double copy_ms = now_ms() - t0;
  unsigned long long kernel_ns = static_cast<unsigned long long>(copy_ms * 1e6);
  t0 = now_ms();
  slow_fill<<<1, 256, 0, sk>>>(dk, 2, 1024, kernel_ns);
  REQUIRE_OK(cudaStreamSynchronize(sk));
  double kernel_ms = now_ms() - t0;
  t0 = now_ms();
  slow_fill<<<1, 256, 0, sk>>>(dk, 3, 1024, kernel_ns);
  REQUIRE_OK(cudaMemcpyAsync(dcopy, h, bytes, cudaMemcpyHostToDevice, sc));
  REQUIRE_OK(cudaDeviceSynchronize());
  double both_ms = now_ms() - t0;
  fprintf(stderr, "overlap: copy %.1f ms, kernel %.1f ms, both %.1f ms (%.2f of the sum)\n",
          copy_ms, kernel_ms, both_ms, both_ms / (copy_ms + kernel_ms));
  EXPECT_TRUE(both_ms < 0.85 * (copy_ms + kernel_ms), "a copy and a kernel on two streams overlap");
  return finish("overlap");
}
