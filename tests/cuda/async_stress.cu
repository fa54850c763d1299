// Many threads at once, each with its own streams: 8 threads x 4 streams, byte-exact.  Threads
// alternate over the devices when there are several.  Built twice, like async_streams.
#include <thread>
#include <vector>

#include "async_common.h"

constexpr int kThreads = 8, kStreams = 4, kRounds = 12, N = 1 << 14;

int main() {
  int devices = 0;
  REQUIRE_OK(cudaGetDeviceCount(&devices));
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, devices, &failures] {
      if (cudaSetDevice(t % devices) != cudaSuccess) {
        ++failures[t];
        return;
      }
      int dev = -1;
      cudaGetDevice(&dev);
      if (dev != t % devices) ++failures[t];  // each thread has its own current device
      cudaStream_t streams[kStreams];
      int* dbuf[kStreams];
      int* pinned[kStreams];
      std::vector<int> src[kStreams];
      for (int s = 0; s < kStreams; ++s) {
        if (cudaStreamCreateWithFlags(&streams[s], s % 2 ? cudaStreamNonBlocking : 0) ||
            cudaMalloc(&dbuf[s], N * sizeof(int)) || cudaMallocHost(&pinned[s], N * sizeof(int))) {
          ++failures[t];
          return;
        }
        src[s].resize(N);
      }
      for (int round = 0; round < kRounds; ++round) {
        for (int s = 0; s < kStreams; ++s) {
          for (int i = 0; i < N; ++i)
            src[s][i] = (t * 1000003 + s * 7919 + round * 31 + i) & 0xfffffff;
          cudaMemcpyAsync(dbuf[s], src[s].data(), N * sizeof(int), cudaMemcpyHostToDevice,
                          streams[s]);
          for (int k = 0; k <= s; ++k) add_one<<<16, 128, 0, streams[s]>>>(dbuf[s], N);
          cudaMemcpyAsync(pinned[s], dbuf[s], N * sizeof(int), cudaMemcpyDeviceToHost, streams[s]);
        }
        for (int s = 0; s < kStreams; ++s) {
          if (cudaStreamSynchronize(streams[s]) != cudaSuccess) ++failures[t];
          for (int i = 0; i < N; ++i)
            if (pinned[s][i] != src[s][i] + s + 1) {
              ++failures[t];
              break;
            }
        }
      }
      for (int s = 0; s < kStreams; ++s) {
        cudaStreamDestroy(streams[s]);
        cudaFree(dbuf[s]);
        cudaFreeHost(pinned[s]);
      }
    });
  }
  for (auto& th : threads) th.join();
  int total = 0;
  for (int f : failures) total += f;
  EXPECT_TRUE(total == 0, "8 threads x 4 streams x 12 rounds: every byte as expected");
  EXPECT_OK(cudaDeviceSynchronize());
  return finish("async_stress");
}
