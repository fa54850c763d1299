// A Thrust-style loop of small synchronous calls (issue 29, "answer locally what is known
// locally"): each iteration allocates a small vector and temporary storage, copies 256 bytes in,
// asks what Thrust's algorithms ask (device, attributes, function attributes, occupancy, pointer
// attributes, the last error), launches a search kernel, reads its few-byte answer back, writes
// one element through a reference, and frees both.  Checks every answer; prints the time per
// iteration.  Through rgpu, RGPU_STATS counts its round trips (tests/integration/startup_test.cc):
// only the read-back waits for the GPU.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "async_common.h"

#define CHECK(expr)                                                                             \
  do {                                                                                          \
    cudaError_t _e = (expr);                                                                    \
    if (_e != cudaSuccess) {                                                                    \
      fprintf(stderr, "small_loop: %s: %s (line %d)\n", #expr, cudaGetErrorName(_e), __LINE__); \
      return 1;                                                                                 \
    }                                                                                           \
  } while (0)

extern "C" __global__ void find_first(const int* v, int n, int target, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && v[i] == target) atomicMin(out, i);
}

// A freed small allocation is not handed out again while work queued before its free still
// writes it: a slow kernel on a non-blocking stream fills it and the program frees it.  While the
// kernel runs the program takes a few slabs' worth of blocks of its size; one that lies where it
// was is cleared at once — and the kernel, done later, would leave its 7s there.  Once the kernel
// is done, the block comes back within a slab's worth of allocations, and is read back cleared.
//
// "siblings" (two virtual devices naming one GPU, RGPU_SERVERS=host:port/0,host:port/0): device 0
// first closes ten quarantine epochs while the GPU is idle, then device 1 runs the check — its own
// epochs must not be taken for complete because device 0's are.
int reuse_check(bool siblings) {
  const int n = 1024;  // 4 KiB
  const unsigned long long slow_ns = 300ull * 1000 * 1000;
  if (siblings) {
    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    if (count < 2) {
      fprintf(stderr, "small_loop: siblings needs two devices\n");
      return 1;
    }
    CHECK(cudaSetDevice(0));
    std::vector<void*> full(32);  // a slab of 64 KiB blocks
    for (void*& q : full) CHECK(cudaMalloc(&q, 64u << 10));
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < 10; ++i) {  // each: one block freed, one asked for: a reclaim
      CHECK(cudaFree(full[0]));
      CHECK(cudaMalloc(&full[0], 64u << 10));
    }
    for (void* q : full) CHECK(cudaFree(q));
    CHECK(cudaSetDevice(1));
  }
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int* x = nullptr;
  CHECK(cudaMalloc(&x, n * sizeof(int)));
  slow_fill<<<1, 32, 0, s>>>(x, 7, n, slow_ns);
  CHECK(cudaGetLastError());
  CHECK(cudaFree(x));
  std::vector<int*> held;
  int* early = nullptr;
  for (int i = 0; i < 2048; ++i) {  // four slabs' worth, while the kernel runs
    int* y = nullptr;
    CHECK(cudaMalloc(&y, n * sizeof(int)));
    if (y == x && !early) {
      early = y;
      CHECK(cudaMemset(early, 0, n * sizeof(int)));
    } else {
      held.push_back(y);
    }
  }
  CHECK(cudaStreamSynchronize(s));
  std::vector<int> back(n, -1);
  if (early) {
    CHECK(cudaMemcpy(back.data(), early, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i)
      if (back[i] != 0) {
        fprintf(stderr,
                "small_loop: reused memory holds %d at [%d]: a kernel queued before its "
                "free wrote it after it was handed out again\n",
                back[i], i);
        return 1;
      }
  }
  int* again = early;  // (came back once the kernel was done: a slow machine)
  for (int i = 0; i < 4096 && !again; ++i) {  // the kernel is done: the block may come back
    int* y = nullptr;
    CHECK(cudaMalloc(&y, n * sizeof(int)));
    if (y == x)
      again = y;
    else
      held.push_back(y);
  }
  if (again) {
    CHECK(cudaMemset(again, 0, n * sizeof(int)));
    CHECK(cudaMemcpy(back.data(), again, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i)
      if (back[i] != 0) {
        fprintf(stderr, "small_loop: the block came back holding %d at [%d]\n", back[i], i);
        return 1;
      }
    CHECK(cudaFree(again));
  }
  for (int* y : held) CHECK(cudaFree(y));
  CHECK(cudaStreamDestroy(s));
  printf("small_loop: reuse after %zu allocations: %s\n", held.size(),
         again ? "the freed block came back cleared" : "the freed block did not come back");
  return 0;
}

// cudaMalloc never waits for the GPU (CUDA's does not): with freed small blocks waiting to be
// reused, a kernel waits for a flag the program copies only after many more allocations.  If an
// allocation waited for the device to be past that kernel, the kernel would give up after its
// timeout (20 s) and report that the flag never came.
//
// With `blocking` streams, the same once more: then the flag's copy must not be held behind
// anything a reclaim queued on the legacy stream (which waits for every blocking stream's earlier
// work, the waiting kernel included, and holds back their later work).
int wait_check(bool blocking) {
  const int blocks = 96;  // 64 KiB each: three slabs' worth
  const size_t bytes = 64u << 10;
  std::vector<void*> p(blocks);
  for (void*& q : p) CHECK(cudaMalloc(&q, bytes));
  for (void* q : p) CHECK(cudaFree(q));  // waiting to be reused
  int *flag = nullptr, *seen = nullptr;
  CHECK(cudaMalloc(&flag, sizeof(int)));
  CHECK(cudaMalloc(&seen, sizeof(int)));
  CHECK(cudaMemset(flag, 0, sizeof(int)));
  CHECK(cudaMemset(seen, 0xff, sizeof(int)));
  CHECK(cudaDeviceSynchronize());
  cudaStream_t sk, sc;
  const unsigned flags = blocking ? cudaStreamDefault : cudaStreamNonBlocking;
  CHECK(cudaStreamCreateWithFlags(&sk, flags));
  CHECK(cudaStreamCreateWithFlags(&sc, flags));
  const auto t0 = std::chrono::steady_clock::now();
  wait_flag<<<1, 32, 0, sk>>>(flag, 1, 20ull * 1000 * 1000 * 1000, seen);
  CHECK(cudaGetLastError());
  for (void*& q : p) CHECK(cudaMalloc(&q, bytes));  // while the kernel waits
  static int one = 1;
  CHECK(cudaMemcpyAsync(flag, &one, sizeof one, cudaMemcpyHostToDevice, sc));
  CHECK(cudaStreamSynchronize(sk));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int got = -1;
  CHECK(cudaMemcpy(&got, seen, sizeof got, cudaMemcpyDeviceToHost));
  if (got != 1) {
    fprintf(stderr,
            "small_loop: the kernel never saw the flag (%.1f s): an allocation waited "
            "for it\n",
            s);
    return 1;
  }
  for (void* q : p) CHECK(cudaFree(q));
  CHECK(cudaFree(flag));
  CHECK(cudaFree(seen));
  CHECK(cudaStreamDestroy(sk));
  CHECK(cudaStreamDestroy(sc));
  printf("small_loop: %d allocations while a kernel waited for the program (%s streams): %.2f s\n",
         blocks, blocking ? "blocking" : "non-blocking", s);
  return 0;
}

// A synchronization answered on the client (nothing was sent since a read-back found the stream
// idle) is answered there only then: after a read-back, a slow kernel and an event recorded after
// it, cudaStreamSynchronize must wait for the kernel (the event is then complete); the same on a
// stream of its own after cudaStreamSynchronize found it idle.
int sync_check() {
  const int n = 256;
  const unsigned long long slow_ns = 200ull * 1000 * 1000;
  int* x = nullptr;
  CHECK(cudaMalloc(&x, n * sizeof(int)));
  CHECK(cudaMemset(x, 0, n * sizeof(int)));
  int back = -1;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t ev;
  CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  for (cudaStream_t st : {static_cast<cudaStream_t>(0), s}) {
    CHECK(cudaMemcpyAsync(&back, x, sizeof back, cudaMemcpyDeviceToHost, st));  // idle now
    CHECK(cudaStreamSynchronize(st));                                           // answered here
    CHECK(cudaStreamSynchronize(st));
    slow_fill<<<1, 32, 0, st>>>(x, 7, n, slow_ns);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(ev, st));
    CHECK(cudaStreamSynchronize(st));  // must wait for the kernel
    const cudaError_t q = cudaEventQuery(ev);
    if (q != cudaSuccess) {
      fprintf(stderr, "small_loop: cudaStreamSynchronize returned before the kernel ended (%s)\n",
              cudaGetErrorName(q));
      return 1;
    }
    CHECK(cudaMemcpy(&back, x + n - 1, sizeof back, cudaMemcpyDeviceToHost));
    if (back != 7) {
      fprintf(stderr, "small_loop: the kernel's result is %d after the synchronization\n", back);
      return 1;
    }
    CHECK(cudaMemset(x, 0, n * sizeof(int)));
    CHECK(cudaDeviceSynchronize());
  }
  CHECK(cudaEventDestroy(ev));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(x));
  printf("small_loop: synchronizations waited where work was queued\n");
  printf("small_loop: passed\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "reuse") return reuse_check(false);
  if (argc > 1 && std::string(argv[1]) == "siblings") return reuse_check(true);
  if (argc > 1 && std::string(argv[1]) == "sync") return sync_check();
  if (argc > 1 && std::string(argv[1]) == "wait") {
    if (int rc = wait_check(false); rc != 0) return rc;
    if (int rc = wait_check(true); rc != 0) return rc;
    printf("small_loop: passed\n");
    return 0;
  }
  const int iters = argc > 1 ? atoi(argv[1]) : 50;
  const int n = 64;  // 256 bytes
  int host[n];
  int dev = -1;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaFree(nullptr));
  auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < iters; ++it) {
    for (int i = 0; i < n; ++i) host[i] = (i * 7 + it) % n;
    const int target = (it * 5) % n;
    int* v = nullptr;
    int* tmp = nullptr;
    CHECK(cudaMalloc(&v, n * sizeof(int)));
    CHECK(cudaMemcpy(v, host, sizeof host, cudaMemcpyHostToDevice));
    // What an algorithm asks before it launches.
    int d = -1, sms = 0, maxsmem = 0, blocks = 0;
    CHECK(cudaGetDevice(&d));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d));
    CHECK(cudaDeviceGetAttribute(&maxsmem, cudaDevAttrMaxSharedMemoryPerBlock, d));
    cudaFuncAttributes fa;
    CHECK(cudaFuncGetAttributes(&fa, find_first));
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, find_first, 64, 0));
    if (sms <= 0 || maxsmem <= 0 || fa.maxThreadsPerBlock <= 0 || blocks <= 0) {
      fprintf(stderr, "small_loop: bad answers: sms %d smem %d threads %d blocks %d\n", sms,
              maxsmem, fa.maxThreadsPerBlock, blocks);
      return 1;
    }
    CHECK(cudaMalloc(&tmp, sizeof(int)));  // temporary storage
    cudaPointerAttributes pa;
    CHECK(cudaPointerGetAttributes(&pa, tmp));
    if (pa.type != cudaMemoryTypeDevice || pa.device != d || pa.devicePointer != tmp) {
      fprintf(stderr, "small_loop: pointer attributes wrong (type %d device %d)\n", pa.type,
              pa.device);
      return 1;
    }
    CHECK(cudaMemset(tmp, 0x7f, sizeof(int)));
    find_first<<<1, n>>>(v, n, target, tmp);
    CHECK(cudaGetLastError());
    int found = -1;
    CHECK(cudaMemcpy(&found, tmp, sizeof found, cudaMemcpyDeviceToHost));
    CHECK(cudaStreamSynchronize(0));  // as Thrust does after reading a result back
    int expect = -1;
    for (int i = 0; i < n && expect < 0; ++i)
      if (host[i] == target) expect = i;
    if (found != expect) {
      fprintf(stderr, "small_loop: iteration %d found %d, expected %d\n", it, found, expect);
      return 1;
    }
    const int one = 12345;  // v[3] = 12345 through a reference
    CHECK(cudaMemcpy(v + 3, &one, sizeof one, cudaMemcpyHostToDevice));
    CHECK(cudaFree(tmp));
    CHECK(cudaFree(v));
  }
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  printf("small_loop: %d iterations, %.1f us per iteration\n", iters, us / iters);
  printf("small_loop: passed\n");
  return 0;
}
