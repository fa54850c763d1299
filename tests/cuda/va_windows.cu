// Device addresses across every device: allocations of different devices never overlap; bytes
// written to one device read back from it only; pointer attributes name the right device; frees
// are right per device (double and interior frees refused); 100k small allocations are 256-byte
// aligned and never overlap.  With VA_WINDOWS_PRINT=1 it also prints "addr <device> <pointer>"
// lines (rgpu's integration test checks them against the address windows; they differ natively).
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "check.h"

struct Alloc {
  int dev;
  uintptr_t p;
  size_t size;
};

int main() {
  int n = 0;
  REQUIRE_OK(cudaGetDeviceCount(&n));
  const bool print = getenv("VA_WINDOWS_PRINT") != nullptr;
  const size_t sizes[] = {4096, 3 << 20, 100};
  std::vector<Alloc> all;
  for (int d = 0; d < n; ++d) {
    REQUIRE_OK(cudaSetDevice(d));
    for (size_t s : sizes) {
      void* p = nullptr;
      REQUIRE_OK(cudaMalloc(&p, s));
      all.push_back({d, reinterpret_cast<uintptr_t>(p), s});
      if (print) printf("addr %d 0x%llx\n", d, static_cast<unsigned long long>(all.back().p));
    }
  }
  bool distinct = true;
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t j = i + 1; j < all.size(); ++j)
      if (all[i].p < all[j].p + all[j].size && all[j].p < all[i].p + all[i].size) distinct = false;
  EXPECT_TRUE(distinct, "allocations of all devices are distinct and do not overlap");

  // Each device's buffers get their own byte; each reads back its own only.
  for (const Alloc& a : all) {
    REQUIRE_OK(cudaSetDevice(a.dev));
    REQUIRE_OK(cudaMemset(reinterpret_cast<void*>(a.p), 0x10 + a.dev, a.size));
  }
  bool own_bytes = true, attrs_ok = true, default_ok = true;
  for (const Alloc& a : all) {
    std::vector<unsigned char> back(a.size);
    REQUIRE_OK(cudaSetDevice((a.dev + 1) % n));  // cudaMemcpy follows the pointer, not the device
    REQUIRE_OK(cudaMemcpy(back.data(), reinterpret_cast<void*>(a.p), a.size, cudaMemcpyDefault));
    for (unsigned char c : back)
      if (c != 0x10 + a.dev) own_bytes = false;
    cudaPointerAttributes attr{};
    REQUIRE_OK(cudaPointerGetAttributes(&attr, reinterpret_cast<void*>(a.p + a.size - 1)));
    if (attr.type != cudaMemoryTypeDevice || attr.device != a.dev) attrs_ok = false;
    // cudaMemcpyDefault host-to-device lands on the pointer's device.
    std::vector<unsigned char> src(a.size, static_cast<unsigned char>(0x80 + a.dev));
    REQUIRE_OK(cudaMemcpy(reinterpret_cast<void*>(a.p), src.data(), a.size, cudaMemcpyDefault));
    REQUIRE_OK(cudaMemcpy(back.data(), reinterpret_cast<void*>(a.p), a.size,
                          cudaMemcpyDeviceToHost));
    if (memcmp(back.data(), src.data(), a.size) != 0) default_ok = false;
  }
  EXPECT_TRUE(own_bytes, "bytes written to each device read back from it only");
  EXPECT_TRUE(attrs_ok, "cudaPointerGetAttributes names each allocation's device");
  EXPECT_TRUE(default_ok, "cudaMemcpyDefault copies reach each allocation's device");

  // Frees, per device, from another current device; interior and double frees are refused.
  for (const Alloc& a : all) {
    REQUIRE_OK(cudaSetDevice(0));
    if (a.size > 256) EXPECT_ERR(cudaFree(reinterpret_cast<void*>(a.p + 256)), cudaErrorInvalidValue);
    EXPECT_OK(cudaFree(reinterpret_cast<void*>(a.p)));
    EXPECT_ERR(cudaFree(reinterpret_cast<void*>(a.p)), cudaErrorInvalidValue);
  }
  cudaGetLastError();

  // 100k small allocations and frees of random sizes (1 B .. 4 KiB) on each device in turn.
  std::mt19937 rng(12345);
  std::map<uintptr_t, size_t> live;
  std::map<uintptr_t, int> live_dev;
  bool aligned = true, apart = true, ok = true;
  for (int i = 0; i < 100000 && ok; ++i) {
    if (live.size() >= 512 || (!live.empty() && rng() % 2 == 0)) {
      auto it = live.begin();
      std::advance(it, rng() % std::min<size_t>(live.size(), 16));
      REQUIRE_OK(cudaSetDevice(live_dev[it->first]));
      if (cudaFree(reinterpret_cast<void*>(it->first)) != cudaSuccess) ok = false;
      live_dev.erase(it->first);
      live.erase(it);
      continue;
    }
    int d = static_cast<int>(rng() % n);
    size_t s = 1 + rng() % 4096;
    void* p = nullptr;
    REQUIRE_OK(cudaSetDevice(d));
    if (cudaMalloc(&p, s) != cudaSuccess) {
      ok = false;
      break;
    }
    uintptr_t u = reinterpret_cast<uintptr_t>(p);
    if (u % 256) aligned = false;
    auto next = live.lower_bound(u);
    if (next != live.end() && next->first < u + s) apart = false;
    if (next != live.begin() && std::prev(next)->first + std::prev(next)->second > u) apart = false;
    live[u] = s;
    live_dev[u] = d;
  }
  for (auto& [p, s] : live) {
    REQUIRE_OK(cudaSetDevice(live_dev[p]));
    if (cudaFree(reinterpret_cast<void*>(p)) != cudaSuccess) ok = false;
  }
  EXPECT_TRUE(ok, "100000 small allocations and frees succeed");
  EXPECT_TRUE(aligned, "small allocations are 256-byte aligned");
  EXPECT_TRUE(apart, "live small allocations never overlap");
  return finish("va_windows");
}
