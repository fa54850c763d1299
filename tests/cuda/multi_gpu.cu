// Several GPUs of one server: cudaSetDevice switches, peer access queries, cudaMemcpyPeer(Async)
// and cudaMemcpy between devices.  With one device it says so and checks nothing else.
#include <cstring>
#include <vector>

#include "async_common.h"

int main() {
  int count = 0;
  REQUIRE_OK(cudaGetDeviceCount(&count));
  if (count < 2) {
    printf("one device: nothing to check\n");
    return finish("multi_gpu");
  }
  const int N = 1 << 18;
  int *a, *b;
  REQUIRE_OK(cudaSetDevice(0));
  REQUIRE_OK(cudaMalloc(&a, N * sizeof(int)));
  REQUIRE_OK(cudaSetDevice(1));
  REQUIRE_OK(cudaMalloc(&b, N * sizeof(int)));
  cudaPointerAttributes pa{};
  EXPECT_OK(cudaPointerGetAttributes(&pa, b));
  EXPECT_TRUE(pa.device == 1, "an allocation made after cudaSetDevice(1) is on device 1");
  int can = -1;
  EXPECT_OK(cudaDeviceCanAccessPeer(&can, 0, 1));
  EXPECT_TRUE(can == 0 || can == 1, "cudaDeviceCanAccessPeer answers");
  EXPECT_OK(cudaDeviceCanAccessPeer(&can, 0, 0));
  EXPECT_TRUE(can == 0, "a device is not its own peer");

  std::vector<int> src(N), back(N);
  for (int i = 0; i < N; ++i) src[i] = i ^ 0x5a5a;
  REQUIRE_OK(cudaSetDevice(0));
  EXPECT_OK(cudaMemcpy(a, src.data(), N * sizeof(int), cudaMemcpyHostToDevice));
  EXPECT_OK(cudaMemcpyPeer(b, 1, a, 0, N * sizeof(int)));
  REQUIRE_OK(cudaSetDevice(1));
  add_one<<<64, 256>>>(b, N);
  EXPECT_OK(cudaMemcpy(back.data(), b, N * sizeof(int), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < N; ++i) ok = ok && back[i] == src[i] + 1;
  EXPECT_TRUE(ok, "cudaMemcpyPeer 0 -> 1, then a kernel on device 1");

  cudaStream_t s;
  EXPECT_OK(cudaStreamCreate(&s));
  EXPECT_OK(cudaMemcpyPeerAsync(a, 0, b, 1, N * sizeof(int), s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_OK(cudaMemcpy(back.data(), a, N * sizeof(int), cudaMemcpyDefault));
  ok = true;
  for (int i = 0; i < N; ++i) ok = ok && back[i] == src[i] + 1;
  EXPECT_TRUE(ok, "cudaMemcpyPeerAsync 1 -> 0 on a stream of device 1");
  EXPECT_OK(cudaMemcpy(b, a, N * sizeof(int), cudaMemcpyDefault));
  EXPECT_OK(cudaMemcpy(back.data(), b, N * sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(back[N - 1] == src[N - 1] + 1, "cudaMemcpy between devices (cudaMemcpyDefault)");
  EXPECT_OK(cudaStreamDestroy(s));
  EXPECT_OK(cudaFree(b));
  REQUIRE_OK(cudaSetDevice(0));
  EXPECT_OK(cudaFree(a));
  return finish("multi_gpu");
}
