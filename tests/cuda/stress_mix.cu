// The pattern that once deadlocked a session: eager small copies (their buffers come back through
// host functions), large copies (the payload pool grows), __constant__ writes, client host
// callbacks holding streams, asynchronous copies both ways — from several threads at once, on
// blocking and non-blocking streams.  Byte-exact; prints one summary line per thread so that the
// output is the same natively and through rgpu.  `stress_mix [rounds]`.
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "async_common.h"

constexpr int kThreads = 4, kTable = 64;
__constant__ int table[kThreads][kTable];

namespace {

struct Tick {
  std::atomic<int> ran{0};
};

void CUDART_CB slow_callback(void* arg) {
  usleep(2000);  // the stream is held while the client runs this
  static_cast<Tick*>(arg)->ran.fetch_add(1);
}

int fill(std::vector<int>& v, int seed) {
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<int>((seed * 2654435761u + i) & 0xffffff);
  return 0;
}

int worker(int t, int rounds) {
  int bad = 0;
  cudaStream_t s1, s2;
  if (cudaStreamCreate(&s1) || cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking)) return 1000;
  const size_t big = (8u << 20) + 4096 * t, mid = 3u << 20;
  int *d_big, *d_mid, *d_small;
  if (cudaMalloc(&d_big, big) || cudaMalloc(&d_mid, mid) || cudaMalloc(&d_small, 64 << 10))
    return 1000;
  std::vector<int> h_big(big / 4), back_big(big / 4), h_mid(mid / 4), back_mid(mid / 4);
  std::vector<int> small(16 << 10), back_small(16 << 10);
  Tick tick;
  int callbacks = 0;
  for (int r = 0; r < rounds; ++r) {
    // Eager small copies, each a different size.
    for (int k = 0; k < 4; ++k) {
      size_t n = (1024u << k) + 4 * t;
      fill(small, t * 100 + r * 10 + k);
      if (cudaMemcpy(d_small, small.data(), n, cudaMemcpyHostToDevice)) ++bad;
      if (cudaMemcpy(back_small.data(), d_small, n, cudaMemcpyDeviceToHost)) ++bad;
      if (memcmp(small.data(), back_small.data(), n)) ++bad;
    }
    // A large copy both ways.
    fill(h_big, t * 7 + r);
    if (cudaMemcpy(d_big, h_big.data(), big, cudaMemcpyHostToDevice)) ++bad;
    if (cudaMemcpy(back_big.data(), d_big, big, cudaMemcpyDeviceToHost)) ++bad;
    if (h_big != back_big) ++bad;
    // __constant__ memory, this thread's row.
    int row[kTable];
    for (int i = 0; i < kTable; ++i) row[i] = t * 1000 + r * 10 + i;
    if (cudaMemcpyToSymbol(table, row, sizeof row, t * sizeof row)) ++bad;
    int row_back[kTable] = {};
    if (cudaMemcpyFromSymbol(row_back, table, sizeof row, t * sizeof row)) ++bad;
    if (memcmp(row, row_back, sizeof row)) ++bad;
    // Asynchronous work with a client callback in the middle of a stream, and another stream busy.
    fill(h_mid, t * 13 + r);
    cudaMemcpyAsync(d_mid, h_mid.data(), mid, cudaMemcpyHostToDevice, s1);
    add_one<<<64, 256, 0, s1>>>(d_mid, static_cast<int>(mid / 4));
    cudaLaunchHostFunc(s1, slow_callback, &tick);
    ++callbacks;
    cudaMemcpyAsync(back_mid.data(), d_mid, mid, cudaMemcpyDeviceToHost, s1);
    slow_fill<<<1, 128, 0, s2>>>(d_small, r, 1024, 100000);
    cudaLaunchHostFunc(s2, slow_callback, &tick);
    ++callbacks;
    cudaMemcpyAsync(back_small.data(), d_small, 4096, cudaMemcpyDeviceToHost, s2);
    if (cudaStreamSynchronize(s1) || cudaStreamSynchronize(s2)) ++bad;
    for (size_t i = 0; i < h_mid.size(); ++i)
      if (back_mid[i] != h_mid[i] + 1) {
        ++bad;
        break;
      }
    for (int i = 0; i < 1024; ++i)
      if (back_small[i] != r) {
        ++bad;
        break;
      }
  }
  if (tick.ran.load() != callbacks) ++bad;
  cudaFree(d_big);
  cudaFree(d_mid);
  cudaFree(d_small);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
  return bad;
}

}  // namespace

// A synchronous device-to-host copy that must wait (legacy stream semantics) for a blocking stream
// held by a client callback: the callback's request must reach the client while the copy waits.
void copy_behind_a_callback() {
  cudaStream_t s;
  REQUIRE_OK(cudaStreamCreate(&s));
  const size_t n = 4u << 20;
  int* d;
  REQUIRE_OK(cudaMalloc(&d, n));
  std::vector<int> h(n / 4, 7), back(n / 4, 0);
  REQUIRE_OK(cudaMemcpy(d, h.data(), n, cudaMemcpyHostToDevice));
  Tick tick;
  slow_fill<<<1, 128, 0, s>>>(d + 1, 7, 1, 200000000);  // the copy arrives before the callback runs
  add_one<<<64, 256, 0, s>>>(d, static_cast<int>(n / 4));
  cudaLaunchHostFunc(s, slow_callback, &tick);
  EXPECT_OK(cudaMemcpy(back.data(), d, n, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(tick.ran.load() == 1 && back[0] == 8 && back[n / 4 - 1] == 8,
              "a synchronous copy waited for a blocking stream held by a host callback");
  cudaFree(d);
  cudaStreamDestroy(s);
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 6;
  copy_behind_a_callback();
  std::vector<int> bad(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { bad[t] = worker(t, rounds); });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    std::string what = "thread " + std::to_string(t) + ": eager, large, symbol, callback rounds";
    EXPECT_TRUE(bad[t] == 0, what.c_str());
  }
  EXPECT_OK(cudaDeviceSynchronize());
  return finish("stress_mix");
}
