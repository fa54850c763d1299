// A client that floods asynchronous host-to-device copies behind a busy stream: the server must
// not hold them all (the client waits on its window), and every byte still lands in order.
// `flood_async [copies] [KiB per copy]`; prints "flooding" once its synchronous setup is done and
// the copies begin, and "ready" once the flood is queued.
#include <cstdio>
#include <vector>

#include "async_common.h"

int main(int argc, char** argv) {
  const int copies = argc > 1 ? atoi(argv[1]) : 200;
  const size_t bytes = static_cast<size_t>(argc > 2 ? atoi(argv[2]) : 4096) << 10;
  cudaStream_t s;
  REQUIRE_OK(cudaStreamCreate(&s));
  int* d;
  REQUIRE_OK(cudaMalloc(&d, bytes));
  std::vector<int> h(bytes / 4);
  slow_fill<<<1, 128, 0, s>>>(d, 0, 1, 2000000000ull);  // 2 s of "GPU" work first
  printf("flooding\n");
  fflush(stdout);
  for (int c = 0; c < copies; ++c) {
    h[0] = c;
    h[h.size() - 1] = -c;
    cudaMemcpyAsync(d, h.data(), bytes, cudaMemcpyHostToDevice, s);
  }
  printf("ready\n");
  fflush(stdout);
  EXPECT_OK(cudaStreamSynchronize(s));
  int first = -1, last = 1;
  EXPECT_OK(cudaMemcpy(&first, d, 4, cudaMemcpyDeviceToHost));
  EXPECT_OK(cudaMemcpy(&last, d + h.size() - 1, 4, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(first == copies - 1 && last == -(copies - 1), "the last copy landed last");
  return finish("flood_async");
}
