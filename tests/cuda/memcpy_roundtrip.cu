// Byte-exact round trips through device memory: every copy kind, pageable / pinned / registered
// host memory, sizes 0, 1, 4 KiB + 1 and 64 MiB + 3, 2-D copies, memset patterns.
#include <cstring>
#include <vector>

#include "check.h"

static void fill(unsigned char* p, size_t n, unsigned seed) {
  unsigned x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = static_cast<unsigned char>(x >> 24);
  }
}

enum HostKind { Pageable, Pinned, Registered };
static const char* kHostNames[] = {"pageable", "pinned", "registered"};

static unsigned char* host_buf(HostKind k, size_t n, std::vector<unsigned char>& store) {
  if (k == Pinned) {
    void* p = nullptr;
    REQUIRE_OK(cudaMallocHost(&p, n ? n : 1));
    return static_cast<unsigned char*>(p);
  }
  store.assign(n ? n : 1, 0);
  if (k == Registered) REQUIRE_OK(cudaHostRegister(store.data(), store.size(), 0));
  return store.data();
}

static void release(HostKind k, unsigned char* p) {
  if (k == Pinned) REQUIRE_OK(cudaFreeHost(p));
  if (k == Registered) REQUIRE_OK(cudaHostUnregister(p));
}

static void roundtrip(size_t n, HostKind hk, bool use_default) {
  std::vector<unsigned char> s1, s2;
  unsigned char* src = host_buf(hk, n, s1);
  unsigned char* dst = host_buf(hk, n, s2);
  fill(src, n, static_cast<unsigned>(n) + hk);
  memset(dst, 0x5a, n ? n : 1);
  void *d1 = nullptr, *d2 = nullptr;
  REQUIRE_OK(cudaMalloc(&d1, n));
  REQUIRE_OK(cudaMalloc(&d2, n));
  cudaMemcpyKind h2d = use_default ? cudaMemcpyDefault : cudaMemcpyHostToDevice;
  cudaMemcpyKind d2d = use_default ? cudaMemcpyDefault : cudaMemcpyDeviceToDevice;
  cudaMemcpyKind d2h = use_default ? cudaMemcpyDefault : cudaMemcpyDeviceToHost;
  cudaError_t e1 = cudaMemcpy(d1, src, n, h2d);
  cudaError_t e2 = cudaMemcpy(d2, d1, n, d2d);
  cudaError_t e3 = cudaMemcpy(dst, d2, n, d2h);
  char what[160];
  snprintf(what, sizeof what, "round trip %zu bytes, %s host, %s kinds", n, kHostNames[hk],
           use_default ? "cudaMemcpyDefault" : "explicit");
  bool ok = e1 == cudaSuccess && e2 == cudaSuccess && e3 == cudaSuccess && memcmp(src, dst, n) == 0;
  EXPECT_TRUE(ok, what);
  REQUIRE_OK(cudaFree(d1));
  REQUIRE_OK(cudaFree(d2));
  release(hk, src);
  release(hk, dst);
}

static void copy2d() {
  const size_t w = 1000, h = 37, hpitch = 1024, dpitch_req = 1536;
  std::vector<unsigned char> src(hpitch * h), back(hpitch * h, 0);
  fill(src.data(), src.size(), 7);
  void* d = nullptr;
  void* d2 = nullptr;
  REQUIRE_OK(cudaMalloc(&d, dpitch_req * h));
  REQUIRE_OK(cudaMalloc(&d2, dpitch_req * h));
  EXPECT_OK(cudaMemset(d2, 0, dpitch_req * h));
  EXPECT_OK(cudaMemcpy2D(d, dpitch_req, src.data(), hpitch, w, h, cudaMemcpyHostToDevice));
  EXPECT_OK(cudaMemcpy2D(d2, dpitch_req, d, dpitch_req, w, h, cudaMemcpyDeviceToDevice));
  EXPECT_OK(cudaMemcpy2D(back.data(), hpitch, d2, dpitch_req, w, h, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (size_t r = 0; r < h; ++r)
    ok = ok && memcmp(&src[r * hpitch], &back[r * hpitch], w) == 0 &&
         back[r * hpitch + w] == 0;  // bytes past the width were not written
  EXPECT_TRUE(ok, "2-D copy host->device->device->host keeps rows and leaves the pitch gap");
  // The gap between rows on the device stays as memset left it.
  std::vector<unsigned char> raw(dpitch_req * h);
  EXPECT_OK(cudaMemcpy(raw.data(), d2, raw.size(), cudaMemcpyDeviceToHost));
  bool gap = true;
  for (size_t r = 0; r < h; ++r)
    for (size_t c = w; c < dpitch_req; ++c) gap = gap && raw[r * dpitch_req + c] == 0;
  EXPECT_TRUE(gap, "2-D copy writes only width bytes of each device row");
  REQUIRE_OK(cudaFree(d));
  REQUIRE_OK(cudaFree(d2));
}

static void memsets() {
  const size_t n = (1 << 20) + 13;
  void* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, n));
  std::vector<unsigned char> back(n);
  EXPECT_OK(cudaMemset(d, 0xAB, n));
  EXPECT_OK(cudaMemset(static_cast<char*>(d) + 100, 0x00, 4097));
  EXPECT_OK(cudaMemset(static_cast<char*>(d) + n - 1, 0x1234, 1));  // only the low byte counts
  EXPECT_OK(cudaMemcpy(back.data(), d, n, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    unsigned char want = (i >= 100 && i < 100 + 4097) ? 0x00 : (i == n - 1 ? 0x34 : 0xAB);
    if (back[i] != want) ok = false;
  }
  EXPECT_TRUE(ok, "memset patterns: whole buffer, an inner range, the last byte");
  REQUIRE_OK(cudaFree(d));
}

static void offsets() {
  // Copies at odd offsets inside one allocation.
  const size_t n = 10007;
  void* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, n));
  std::vector<unsigned char> a(n), b(n, 0);
  fill(a.data(), n, 3);
  EXPECT_OK(cudaMemcpy(static_cast<char*>(d) + 1, a.data(), n - 1, cudaMemcpyHostToDevice));
  EXPECT_OK(cudaMemcpy(b.data(), static_cast<char*>(d) + 1, n - 1, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(memcmp(a.data(), b.data(), n - 1) == 0, "copies at an odd offset into an allocation");
  REQUIRE_OK(cudaFree(d));
}

int main() {
  const size_t sizes[] = {0, 1, 4096 + 1, (64u << 20) + 3};
  for (size_t n : sizes)
    for (int hk = Pageable; hk <= Registered; ++hk)
      for (int def = 0; def < 2; ++def) roundtrip(n, static_cast<HostKind>(hk), def != 0);
  copy2d();
  memsets();
  offsets();
  return finish("memcpy_roundtrip");
}
