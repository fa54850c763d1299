// CUDA's ordering promises for streams, events, asynchronous copies and host callbacks.  Each check
// fails if a copy overtakes earlier work in its stream, a callback runs early or sees data not yet
// landed, later work starts before a callback returns, a cross-stream wait is ignored, or an event
// completes early.  Built twice: as is and with --default-stream per-thread.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "async_common.h"

constexpr int N = 1 << 16;
constexpr unsigned long long kSlow = 200ull * 1000 * 1000;  // 200 ms

struct CallbackCtx {
  const int* host;
  std::atomic<int> ran{0};
  std::atomic<int> returned{0};
  bool saw_data = false;
};

static void CUDART_CB on_stream(void* arg) {
  auto* c = static_cast<CallbackCtx*>(arg);
  c->saw_data = all_equal(c->host, N, 7);
  c->ran = 1;
  usleep(150 * 1000);  // later work in the stream must wait for this
  c->returned = 1;
}

static void CUDART_CB on_callback(cudaStream_t, cudaError_t status, void* arg) {
  *static_cast<int*>(arg) = status == cudaSuccess ? 1 : -1;
}

int main() {
  int *d, *d2, *h;
  REQUIRE_OK(cudaMalloc(&d, N * sizeof(int)));
  REQUIRE_OK(cudaMalloc(&d2, N * sizeof(int)));
  REQUIRE_OK(cudaMallocHost(&h, N * sizeof(int)));
  std::vector<int> pageable(N);
  cudaStream_t s, s2;
  REQUIRE_OK(cudaStreamCreate(&s));
  REQUIRE_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));

  // 1. A copy does not overtake earlier work in its stream.
  EXPECT_OK(cudaMemset(d, 0, N * sizeof(int)));
  EXPECT_OK(cudaDeviceSynchronize());
  slow_fill<<<1, 256, 0, s>>>(d, 5, N, kSlow);
  EXPECT_OK(cudaMemcpyAsync(h, d, N * sizeof(int), cudaMemcpyDeviceToHost, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(h, N, 5), "device-to-host copy waits for the kernel before it (pinned)");
  memset(pageable.data(), 0, N * sizeof(int));
  slow_fill<<<1, 256, 0, s>>>(d, 6, N, kSlow);
  EXPECT_OK(cudaMemcpyAsync(pageable.data(), d, N * sizeof(int), cudaMemcpyDeviceToHost, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(pageable.data(), N, 6),
              "device-to-host copy waits for the kernel before it (pageable)");

  // 2. Events complete when the stream reaches them, not before; elapsed time is GPU time.
  cudaEvent_t e0, e1;
  EXPECT_OK(cudaEventCreate(&e0));
  EXPECT_OK(cudaEventCreate(&e1));
  EXPECT_OK(cudaEventRecord(e0, s));
  slow_fill<<<1, 256, 0, s>>>(d, 1, N, kSlow);
  EXPECT_OK(cudaEventRecord(e1, s));
  EXPECT_ERR(cudaEventQuery(e1), cudaErrorNotReady);
  EXPECT_ERR(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_OK(cudaGetLastError());  // "not ready" is not an error
  EXPECT_OK(cudaEventSynchronize(e1));
  EXPECT_OK(cudaEventQuery(e1));
  EXPECT_OK(cudaStreamQuery(s));
  float ms = 0;
  EXPECT_OK(cudaEventElapsedTime(&ms, e0, e1));
  fprintf(stderr, "elapsed %.1f ms\n", ms);
  EXPECT_TRUE(ms >= 150 && ms < 5000, "cudaEventElapsedTime covers the 200 ms kernel");

  // 3. A cross-stream wait is honoured.
  EXPECT_OK(cudaMemset(d, 0, N * sizeof(int)));
  EXPECT_OK(cudaDeviceSynchronize());
  slow_fill<<<1, 256, 0, s>>>(d, 9, N, kSlow);
  EXPECT_OK(cudaEventRecord(e1, s));
  EXPECT_OK(cudaStreamWaitEvent(s2, e1, 0));
  add_one<<<64, 256, 0, s2>>>(d, N);
  EXPECT_OK(cudaMemcpyAsync(h, d, N * sizeof(int), cudaMemcpyDeviceToHost, s2));
  EXPECT_OK(cudaStreamSynchronize(s2));
  EXPECT_TRUE(all_equal(h, N, 10), "cudaStreamWaitEvent makes the other stream wait");

  // 4. A host callback runs after the earlier work (and its data has landed), and later work in
  //    the stream waits until it returns.
  CallbackCtx ctx;
  ctx.host = h;
  memset(h, 0, N * sizeof(int));
  slow_fill<<<1, 256, 0, s>>>(d, 7, N, kSlow);
  EXPECT_OK(cudaMemcpyAsync(h, d, N * sizeof(int), cudaMemcpyDeviceToHost, s));
  EXPECT_OK(cudaLaunchHostFunc(s, on_stream, &ctx));
  slow_fill<<<1, 256, 0, s>>>(d2, 3, N, 0);
  cudaEvent_t after;
  EXPECT_OK(cudaEventCreateWithFlags(&after, cudaEventDisableTiming));
  EXPECT_OK(cudaEventRecord(after, s));
  EXPECT_TRUE(ctx.ran == 0, "the callback has not run while the kernel before it runs");
  while (cudaEventQuery(after) == cudaErrorNotReady) usleep(1000);
  EXPECT_TRUE(ctx.ran == 1 && ctx.saw_data, "the callback ran and saw the copied data");
  EXPECT_TRUE(ctx.returned == 1, "work after the callback waited until it returned");
  int status = 0;
  EXPECT_OK(cudaStreamAddCallback(s, on_callback, &status, 0));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(status == 1,
              "cudaStreamAddCallback ran with cudaSuccess before the synchronize returned");

  // 5. The legacy default stream waits for blocking streams.
  slow_fill<<<1, 256, 0, s>>>(d, 3, N, kSlow);
  add_one<<<64, 256, 0, cudaStreamLegacy>>>(d, N);
  EXPECT_OK(cudaMemcpy(h, d, N * sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(all_equal(h, N, 4), "the legacy default stream waits for a blocking stream");

  // 6. Asynchronous copies and memsets in every direction, pinned and pageable, 1-D and 2-D.
  std::vector<int> src(N), back(N);
  for (int i = 0; i < N; ++i) src[i] = i * 3 + 1;
  EXPECT_OK(cudaMemcpyAsync(d, src.data(), N * sizeof(int), cudaMemcpyHostToDevice, s));
  EXPECT_OK(cudaMemcpyAsync(d2, d, N * sizeof(int), cudaMemcpyDeviceToDevice, s));
  EXPECT_OK(cudaMemsetAsync(d, 0, N * sizeof(int), s));
  EXPECT_OK(cudaMemcpyAsync(back.data(), d2, N * sizeof(int), cudaMemcpyDefault, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(back == src,
              "async host->device, device->device, device->host (pageable) round trip");
  for (int i = 0; i < N; ++i) h[i] = -i;
  EXPECT_OK(cudaMemcpyAsync(d, h, N * sizeof(int), cudaMemcpyHostToDevice, s2));
  EXPECT_OK(cudaMemcpyAsync(back.data(), d, N * sizeof(int), cudaMemcpyDeviceToHost, s2));
  EXPECT_OK(cudaStreamSynchronize(s2));
  bool ok = true;
  for (int i = 0; i < N; ++i) ok = ok && back[i] == -i;
  EXPECT_TRUE(ok, "async round trip from page-locked memory");
  const size_t w = 100, rows = 50, pitch = 128;
  std::vector<char> a2(pitch * rows), b2(pitch * rows, 0);
  for (size_t i = 0; i < a2.size(); ++i) a2[i] = static_cast<char>(i * 7);
  EXPECT_OK(cudaMemcpy2DAsync(d, 256, a2.data(), pitch, w, rows, cudaMemcpyHostToDevice, s));
  EXPECT_OK(cudaMemcpy2DAsync(b2.data(), pitch, d, 256, w, rows, cudaMemcpyDeviceToHost, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  ok = true;
  for (size_t r = 0; r < rows; ++r) ok = ok && memcmp(&a2[r * pitch], &b2[r * pitch], w) == 0;
  EXPECT_TRUE(ok, "async 2-D copies both ways");

  // 7. Stream properties.
  int least = 0, greatest = 0;
  EXPECT_OK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t sp;
  EXPECT_OK(cudaStreamCreateWithPriority(&sp, cudaStreamNonBlocking, greatest - 100));
  int prio = 1;
  unsigned flags = 0;
  EXPECT_OK(cudaStreamGetPriority(sp, &prio));
  EXPECT_OK(cudaStreamGetFlags(sp, &flags));
  EXPECT_TRUE(prio == greatest && flags == cudaStreamNonBlocking,
              "priority is clamped to the range; flags are kept");
  EXPECT_OK(cudaStreamDestroy(sp));

  // 8. The per-thread default stream handle works in any build.
  slow_fill<<<1, 256, 0, cudaStreamPerThread>>>(d, 11, N, kSlow / 4);
  EXPECT_OK(cudaMemcpyAsync(h, d, N * sizeof(int), cudaMemcpyDeviceToHost, cudaStreamPerThread));
  EXPECT_OK(cudaStreamSynchronize(cudaStreamPerThread));
  EXPECT_TRUE(all_equal(h, N, 11), "work on cudaStreamPerThread stays in order");

  // 9. An asynchronous copy into pageable memory returns once it is done (CUDA's rule for
  //    device-to-host copies into pageable memory): no synchronization before the check.
  memset(pageable.data(), 0, N * sizeof(int));
  slow_fill<<<1, 256, 0, s2>>>(d, 12, N, kSlow);
  EXPECT_OK(cudaMemcpyAsync(pageable.data(), d, N * sizeof(int), cudaMemcpyDeviceToHost, s2));
  EXPECT_TRUE(all_equal(pageable.data(), N, 12),
              "an async copy into pageable memory has landed when it returns");
  int one = 0;
  slow_fill<<<1, 256, 0, s2>>>(d, 13, N, kSlow);
  EXPECT_OK(cudaMemcpyAsync(&one, d + N - 1, sizeof(int), cudaMemcpyDeviceToHost, s2));
  EXPECT_TRUE(one == 13, "a 4-byte async copy into pageable memory waits for its stream");

  // 10. cudaDeviceSynchronize waits for every stream, however many there are: a slow kernel on
  //     one of many streams, on a stream that was idle at the last synchronization, and on a
  //     stream beyond the first 64.
  std::vector<cudaStream_t> many(80);
  for (auto& m : many) EXPECT_OK(cudaStreamCreateWithFlags(&m, cudaStreamNonBlocking));
  for (int k : {9, 30, 75}) {
    for (int j = 0; j < 80; j += 7) add_one<<<1, 64, 0, many[j]>>>(d2, 64);  // others busy too
    EXPECT_OK(cudaDeviceSynchronize());
    slow_fill<<<1, 256, 0, many[k]>>>(d, k, N, kSlow);
    EXPECT_OK(cudaDeviceSynchronize());
    EXPECT_OK(cudaStreamQuery(many[k]));
    EXPECT_OK(cudaMemcpyAsync(h, d, N * sizeof(int), cudaMemcpyDeviceToHost, s2));
    EXPECT_OK(cudaStreamSynchronize(s2));
    EXPECT_TRUE(all_equal(h, N, k),
                "cudaDeviceSynchronize waited for a kernel on one of 80 streams");
  }
  for (auto& m : many) EXPECT_OK(cudaStreamDestroy(m));

  // 11. ... and for the work of a stream destroyed before it ended (cudaStreamDestroy returns at
  //     once; the work goes on).
  {
    cudaStream_t gone;
    EXPECT_OK(cudaStreamCreateWithFlags(&gone, cudaStreamNonBlocking));
    slow_fill<<<1, 256, 0, gone>>>(d, 21, N, kSlow);
    EXPECT_OK(cudaStreamDestroy(gone));
    EXPECT_OK(cudaDeviceSynchronize());
    EXPECT_OK(cudaMemcpyAsync(h, d, N * sizeof(int), cudaMemcpyDeviceToHost, s2));
    EXPECT_OK(cudaStreamSynchronize(s2));
    EXPECT_TRUE(all_equal(h, N, 21),
                "cudaDeviceSynchronize waited for the kernel of a destroyed stream");
  }

  EXPECT_OK(cudaEventDestroy(e0));
  EXPECT_OK(cudaEventDestroy(e1));
  EXPECT_OK(cudaEventDestroy(after));
  EXPECT_OK(cudaStreamDestroy(s));
  EXPECT_OK(cudaStreamDestroy(s2));
  EXPECT_OK(cudaFreeHost(h));
  EXPECT_OK(cudaFree(d));
  EXPECT_OK(cudaFree(d2));
  return finish("async_streams");
}
