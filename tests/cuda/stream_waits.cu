// A synchronizing call waits for its own stream, event or copy only (tests/integration/
// waits_test.cc).  Thread 1 queues a 3 s kernel and then blocks in one synchronizing call behind
// it; meanwhile thread 2 does 100 rounds of kernel + copy + synchronize on a non-blocking stream of
// its own, which must all finish while thread 1 still waits.
//   stream_waits stream   thread 1: cudaStreamSynchronize on the kernel's stream
//   stream_waits event    thread 1: cudaEventSynchronize on an event recorded after the kernel
//   stream_waits d2h      thread 1: a 64 MiB cudaMemcpy device-to-host behind the kernel on the
//                         legacy stream (the data must be what the kernel wrote)
//   stream_waits h2d      thread 1: a 64 MiB cudaMemcpy host-to-device behind the kernel on the
//                         legacy stream (it must land after the kernel's writes)
//   stream_waits free     thread 1: cudaFree of another buffer (which waits for the GPU, as
//                         cudaFree does), then cudaStreamSynchronize on the kernel's stream
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "async_common.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

constexpr unsigned long long kKernelNs = 3000ull * 1000 * 1000;
constexpr int kBig = 16 << 20;  // ints: 64 MiB
constexpr int kSmall = 256;
constexpr int kRounds = 100;

int run(const std::string& mode) {
  const bool copy = mode == "d2h" || mode == "h2d";
  int *big = nullptr, *small = nullptr, *spare = nullptr;
  REQUIRE_OK(cudaMalloc(&big, kBig * sizeof(int)));
  REQUIRE_OK(cudaMalloc(&spare, 4 << 20));
  REQUIRE_OK(cudaMalloc(&small, kSmall * sizeof(int)));
  // Load both kernels now: with lazy loading (the default), loading a kernel while another one runs
  // waits for the GPU natively, which would hold up thread 2's first launch below.
  add_one<<<1, 256>>>(small, kSmall);
  slow_fill<<<1, 256>>>(small, 0, kSmall, 0);
  REQUIRE_OK(cudaMemset(small, 0, kSmall * sizeof(int)));
  std::vector<int> host(kBig, 9);
  // Page-locked, so that thread 2's copies are plain DMA on its stream natively too (a pageable
  // copy is staged by the driver and can wait for other streams' work). Allocated before the
  // kernel: registering host memory waits for the GPU (natively, and on rgpu's shared memory).
  int* h = nullptr;
  REQUIRE_OK(cudaMallocHost(&h, kSmall * sizeof(int)));
  cudaStream_t a = nullptr, b = nullptr;
  REQUIRE_OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  REQUIRE_OK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  cudaEvent_t ev = nullptr;
  REQUIRE_OK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  REQUIRE_OK(cudaDeviceSynchronize());

  std::atomic<bool> waiting{false}, done{false};
  cudaError_t e1 = cudaSuccess;
  Clock::time_point t1_start, t1_end;
  std::thread t1([&] {
    // Copies wait behind the kernel on the legacy stream; the syncs behind it on stream a.
    slow_fill<<<1, 256, 0, copy ? 0 : a>>>(big, 7, kBig, kKernelNs);
    if (mode == "event") cudaEventRecord(ev, a);
    t1_start = Clock::now();
    waiting.store(true);
    if (mode == "stream") e1 = cudaStreamSynchronize(a);
    if (mode == "free") {
      e1 = cudaFree(spare);
      if (e1 == cudaSuccess) e1 = cudaStreamSynchronize(a);
    }
    if (mode == "event") e1 = cudaEventSynchronize(ev);
    if (mode == "d2h")
      e1 = cudaMemcpy(host.data(), big, kBig * sizeof(int), cudaMemcpyDeviceToHost);
    if (mode == "h2d")
      e1 = cudaMemcpy(big, host.data(), kBig * sizeof(int), cudaMemcpyHostToDevice);
    t1_end = Clock::now();
    done.store(true);
  });
  while (!waiting.load()) std::this_thread::yield();
  // Let thread 1's call reach the server first: the rounds below are queued behind it.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Clock::time_point t2_start = Clock::now();
  bool rounds_ok = true;
  for (int i = 0; i < kRounds && rounds_ok; ++i) {
    add_one<<<1, 256, 0, b>>>(small, kSmall);
    rounds_ok = cudaMemcpyAsync(h, small, kSmall * sizeof(int), cudaMemcpyDeviceToHost, b) == cudaSuccess &&
                cudaStreamSynchronize(b) == cudaSuccess && all_equal(h, kSmall, i + 1);
  }
  const Clock::time_point t2_end = Clock::now();
  const bool t1_still_waiting = !done.load();
  t1.join();
  EXPECT_OK(e1);
  EXPECT_TRUE(rounds_ok, "thread 2's 100 rounds on its own stream gave the right results");
  const double t2 = seconds(t2_start, t2_end), t1w = seconds(t1_start, t1_end);
  // Natively, a cudaFree that waits for the GPU also holds up other threads' work until the GPU is
  // idle (seen on an H200, driver 580); rgpu's free waits on a waiter thread and holds up nobody,
  // which is what this mode checks when it runs through rgpu (RGPU_SERVERS set).
  if (mode != "free" || getenv("RGPU_SERVERS") != nullptr) {
    EXPECT_TRUE(t2 < 1.5, "thread 2's rounds took less than 1.5 s (the other thread's wait is 3 s)");
    if (t2 >= 1.5) printf("  (thread 2 took %.2f s)\n", t2);
    EXPECT_TRUE(t1_still_waiting, "thread 2 finished while thread 1 was still waiting");
  }
  EXPECT_TRUE(t1w > 2.0, "thread 1's call waited for the kernel");
  if (t1w <= 2.0) printf("  (thread 1 waited %.2f s)\n", t1w);
  if (mode == "d2h") EXPECT_TRUE(all_equal(host.data(), kBig, 7), "the copy saw the kernel's data");
  if (mode == "h2d") {
    std::vector<int> back(kBig, 0);
    EXPECT_OK(cudaMemcpy(back.data(), big, kBig * sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT_TRUE(all_equal(back.data(), kBig, 9), "the copy landed after the kernel's writes");
  }
  EXPECT_OK(cudaFreeHost(h));
  EXPECT_OK(cudaEventDestroy(ev));
  EXPECT_OK(cudaStreamDestroy(a));
  EXPECT_OK(cudaStreamDestroy(b));
  EXPECT_OK(cudaFree(big));
  EXPECT_OK(cudaFree(small));
  if (mode != "free") EXPECT_OK(cudaFree(spare));
  return finish(("stream_waits " + mode).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2) {
    std::string m = argv[1];
    if (m == "stream" || m == "event" || m == "d2h" || m == "h2d" || m == "free") return run(m);
  }
  fprintf(stderr, "usage: stream_waits stream|event|d2h|h2d|free\n");
  return 2;
}
