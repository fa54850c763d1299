// Asynchronous notifications through the runtime (cudaDeviceRegisterAsyncNotification) and the
// driver (cuDeviceRegisterAsyncNotification) in one process.  Always: registering and
// unregistering, and the argument errors.  With "over-budget" (rgpud --backend host, whose failing
// allocations first notify "over budget"): both callbacks get the notification with their user
// data and handle, on a thread where CUDA may be called but registering is refused; an
// unregistered callback is never called again, and unregistering waits for a callback of that
// handle already running.  Prints "notify: passed" or the failures.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

static int g_failures = 0;

#define CHECK(cond, what)        \
  do {                           \
    if (cond) {                  \
      printf("ok   %s\n", what); \
    } else {                     \
      printf("FAIL %s\n", what); \
      ++g_failures;              \
    }                            \
  } while (0)

namespace {

struct Seen {
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  int type = 0;
  unsigned long long bytes = 0;
  void* handle = nullptr;
  bool cuda_ok = false;
  int register_inside = -1;
  int sleep_ms = 0;
  std::atomic<bool> running{false};
  bool wait(int n, int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return calls >= n; });
  }
  int count() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
};

void note(Seen* s, int type, unsigned long long bytes, void* handle, int reg) {
  int dev = -1;
  const bool ok = cudaGetDevice(&dev) == cudaSuccess && dev == 0;  // CUDA may be called here
  s->running = true;
  if (s->sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(s->sleep_ms));
  std::lock_guard<std::mutex> lock(s->mu);
  ++s->calls;
  s->type = type;
  s->bytes = bytes;
  s->handle = handle;
  s->cuda_ok = ok;
  s->register_inside = reg;
  s->running = false;
  s->cv.notify_all();
}

void runtime_cb(cudaAsyncNotificationInfo_t* info, void* data, cudaAsyncCallbackHandle_t h) {
  cudaAsyncCallbackHandle_t other = nullptr;
  int reg = cudaDeviceRegisterAsyncNotification(0, runtime_cb, data, &other);
  note(static_cast<Seen*>(data), info->type, info->info.overBudget.bytesOverBudget, h, reg);
}

void driver_cb(CUasyncNotificationInfo* info, void* data, CUasyncCallbackHandle h) {
  int reg = cuDeviceUnregisterAsyncNotification(0, h);
  note(static_cast<Seen*>(data), info->type, info->info.overBudget.bytesOverBudget, h, reg);
}

// An allocation larger than what the device has left: fails (and, on the host backend, notifies).
bool fail_allocation() {
  size_t free_b = 0, total = 0;
  if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) return false;
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, free_b + (64u << 20));
  cudaGetLastError();
  if (e == cudaSuccess) cudaFree(p);
  return e == cudaErrorMemoryAllocation;
}

}  // namespace

int main(int argc, char** argv) {
  const bool over_budget = argc > 1 && strcmp(argv[1], "over-budget") == 0;
  CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice(0)");
  CHECK(cuInit(0) == CUDA_SUCCESS, "cuInit");
  CUdevice cu_dev = 0;
  CHECK(cuDeviceGet(&cu_dev, 0) == CUDA_SUCCESS, "cuDeviceGet");

  Seen a, b;
  cudaAsyncCallbackHandle_t ha = nullptr;
  CUasyncCallbackHandle hb = nullptr;
  CHECK(cudaDeviceRegisterAsyncNotification(0, runtime_cb, &a, &ha) == cudaSuccess && ha,
        "cudaDeviceRegisterAsyncNotification");
  CHECK(cuDeviceRegisterAsyncNotification(cu_dev, driver_cb, &b, &hb) == CUDA_SUCCESS && hb,
        "cuDeviceRegisterAsyncNotification");
  CHECK(static_cast<void*>(ha) != static_cast<void*>(hb), "two registrations, two handles");
  cudaAsyncCallbackHandle_t junk = nullptr;
  CHECK(cudaDeviceRegisterAsyncNotification(0, nullptr, &a, &junk) == cudaErrorInvalidValue,
        "no callback: cudaErrorInvalidValue");
  CHECK(cudaDeviceRegisterAsyncNotification(0, runtime_cb, &a, nullptr) == cudaErrorInvalidValue,
        "no handle pointer: cudaErrorInvalidValue");
  CHECK(cudaDeviceRegisterAsyncNotification(99, runtime_cb, &a, &junk) == cudaErrorInvalidDevice,
        "device 99: cudaErrorInvalidDevice");
  CHECK(cuDeviceRegisterAsyncNotification(99, driver_cb, &b, &hb) == CUDA_ERROR_INVALID_DEVICE,
        "cuDevice 99: CUDA_ERROR_INVALID_DEVICE");
  cudaGetLastError();

  if (over_budget) {
    CHECK(fail_allocation(), "an allocation beyond the device fails");
    CHECK(a.wait(1, 10000), "runtime callback called");
    CHECK(b.wait(1, 10000), "driver callback called");
    {
      std::lock_guard<std::mutex> lock(a.mu);
      CHECK(a.type == cudaAsyncNotificationTypeOverBudget, "runtime: type over budget");
      CHECK(a.bytes > 0 && a.bytes <= (128ull << 20), "runtime: bytes over budget");
      CHECK(a.handle == static_cast<void*>(ha), "runtime: its handle");
      CHECK(a.cuda_ok, "runtime: CUDA callable in the callback");
      CHECK(a.register_inside == cudaErrorNotPermitted,
            "runtime: registering inside: NotPermitted");
    }
    {
      std::lock_guard<std::mutex> lock(b.mu);
      CHECK(b.type == CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET, "driver: type over budget");
      CHECK(b.bytes == a.bytes, "driver: the same bytes over budget");
      CHECK(b.handle == static_cast<void*>(hb), "driver: its handle");
      CHECK(b.register_inside == CUDA_ERROR_NOT_PERMITTED,
            "driver: unregistering inside: NOT_PERMITTED");
    }
    // The runtime's callback goes; the driver's still hears the next one, and (delivered in
    // order, on one thread) the runtime's would have been called before it.
    CHECK(cudaDeviceUnregisterAsyncNotification(0, ha) == cudaSuccess,
          "cudaDeviceUnregisterAsyncNotification");
    const int a_after = a.count(), b_before = b.count();
    CHECK(fail_allocation(), "a second allocation fails");
    CHECK(b.wait(b_before + 1, 10000), "driver callback called again");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(a.count() == a_after, "unregistered runtime callback not called");

    // Unregistering while the callback runs waits for it.
    b.sleep_ms = 500;
    const int b_started = b.count();
    CHECK(fail_allocation(), "a third allocation fails");
    auto t0 = std::chrono::steady_clock::now();
    while (!b.running && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(b.running, "driver callback running");
    CHECK(cuDeviceUnregisterAsyncNotification(cu_dev, hb) == CUDA_SUCCESS,
          "cuDeviceUnregisterAsyncNotification while it runs");
    const int after = b.count();
    CHECK(after > b_started && !b.running, "unregistering returned after the running callback");
    CHECK(fail_allocation(), "a fourth allocation fails");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(b.count() == after, "unregistered driver callback not called");
  } else {
    CHECK(cudaDeviceUnregisterAsyncNotification(0, ha) == cudaSuccess,
          "cudaDeviceUnregisterAsyncNotification");
    CHECK(cuDeviceUnregisterAsyncNotification(cu_dev, hb) == CUDA_SUCCESS,
          "cuDeviceUnregisterAsyncNotification");
  }
  CHECK(cudaDeviceUnregisterAsyncNotification(0, ha) == cudaErrorInvalidValue,
        "unregistered twice: cudaErrorInvalidValue");
  cudaGetLastError();
  // Registering again works (the server's registration was dropped and is made anew).
  Seen c;
  cudaAsyncCallbackHandle_t hc = nullptr;
  CHECK(cudaDeviceRegisterAsyncNotification(0, runtime_cb, &c, &hc) == cudaSuccess,
        "registering again");
  if (over_budget) {
    CHECK(fail_allocation(), "a fifth allocation fails");
    CHECK(c.wait(1, 10000), "the new callback called");
  }
  CHECK(cudaDeviceUnregisterAsyncNotification(0, hc) == cudaSuccess, "unregistering again");
  printf("notify: %s\n", g_failures ? "FAILED" : "passed");
  return g_failures ? 1 : 0;
}
