// Copies and kernels on different streams overlap.  A kernel on one stream waits (bounded by a
// timeout) for a marker that a host-to-device copy queued after it on another stream writes: it
// can only see the marker if the copy runs while the kernel runs.  Without overlap the kernel
// times out and reports it.  Times go to stderr for information; nothing here is timed.
#include <chrono>
#include <cstring>

#include "async_common.h"

static double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int main() {
  const size_t bytes = 64u << 20;
  const int n = static_cast<int>(bytes / sizeof(int));
  const int marker = 0x5eed;
  int* h;
  int* dcopy;
  int* dseen;
  REQUIRE_OK(cudaMallocHost(&h, bytes));
  for (int i = 0; i < n; ++i) h[i] = i;
  REQUIRE_OK(cudaMalloc(&dcopy, bytes));
  REQUIRE_OK(cudaMalloc(&dseen, sizeof(int)));
  REQUIRE_OK(cudaMemset(dcopy, 0, bytes));
  REQUIRE_OK(cudaMemset(dseen, 0xff, sizeof(int)));
  cudaStream_t sc, sk;
  REQUIRE_OK(cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking));
  REQUIRE_OK(cudaStreamCreateWithFlags(&sk, cudaStreamNonBlocking));
  REQUIRE_OK(cudaDeviceSynchronize());

  // The marker is the copy's last word; the kernel watches it.
  h[n - 1] = marker;
  double t0 = now_ms();
  wait_flag<<<1, 32, 0, sk>>>(dcopy + (n - 1), marker, 20ull * 1000 * 1000 * 1000, dseen);
  REQUIRE_OK(cudaGetLastError());
  REQUIRE_OK(cudaMemcpyAsync(dcopy, h, bytes, cudaMemcpyHostToDevice, sc));
  REQUIRE_OK(cudaStreamSynchronize(sc));
  double copy_ms = now_ms() - t0;
  REQUIRE_OK(cudaStreamSynchronize(sk));
  double both_ms = now_ms() - t0;
  int seen = -1;
  REQUIRE_OK(cudaMemcpy(&seen, dseen, sizeof seen, cudaMemcpyDeviceToHost));
  fprintf(stderr,
          "overlap: copy done after %.1f ms, kernel after %.1f ms, kernel saw the copy: %d\n",
          copy_ms, both_ms, seen);
  EXPECT_TRUE(seen == 1, "a copy on one stream runs while a kernel runs on another");

  // The copy landed whole.
  h[n - 1] = n - 1;
  int* back;
  REQUIRE_OK(cudaMallocHost(&back, bytes));
  REQUIRE_OK(cudaMemcpy(back, dcopy, bytes, cudaMemcpyDeviceToHost));
  back[n - 1] = back[n - 1] == marker ? n - 1 : -1;
  EXPECT_TRUE(memcmp(back, h, bytes) == 0, "the overlapped copy's bytes are intact");
  return finish("overlap");
}
