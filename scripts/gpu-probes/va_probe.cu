// Probe: where the driver puts memory, whether fixed windows can be reserved, and the cost of
// cudaMalloc/cudaFree vs the VMM calls.  Not part of the build.
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <sys/mman.h>
using Clk = std::chrono::steady_clock;
static double us(Clk::time_point a) { return std::chrono::duration<double, std::micro>(Clk::now() - a).count(); }
int main() {
  cudaFree(0);
  void* p = nullptr;
  cudaMalloc(&p, 4096); printf("cudaMalloc 4K -> %p\n", p);
  void* q = nullptr; cudaMalloc(&q, 64 << 20); printf("cudaMalloc 64M -> %p\n", q);
  cudaFree(p); cudaFree(q);
  void* h = nullptr; cudaMallocHost(&h, 4096); printf("cudaMallocHost -> %p\n", h);
  FILE* f = fopen("/proc/self/maps", "r"); char line[512]; int n = 0;
  while (fgets(line, sizeof line, f)) { unsigned long a, b; sscanf(line, "%lx-%lx", &a, &b); if (b - a >= (1ul << 32)) { printf("big map: %s", line); n++; } }
  fclose(f);
  unsigned long bases[] = {0x100000000000ul, 0x200000000000ul, 0x400000000000ul, 0x500000000000ul, 0x600000000000ul};
  for (unsigned long b : bases) {
    CUdeviceptr r = 0; CUresult e = cuMemAddressReserve(&r, 1ul << 40, 0, b, 0);
    printf("reserve 1 TiB at %#lx -> %d %#llx %s\n", b, e, (unsigned long long)r, r == b ? "OK" : "MOVED");
    if (e == 0) cuMemAddressFree(r, 1ul << 40);
  }
  CUdeviceptr win = 0; cuMemAddressReserve(&win, 1ul << 40, 0, 0x500000000000ul, 0);
  CUmemAllocationProp prop = {}; prop.type = CU_MEM_ALLOCATION_TYPE_PINNED; prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = 0;
  size_t gran = 0; cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM); printf("granularity %zu\n", gran);
  size_t sizes[] = {4096, 65536, 1 << 20, 2 << 20, 8 << 20, 64 << 20};
  for (size_t s : sizes) {
    const int N = 200;
    auto t = Clk::now();
    for (int i = 0; i < N; ++i) { void* x; cudaMalloc(&x, s); cudaFree(x); }
    double nat = us(t) / N;
    size_t rs = (s + gran - 1) / gran * gran;
    t = Clk::now();
    for (int i = 0; i < N; ++i) {
      CUmemGenericAllocationHandle hd; cuMemCreate(&hd, rs, &prop, 0);
      cuMemMap(win, rs, 0, hd, 0);
      CUmemAccessDesc ad = {}; ad.location = prop.location; ad.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      cuMemSetAccess(win, rs, &ad, 1);
      cuMemUnmap(win, rs); cuMemRelease(hd);
    }
    double vmm = us(t) / N;
    printf("size %8zu: cudaMalloc+Free %.2f us, VMM create+map+access+unmap+release %.2f us\n", s, nat, vmm);
  }
  CUmemGenericAllocationHandle hd; cuMemCreate(&hd, gran, &prop, 0); cuMemMap(win, gran, 0, hd, 0);
  CUmemAccessDesc ad = {}; ad.location = prop.location; ad.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE; cuMemSetAccess(win, gran, &ad, 1);
  cudaError_t me = cudaMemset((void*)win, 7, 4096); unsigned char b[4]; cudaMemcpy(b, (void*)win, 4, cudaMemcpyDeviceToHost);
  printf("memset in window: %d byte %d\n", me, b[0]);
  cudaPointerAttributes pa; cudaPointerGetAttributes(&pa, (void*)win); printf("attr type %d dev %d\n", pa.type, pa.device);
  void* mm = mmap((void*)0x580000000000ul, 1 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  printf("host mmap inside reserved window: %p\n", mm);
  return 0;
}
