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
// writes it: a slow kernel on a non-blocking stream fills it, the program frees it and allocates
// blocks of its size until one lies where it was (or many did not), clears that block and reads it
// back after the slow kernel's time: zeros (the kernel was done before the memory came back).
int reuse_check() {
  const int n = 1024;  // 4 KiB
  const unsigned long long slow_ns = 300ull * 1000 * 1000;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int* x = nullptr;
  CHECK(cudaMalloc(&x, n * sizeof(int)));
  slow_fill<<<1, 32, 0, s>>>(x, 7, n, slow_ns);
  CHECK(cudaGetLastError());
  CHECK(cudaFree(x));
  std::vector<int*> held;
  int* again = nullptr;
  for (int i = 0; i < 4096 && !again; ++i) {
    int* y = nullptr;
    CHECK(cudaMalloc(&y, n * sizeof(int)));
    if (y == x)
      again = y;
    else
      held.push_back(y);
  }
  if (again) {
    CHECK(cudaMemset(again, 0, n * sizeof(int)));
    std::vector<int> back(n, -1);
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(back.data(), again, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i)
      if (back[i] != 0) {
        fprintf(stderr,
                "small_loop: reused memory holds %d at [%d]: a kernel queued before its "
                "free wrote it after it was handed out again\n",
                back[i], i);
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

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "reuse") return reuse_check();
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
