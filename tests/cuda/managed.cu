// Managed memory (cudaMallocManaged and friends).  Natively and through rgpu (where it is
// emulated: docs/architecture.md, "Managed memory") the program prints the same lines.
//   basic   host init -> kernel -> host read, ping-pong, copies and memsets on managed memory,
//           prefetch (and its batch form), advice and range attributes, stream attachment, pointer
//           attributes, free.
//   sparse  a 64 MiB allocation of which the host writes 8 ints 8 MiB apart, then a kernel reads
//           them (through rgpu with RGPU_STATS=1 the client reports what moved: 8 granules).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"

// p[i] = p[i] * k + 1
extern "C" __global__ void managed_scale(int* p, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * k + 1;
}

// out[0] = sum of p[i * stride] for i < count (one thread).
extern "C" __global__ void managed_gather(const int* p, long long stride, int count,
                                          long long* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    long long s = 0;
    for (int i = 0; i < count; ++i) s += p[i * stride];
    *out = s;
  }
}

namespace {

constexpr int kN = 50000;  // about 195 KiB: several granules, the last one partial

bool all_equal(const int* p, int n, int (*want)(int)) {
  for (int i = 0; i < n; ++i)
    if (p[i] != want(i)) return false;
  return true;
}

void scale(int* p, int n, int k, cudaStream_t s = 0) {
  managed_scale<<<(n + 255) / 256, 256, 0, s>>>(p, n, k);
}

int basic() {
  int attr = 0;
  REQUIRE_OK(cudaDeviceGetAttribute(&attr, cudaDevAttrManagedMemory, 0));
  EXPECT_TRUE(attr == 1, "the device supports managed memory");

  int* a = nullptr;
  REQUIRE_OK(cudaMallocManaged(&a, kN * sizeof(int)));
  cudaPointerAttributes pa{};
  EXPECT_OK(cudaPointerGetAttributes(&pa, a));
  EXPECT_TRUE(pa.type == cudaMemoryTypeManaged && pa.devicePointer == a && pa.hostPointer == a,
              "pointer attributes: managed, one address on both sides");
  EXPECT_TRUE(a[0] == 0 && a[kN - 1] == 0, "a new managed allocation reads as zeros");

  for (int i = 0; i < kN; ++i) a[i] = i;
  scale(a, kN, 2);
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT_TRUE(all_equal(a, kN, [](int i) { return 2 * i + 1; }), "host init -> kernel -> host");

  // Ping-pong: the host changes part of it, the kernel all of it, five times.
  bool pingpong = true;
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < kN; i += 1000) a[i] = -i;
    scale(a, kN, 1);
    REQUIRE_OK(cudaDeviceSynchronize());
    for (int i = 0; i < kN; ++i) {
      int want = i % 1000 == 0 ? -i + 1 : 2 * i + 1 + round + 1;
      if (a[i] != want) pingpong = false;
    }
    for (int i = 0; i < kN; i += 1000) a[i] = 2 * i + 1 + round + 1;  // back in step
  }
  EXPECT_TRUE(pingpong, "five rounds of host writes and kernels");

  // Copies and memsets with managed operands (any kind the program names).
  std::vector<int> host(kN);
  for (int i = 0; i < kN; ++i) host[i] = 7 * i;
  EXPECT_OK(cudaMemcpy(a, host.data(), kN * sizeof(int), cudaMemcpyHostToDevice));
  EXPECT_TRUE(all_equal(a, kN, [](int i) { return 7 * i; }), "cudaMemcpy host -> managed");
  a[5] = 12345;  // a host write the next copy must see
  std::vector<int> back(kN, 0);
  EXPECT_OK(cudaMemcpy(back.data(), a, kN * sizeof(int), cudaMemcpyDefault));
  EXPECT_TRUE(back[5] == 12345 && back[kN - 1] == 7 * (kN - 1), "cudaMemcpy managed -> host");
  int* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, kN * sizeof(int)));
  EXPECT_OK(cudaMemcpy(d, a, kN * sizeof(int), cudaMemcpyDefault));
  EXPECT_OK(cudaMemset(a, 0, kN * sizeof(int)));
  EXPECT_TRUE(a[5] == 0 && a[kN - 1] == 0, "cudaMemset on managed memory");
  EXPECT_OK(cudaMemcpy(a, d, kN * sizeof(int), cudaMemcpyDeviceToDevice));
  EXPECT_TRUE(a[5] == 12345 && a[7] == 49, "cudaMemcpy device -> managed");
  EXPECT_OK(cudaFree(d));

  // Prefetch both ways, on a stream.
  cudaStream_t s;
  REQUIRE_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < kN; ++i) a[i] = i;
  cudaMemLocation dev0{cudaMemLocationTypeDevice, 0}, cpu{cudaMemLocationTypeHost, 0};
  EXPECT_OK(cudaMemPrefetchAsync(a, kN * sizeof(int), dev0, 0, s));
  scale(a, kN, 3, s);
  EXPECT_OK(cudaMemPrefetchAsync(a, kN * sizeof(int), cpu, 0, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(a, kN, [](int i) { return 3 * i + 1; }), "prefetch to device and back");
  int last = 0;
  EXPECT_OK(cudaMemRangeGetAttribute(&last, sizeof last, cudaMemRangeAttributeLastPrefetchLocation,
                                     a, kN * sizeof(int)));
  EXPECT_TRUE(last == cudaCpuDeviceId, "last prefetch location: the CPU");
  // The batch form: two halves to the device, then back to the host; the bytes stay.
  {
    void* halves[2] = {a, a + kN / 2};
    size_t bytes[2] = {kN / 2 * sizeof(int), (kN - kN / 2) * sizeof(int)};
    cudaMemLocation to_dev[1] = {dev0}, to_cpu[1] = {cpu};
    size_t first[1] = {0}, bad[1] = {1};
    EXPECT_OK(cudaMemPrefetchBatchAsync(halves, bytes, 2, to_dev, first, 1, 0, s));
    EXPECT_OK(cudaMemPrefetchBatchAsync(halves, bytes, 2, to_cpu, first, 1, 0, s));
    EXPECT_ERR(cudaMemPrefetchBatchAsync(halves, bytes, 2, to_cpu, bad, 1, 0, s),
               cudaErrorInvalidValue);
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT_TRUE(all_equal(a, kN, [](int i) { return 3 * i + 1; }), "batch prefetches keep bytes");
  }

  // Advice and range attributes.
  EXPECT_OK(cudaMemAdvise(a, kN * sizeof(int), cudaMemAdviseSetReadMostly, dev0));
  EXPECT_OK(cudaMemAdvise(a, kN * sizeof(int), cudaMemAdviseSetPreferredLocation, dev0));
  EXPECT_OK(cudaMemAdvise(a, kN * sizeof(int), cudaMemAdviseSetAccessedBy, dev0));
  int mostly = 0, preferred = -5, by[2] = {-5, -5};
  void* data[3] = {&mostly, &preferred, by};
  size_t sizes[3] = {sizeof mostly, sizeof preferred, sizeof by};
  cudaMemRangeAttribute attrs[3] = {cudaMemRangeAttributeReadMostly,
                                    cudaMemRangeAttributePreferredLocation,
                                    cudaMemRangeAttributeAccessedBy};
  EXPECT_OK(cudaMemRangeGetAttributes(data, sizes, attrs, 3, a, kN * sizeof(int)));
  EXPECT_TRUE(mostly == 1 && preferred == 0 && by[0] == 0 && by[1] == cudaInvalidDeviceId,
              "range attributes after advice");
  EXPECT_OK(cudaMemAdvise(a, kN * sizeof(int), cudaMemAdviseUnsetReadMostly, dev0));
  EXPECT_OK(cudaMemRangeGetAttribute(&mostly, sizeof mostly, cudaMemRangeAttributeReadMostly, a,
                                     kN * sizeof(int)));
  EXPECT_TRUE(mostly == 0, "read-mostly advice withdrawn");
  scale(a, kN, 1);  // advice changes no result
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT_TRUE(all_equal(a, kN, [](int i) { return 3 * i + 2; }), "kernel under advice");
  int on_stack = 0;
  EXPECT_ERR(cudaMemRangeGetAttribute(&mostly, sizeof mostly, cudaMemRangeAttributeReadMostly,
                                      &on_stack, sizeof on_stack),
             cudaErrorInvalidValue);
  cudaGetLastError();  // the error above is also the last error, as natively

  // Host-attached memory, then attached to one stream.
  int* h = nullptr;
  REQUIRE_OK(cudaMallocManaged(&h, kN * sizeof(int), cudaMemAttachHost));
  for (int i = 0; i < kN; ++i) h[i] = 10 * i;
  EXPECT_OK(cudaStreamAttachMemAsync(s, h, 0, cudaMemAttachSingle));
  EXPECT_OK(cudaStreamSynchronize(s));
  scale(h, kN, 1, s);
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_equal(h, kN, [](int i) { return 10 * i + 1; }), "stream-attached memory");
  EXPECT_OK(cudaStreamAttachMemAsync(s, h, 0, cudaMemAttachGlobal));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_ERR(cudaMallocManaged(&h, 16, 0x8), cudaErrorInvalidValue);
  cudaGetLastError();

  EXPECT_OK(cudaStreamDestroy(s));
  EXPECT_OK(cudaFree(h));
  EXPECT_OK(cudaFree(a));
  EXPECT_OK(cudaGetLastError());
  return 0;
}

int sparse() {
  constexpr size_t kBytes = 64u << 20;
  constexpr long long kStride = (8u << 20) / sizeof(int);
  int* big = nullptr;
  long long* sum = nullptr;
  REQUIRE_OK(cudaMallocManaged(&big, kBytes));
  REQUIRE_OK(cudaMallocManaged(&sum, sizeof(long long)));
  for (int i = 0; i < 8; ++i) big[i * kStride] = i + 1;
  managed_gather<<<1, 1>>>(big, kStride, 8, sum);
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT_TRUE(*sum == 36, "a kernel reads 8 sparse host writes of a 64 MiB allocation");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "basic";
  if (mode == "basic")
    basic();
  else if (mode == "sparse")
    sparse();
  else {
    fprintf(stderr, "usage: managed basic|sparse\n");
    return 2;
  }
  printf("managed %s: %s\n", mode.c_str(), g_failures ? "FAILED" : "passed");
  return g_failures ? 1 : 0;
}
