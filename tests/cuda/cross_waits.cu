// cudaStreamWaitEvent / cuStreamWaitEvent with the stream on device 1 and the event on device 0.
// Through rgpu the two devices are on two servers (RGPU_SERVERS=A/0,B/0); natively, two GPUs.
//   cross_waits          ordering checks (below)
//   cross_waits kill     device 1's stream waits for a 60 s kernel's event; after the line
//                        "WAITING", the test kills device 0's server: the wait must end with an
//                        error within seconds (prints "SYNC <error name> <seconds>")
#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "async_common.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr unsigned long long kSecond = 1000000000ull;
std::atomic<int> a_done{0}, b_saw{-1};

void CUDART_CB mark_a(void*) { a_done.store(1); }
void CUDART_CB look_b(void*) { b_saw.store(a_done.load()); }

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int kill_mode() {
  int* a;
  cudaStream_t sa, sb;
  cudaEvent_t e;
  REQUIRE_OK(cudaSetDevice(0));
  REQUIRE_OK(cudaMalloc(&a, 4096));
  REQUIRE_OK(cudaStreamCreate(&sa));
  REQUIRE_OK(cudaEventCreate(&e));
  slow_fill<<<1, 32, 0, sa>>>(a, 1, 1024, 60 * kSecond);
  REQUIRE_OK(cudaEventRecord(e, sa));
  REQUIRE_OK(cudaSetDevice(1));
  REQUIRE_OK(cudaStreamCreate(&sb));
  REQUIRE_OK(cudaStreamWaitEvent(sb, e, 0));
  printf("WAITING\n");
  fflush(stdout);
  auto t0 = Clock::now();
  cudaError_t r = cudaStreamSynchronize(sb);
  printf("SYNC %s %.1f\n", cudaGetErrorName(r), since(t0));
  fflush(stdout);
  return r == cudaSuccess ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int count = 0;
  REQUIRE_OK(cudaGetDeviceCount(&count));
  if (count < 2) {
    printf("one device: nothing to check\n");
    return finish("cross_waits");
  }
  if (argc > 1 && strcmp(argv[1], "kill") == 0) return kill_mode();
  const int n = 1024;
  int *a, *b;
  cudaStream_t sa, sb;
  cudaEvent_t e, e_fast, never, e2;
  REQUIRE_OK(cudaSetDevice(0));
  REQUIRE_OK(cudaMalloc(&a, n * sizeof(int)));
  REQUIRE_OK(cudaStreamCreate(&sa));
  REQUIRE_OK(cudaEventCreate(&e));
  REQUIRE_OK(cudaEventCreate(&e_fast));
  REQUIRE_OK(cudaEventCreate(&never));
  REQUIRE_OK(cudaSetDevice(1));
  REQUIRE_OK(cudaMalloc(&b, n * sizeof(int)));
  // Non-blocking: the legacy stream's copies below must not wait for it.
  REQUIRE_OK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
  REQUIRE_OK(cudaEventCreate(&e2));
  int can = -1;
  EXPECT_OK(cudaDeviceCanAccessPeer(&can, 1, 0));
  printf("peer access 1 -> 0: %d\n", can);

  // 1. Device 0: a 1.5 s kernel, a host function, then e.  Device 1's stream waits for e, then
  // memsets, runs a host function and records e2.  Nothing after the wait may run before e.
  REQUIRE_OK(cudaSetDevice(0));
  slow_fill<<<1, 32, 0, sa>>>(a, 5, n, 1500 * 1000 * 1000ull);
  REQUIRE_OK(cudaLaunchHostFunc(sa, mark_a, nullptr));
  REQUIRE_OK(cudaEventRecord(e, sa));
  REQUIRE_OK(cudaEventRecord(e_fast, sa));  // recorded after e: only the gate order matters below
  REQUIRE_OK(cudaSetDevice(1));
  REQUIRE_OK(cudaMemset(b, 0, n * sizeof(int)));
  REQUIRE_OK(cudaDeviceSynchronize());
  EXPECT_OK(cudaStreamWaitEvent(sb, e, 0));
  REQUIRE_OK(cudaMemsetAsync(b, 7, n * sizeof(int), sb));
  REQUIRE_OK(cudaLaunchHostFunc(sb, look_b, nullptr));
  REQUIRE_OK(cudaEventRecord(e2, sb));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_ERR(cudaEventQuery(e2), cudaErrorNotReady);  // held while e is not complete
  EXPECT_ERR(cudaEventQuery(e), cudaErrorNotReady);   // another server's event, device 1 current
  EXPECT_ERR(cudaStreamQuery(sb), cudaErrorNotReady);
  int early[4] = {-1, -1, -1, -1};
  EXPECT_OK(cudaMemcpy(early, b, sizeof early, cudaMemcpyDeviceToHost));  // legacy stream: not held
  EXPECT_TRUE(early[0] == 0, "the memset after the wait has not run while e is incomplete");
  EXPECT_OK(cudaEventSynchronize(e2));
  EXPECT_OK(cudaEventQuery(e));  // e2 complete implies e complete
  EXPECT_TRUE(b_saw.load() == 1, "device 1's host function ran after device 0's");
  int back[n];
  EXPECT_OK(cudaMemcpy(back, b, sizeof back, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(back[0] == 0x07070707 && back[n - 1] == 0x07070707, "the memset after the wait ran");

  // 2. The event's state as of the call: e re-recorded after a longer kernel does not extend a
  // wait made before.
  REQUIRE_OK(cudaSetDevice(0));
  slow_fill<<<1, 32, 0, sa>>>(a, 6, n, 1000 * 1000 * 1000ull);
  REQUIRE_OK(cudaEventRecord(e, sa));
  REQUIRE_OK(cudaSetDevice(1));
  EXPECT_OK(cudaStreamWaitEvent(sb, e, 0));
  REQUIRE_OK(cudaEventRecord(e2, sb));
  REQUIRE_OK(cudaSetDevice(0));
  slow_fill<<<1, 32, 0, sa>>>(a, 8, n, 4 * kSecond);
  REQUIRE_OK(cudaEventRecord(e, sa));
  REQUIRE_OK(cudaSetDevice(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_ERR(cudaEventQuery(e2), cudaErrorNotReady);
  EXPECT_OK(cudaEventSynchronize(e2));
  EXPECT_ERR(cudaEventQuery(e), cudaErrorNotReady);  // the new record is still running
  EXPECT_OK(cudaEventSynchronize(e));                // from device 1: the event's own server

  // 3. Two waits on one stream whose gates open in the other order: a slow event, then one that
  // is already complete.  The stream still waits for the slow one.
  REQUIRE_OK(cudaSetDevice(0));
  slow_fill<<<1, 32, 0, sa>>>(a, 9, n, 1000 * 1000 * 1000ull);
  REQUIRE_OK(cudaEventRecord(e, sa));
  REQUIRE_OK(cudaSetDevice(1));
  EXPECT_OK(cudaStreamWaitEvent(sb, e, 0));
  EXPECT_OK(cudaStreamWaitEvent(sb, never, 0));   // never recorded: no wait
  EXPECT_OK(cudaStreamWaitEvent(sb, e_fast, 0));  // complete long ago
  REQUIRE_OK(cudaEventRecord(e2, sb));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_ERR(cudaEventQuery(e2), cudaErrorNotReady);
  EXPECT_OK(cudaStreamSynchronize(sb));
  EXPECT_OK(cudaEventQuery(e));

  // 4. The legacy stream of device 1 waits too, through the driver API's cuStreamWaitEvent.
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  EXPECT_OK(
      cudaGetDriverEntryPointByVersion("cuStreamWaitEvent", &fn, 12000, cudaEnableDefault, &q));
  auto cu_wait = reinterpret_cast<CUresult (*)(CUstream, CUevent, unsigned)>(fn);
  REQUIRE_OK(cudaSetDevice(0));
  slow_fill<<<1, 32, 0, sa>>>(a, 10, n, 1000 * 1000 * 1000ull);
  REQUIRE_OK(cudaEventRecord(e, sa));
  REQUIRE_OK(cudaSetDevice(1));
  if (cu_wait) {
    CUresult r = cu_wait(CU_STREAM_LEGACY, reinterpret_cast<CUevent>(e), 0);
    EXPECT_TRUE(r == CUDA_SUCCESS, "cuStreamWaitEvent(CU_STREAM_LEGACY, another device's event)");
  }
  REQUIRE_OK(cudaEventRecord(e2, 0));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_ERR(cudaEventQuery(e2), cudaErrorNotReady);
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT_OK(cudaEventQuery(e));

  // 5. Elapsed time between events of two devices: CUDA's error.
  float ms = 0;
  EXPECT_ERR(cudaEventElapsedTime(&ms, e, e2), cudaErrorInvalidResourceHandle);

  REQUIRE_OK(cudaSetDevice(0));
  EXPECT_OK(cudaDeviceSynchronize());
  int fin[4];
  EXPECT_OK(cudaMemcpy(fin, a, sizeof fin, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(fin[0] == 10, "device 0's kernels all ran, in order");
  return finish("cross_waits");
}
