// Stream-ordered allocation and mapped page-locked memory.
//   pools           cudaMallocAsync/cudaFreeAsync in stream order with kernels and copies, reuse
//                   on the freeing stream, other streams, memory pools (create, attributes,
//                   trim, access, the device's current pool), cudaFree of pool memory.
//   devices         the same on every device (POOLS_PRINT=1: where the memory is)
//   mapped          cudaHostAlloc(cudaHostAllocMapped) + cudaHostGetDevicePointer: kernels write
//                   and read host memory (over shared memory through rgpu).
//   mapped-refused  through rgpu over a network: registering ordinary memory as mapped is refused
//                   at the call (cudaHostAlloc's mapped memory is emulated there: `mapped` runs).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"

extern "C" __global__ void pools_fill(int* p, int n, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = base + i;
}

// out[0] = sum of in[0..n) (one thread: the host backend runs it the same way).
extern "C" __global__ void pools_sum(const int* in, int n, long long* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    long long s = 0;
    for (int i = 0; i < n; ++i) s += in[i];
    *out = s;
  }
}

namespace {

constexpr int kN = 1 << 16;
constexpr size_t kBytes = kN * sizeof(int);

long long expected_sum(int base) {
  return static_cast<long long>(kN) * base + (long long)kN * (kN - 1) / 2;
}

size_t attr(cudaMemPool_t pool, cudaMemPoolAttr a) {
  uint64_t v = 0;
  cudaError_t e = cudaMemPoolGetAttribute(pool, a, &v);
  if (e != cudaSuccess)
    printf("FAIL cudaMemPoolGetAttribute(%d): %s\n", (int)a, cudaGetErrorName(e));
  return v;
}

void stream_order() {
  cudaStream_t s;
  REQUIRE_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<int> host(kN);
  int* a = nullptr;
  EXPECT_OK(cudaMallocAsync(&a, kBytes, s));
  pools_fill<<<(kN + 255) / 256, 256, 0, s>>>(a, kN, 7);
  EXPECT_OK(cudaMemcpyAsync(host.data(), a, kBytes, cudaMemcpyDeviceToHost, s));
  EXPECT_OK(cudaFreeAsync(a, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  bool good = true;
  for (int i = 0; i < kN; ++i) good = good && host[i] == 7 + i;
  EXPECT_TRUE(good, "kernel and copy see a stream-ordered allocation");

  // Many rounds of allocate / use / free in stream order, with no synchronization between them.
  long long* sums = nullptr;
  REQUIRE_OK(cudaMalloc(&sums, 64 * sizeof(long long)));
  for (int r = 0; r < 64; ++r) {
    int* p = nullptr;
    EXPECT_TRUE(cudaMallocAsync(&p, kBytes, s) == cudaSuccess, "round: cudaMallocAsync");
    pools_fill<<<(kN + 255) / 256, 256, 0, s>>>(p, kN, r);
    pools_sum<<<1, 1, 0, s>>>(p, kN, sums + r);
    cudaFreeAsync(p, s);
  }
  std::vector<long long> got(64);
  EXPECT_OK(cudaMemcpyAsync(got.data(), sums, sizeof(long long) * 64, cudaMemcpyDeviceToHost, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  good = true;
  for (int r = 0; r < 64; ++r) good = good && got[r] == expected_sum(r);
  EXPECT_TRUE(good, "64 rounds of malloc/fill/sum/free in one stream");

  // Another stream: allocate after the first stream's free, use it, results are right.
  cudaStream_t s2;
  REQUIRE_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  int *x = nullptr, *y = nullptr;
  EXPECT_OK(cudaMallocAsync(&x, kBytes, s));
  pools_fill<<<(kN + 255) / 256, 256, 0, s>>>(x, kN, 1);
  EXPECT_OK(cudaFreeAsync(x, s));
  EXPECT_OK(cudaMallocAsync(&y, kBytes, s2));
  pools_fill<<<(kN + 255) / 256, 256, 0, s2>>>(y, kN, 2);
  pools_sum<<<1, 1, 0, s2>>>(y, kN, sums);
  long long one = 0;
  EXPECT_OK(cudaMemcpyAsync(&one, sums, sizeof one, cudaMemcpyDeviceToHost, s2));
  EXPECT_OK(cudaStreamSynchronize(s2));
  EXPECT_TRUE(one == expected_sum(2), "allocation on a second stream");
  EXPECT_OK(cudaFreeAsync(y, s2));

  // cudaFree of stream-ordered memory, zero-byte allocations, bad frees.
  int* z = nullptr;
  EXPECT_OK(cudaMallocAsync(&z, 1000, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_OK(cudaFree(z));
  void* zero = reinterpret_cast<void*>(1);
  EXPECT_OK(cudaMallocAsync(&zero, 0, s));
  EXPECT_TRUE(zero == nullptr, "a zero-byte cudaMallocAsync gives a null pointer");
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT_OK(cudaFree(sums));
  EXPECT_OK(cudaStreamDestroy(s2));
  EXPECT_OK(cudaStreamDestroy(s));
}

void pool_attributes() {
  int dev = 0;
  REQUIRE_OK(cudaGetDevice(&dev));
  cudaMemPool_t def = nullptr, cur = nullptr;
  EXPECT_OK(cudaDeviceGetDefaultMemPool(&def, dev));
  EXPECT_OK(cudaDeviceGetMemPool(&cur, dev));
  EXPECT_TRUE(def != nullptr && def == cur, "the current pool is the default pool");
  cudaMemLocation here = {cudaMemLocationTypeDevice, dev};
  cudaMemPool_t by_loc = nullptr;
  EXPECT_OK(cudaMemGetDefaultMemPool(&by_loc, &here, cudaMemAllocationTypePinned));
  EXPECT_TRUE(by_loc == def, "cudaMemGetDefaultMemPool names the device's default pool");

  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = dev;
  cudaMemPool_t pool = nullptr;
  REQUIRE_OK(cudaMemPoolCreate(&pool, &props));
  uint64_t keep_all = UINT64_MAX;
  EXPECT_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  uint64_t got = 0;
  EXPECT_OK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &got));
  EXPECT_TRUE(got == UINT64_MAX, "release threshold reads back");
  int follow = -1;
  EXPECT_OK(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &follow));
  EXPECT_TRUE(follow == 1, "opportunistic reuse is on by default");
  int off = 0;
  EXPECT_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &off));
  EXPECT_OK(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &follow));
  EXPECT_TRUE(follow == 0, "opportunistic reuse turned off");

  cudaStream_t s;
  REQUIRE_OK(cudaStreamCreate(&s));
  const size_t mib = 1 << 20;
  void* p[3] = {};
  for (auto& q : p) EXPECT_OK(cudaMallocFromPoolAsync(&q, 2 * mib, pool, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(attr(pool, cudaMemPoolAttrUsedMemCurrent) >= 6 * mib, "used >= 6 MiB");
  EXPECT_TRUE(attr(pool, cudaMemPoolAttrReservedMemCurrent) >= 6 * mib, "reserved >= 6 MiB");
  for (auto& q : p) EXPECT_OK(cudaFreeAsync(q, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(attr(pool, cudaMemPoolAttrUsedMemCurrent) == 0, "used is 0 after the frees");
  EXPECT_TRUE(attr(pool, cudaMemPoolAttrReservedMemCurrent) >= 6 * mib,
              "a pool keeps its memory under a high release threshold");
  EXPECT_TRUE(attr(pool, cudaMemPoolAttrUsedMemHigh) >= 6 * mib, "used high-water mark");
  EXPECT_OK(cudaMemPoolTrimTo(pool, 0));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(attr(pool, cudaMemPoolAttrReservedMemCurrent) == 0, "trimmed to 0");
  EXPECT_TRUE(attr(pool, cudaMemPoolAttrReservedMemHigh) >= 6 * mib, "reserved high-water mark");
  uint64_t zero = 0;
  EXPECT_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
  EXPECT_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
  EXPECT_TRUE(attr(pool, cudaMemPoolAttrReservedMemHigh) == 0, "reserved high-water mark reset");
  EXPECT_TRUE(attr(pool, cudaMemPoolAttrUsedMemHigh) == 0, "used high-water mark reset");

  // The device's current pool serves cudaMallocAsync.
  EXPECT_OK(cudaDeviceSetMemPool(dev, pool));
  EXPECT_OK(cudaDeviceGetMemPool(&cur, dev));
  EXPECT_TRUE(cur == pool, "cudaDeviceSetMemPool");
  void* q = nullptr;
  EXPECT_OK(cudaMallocAsync(&q, mib, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(attr(pool, cudaMemPoolAttrUsedMemCurrent) >= mib,
              "cudaMallocAsync used the set pool");
  EXPECT_OK(cudaFreeAsync(q, s));
  EXPECT_OK(cudaDeviceSetMemPool(dev, def));

  // The default pool's threshold is 0: a synchronization gives its memory back.
  void* d = nullptr;
  EXPECT_OK(cudaMallocAsync(&d, 4 * mib, s));
  EXPECT_OK(cudaFreeAsync(d, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(attr(def, cudaMemPoolAttrReservedMemCurrent) == 0,
              "the default pool released its memory at the synchronization");

  cudaMemAccessFlags fl = cudaMemAccessFlagsProtNone;
  cudaMemLocation loc = {cudaMemLocationTypeDevice, dev};
  EXPECT_OK(cudaMemPoolGetAccess(&fl, pool, &loc));
  EXPECT_TRUE(fl == cudaMemAccessFlagsProtReadWrite, "a pool's own device has read-write access");
  cudaMemAccessDesc desc = {loc, cudaMemAccessFlagsProtReadWrite};
  EXPECT_OK(cudaMemPoolSetAccess(pool, &desc, 1));

  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_OK(cudaMemPoolDestroy(pool));
  EXPECT_OK(cudaStreamDestroy(s));
}

void mapped() {
  int* h = nullptr;
  REQUIRE_OK(cudaHostAlloc(&h, kBytes, cudaHostAllocMapped));
  unsigned flags = 0;
  EXPECT_OK(cudaHostGetFlags(&flags, h));
  EXPECT_TRUE((flags & cudaHostAllocMapped) != 0, "cudaHostGetFlags has cudaHostAllocMapped");
  int* d = nullptr;
  EXPECT_OK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d), h, 0));
  cudaPointerAttributes pa = {};
  EXPECT_OK(cudaPointerGetAttributes(&pa, h + 1));
  EXPECT_TRUE(pa.type == cudaMemoryTypeHost && pa.devicePointer == d + 1,
              "pointer attributes of mapped memory name its device pointer");
  pools_fill<<<(kN + 255) / 256, 256>>>(d, kN, 3);
  EXPECT_OK(cudaDeviceSynchronize());
  bool good = true;
  for (int i = 0; i < kN; ++i) good = good && h[i] == 3 + i;
  EXPECT_TRUE(good, "a kernel wrote mapped page-locked memory");
  for (int i = 0; i < kN; ++i) h[i] = 4 + i;
  long long* sum = nullptr;
  REQUIRE_OK(cudaMalloc(&sum, sizeof(long long)));
  pools_sum<<<1, 1>>>(d, kN, sum);
  long long got = 0;
  EXPECT_OK(cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(got == expected_sum(4), "a kernel read mapped page-locked memory");
  EXPECT_OK(cudaFree(sum));
  EXPECT_OK(cudaFreeHost(h));
}

void mapped_refused() {
  std::vector<int> v(kN);
  EXPECT_ERR(cudaHostRegister(v.data(), kBytes, cudaHostRegisterMapped), cudaErrorNotSupported);
  EXPECT_OK(cudaHostRegister(v.data(), kBytes, cudaHostRegisterDefault));
  void* d = nullptr;
  EXPECT_ERR(cudaHostGetDevicePointer(&d, v.data(), 0), cudaErrorNotSupported);
  EXPECT_OK(cudaHostUnregister(v.data()));
  cudaGetLastError();
}

// Every device: stream-ordered memory works there (with POOLS_PRINT=1 it prints "addr <device>
// <pointer>" lines: rgpu's integration test checks they lie in the device's address window).
void devices() {
  int n = 0;
  REQUIRE_OK(cudaGetDeviceCount(&n));
  for (int d = 0; d < n; ++d) {
    REQUIRE_OK(cudaSetDevice(d));
    cudaStream_t s;
    REQUIRE_OK(cudaStreamCreate(&s));
    int* p = nullptr;
    long long* sum = nullptr;
    EXPECT_OK(cudaMallocAsync(&p, kBytes, s));
    EXPECT_OK(cudaMallocAsync(&sum, sizeof *sum, s));
    pools_fill<<<(kN + 255) / 256, 256, 0, s>>>(p, kN, d);
    pools_sum<<<1, 1, 0, s>>>(p, kN, sum);
    long long got = 0;
    EXPECT_OK(cudaMemcpyAsync(&got, sum, sizeof got, cudaMemcpyDeviceToHost, s));
    EXPECT_OK(cudaStreamSynchronize(s));
    EXPECT_TRUE(got == expected_sum(d), "stream-ordered memory on this device");
    if (getenv("POOLS_PRINT")) printf("addr %d %p\naddr %d %p\n", d, (void*)p, d, (void*)sum);
    EXPECT_OK(cudaFreeAsync(p, s));
    EXPECT_OK(cudaFreeAsync(sum, s));
    EXPECT_OK(cudaStreamDestroy(s));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "pools";
  if (mode == "pools") {
    stream_order();
    pool_attributes();
  } else if (mode == "devices") {
    devices();
  } else if (mode == "mapped") {
    mapped();
  } else if (mode == "mapped-refused") {
    mapped_refused();
  } else {
    printf("usage: pools [pools|devices|mapped|mapped-refused]\n");
    return 2;
  }
  return finish(("pools " + mode).c_str());
}
