// Probe: NVIDIA's driver's answers to the VMM calls' corner cases, which rgpu's libcuda.so.1 gives
// too (docs/compatibility.md, tests/cuda/driver_vmm.cpp).  Not part of the build:
//   nvcc -o vmm_errors vmm_errors.cu -lcuda && ./vmm_errors
// (A handle that is none, e.g. cuMemRelease(0xdead0000), crashes NVIDIA's driver: not probed.)
#include <cuda.h>

#include <cstdio>
#define P(x)                     \
  {                              \
    CUresult e_ = (x);           \
    const char* n = 0;           \
    cuGetErrorName(e_, &n);      \
    printf("%s -> %s\n", #x, n); \
  }
static void sizes_and_ranges() {
  CUmemAllocationProp p = {};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  size_t g, rg;
  cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  cuMemGetAllocationGranularity(&rg, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  printf("g %zu %zu\n", g, rg);
  CUdeviceptr v, w;
  P(cuMemAddressReserve(&w, g + 1, 0, 0, 0));
  P(cuMemAddressReserve(&v, 4 * g, 0, 0, 0));
  CUmemGenericAllocationHandle a, b, x;
  P(cuMemCreate(&x, g + 1, &p, 0));
  P(cuMemCreate(&a, g, &p, 0));
  P(cuMemCreate(&b, 2 * g, &p, 0));
  P(cuMemMap(v, g, 0, a, 0));
  P(cuMemMap(v, g, 0, b, 0));
  P(cuMemMap(v + g, g + 4096, 0, b, 0));
  P(cuMemMap(v + g, g, 4096, b, 0));
  P(cuMemMap(v + 3 * g, 2 * g, 0, b, 0));
  P(cuMemMap(v + g, 2 * g, 0, b, 0));
  unsigned long long f = 9;
  CUmemLocation l = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  P(cuMemGetAccess(&f, &l, v));
  printf("f %llu\n", f);
  CUmemAccessDesc ad = {};
  ad.location = l;
  ad.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  P(cuMemSetAccess(v, g / 2, &ad, 1));
  P(cuMemSetAccess(v, 4 * g, &ad, 1));
  P(cuMemSetAccess(v, 3 * g, &ad, 1));
  CUdeviceptr bs;
  size_t sz;
  P(cuMemGetAddressRange(&bs, &sz, v + g + 5));
  printf("range +%llx %zu\n", bs - v, sz);
  P(cuMemUnmap(v, g / 2));
  P(cuMemUnmap(v + g, g));
  P(cuMemUnmap(v, 3 * g));
  P(cuMemUnmap(v, g));
  P(cuMemRelease(a));
  P(cuMemRelease(a));
  P(cuMemMap(v, g, 0, b, 0));
  P(cuMemAddressFree(v, 2 * g));
  P(cuMemAddressFree(v, 4 * g));
  P(cuMemRelease(b));
}
static void handles_and_frees() {
  CUmemAllocationProp p = {};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;

  size_t g;
  cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);

  CUdeviceptr v;
  P(cuMemAddressReserve(&v, 4 * g, 0, 0, 0));

  CUmemGenericAllocationHandle a, b, r = 0;
  P(cuMemCreate(&a, g, &p, 0));
  P(cuMemCreate(&b, g, &p, 0));

  P(cuMemMap(v, g, 0, a, 0));
  P(cuMemMap(v, g, 0, b, 0));
  P(cuMemMap(v + g, g, 0, a, 0));

  unsigned long long f = 9;
  CUmemLocation l = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  P(cuMemGetAccess(&f, &l, v + 2 * g));
  printf("f %llu\n", f);

  P(cuMemRetainAllocationHandle(&r, (void*)(v + 2 * g)));
  P(cuMemRetainAllocationHandle(&r, (void*)(v + g + 8)));
  printf("r==a %d\n", r == a);

  P(cuMemRelease(a));
  P(cuMemRetainAllocationHandle(&r, (void*)v));
  printf("r==a %d\n", r == a);
  P(cuMemRelease(r));

  CUmemAllocationProp q = {};
  P(cuMemGetAllocationPropertiesFromHandle(&q, a));
  printf("t%d l%d/%d h%d\n", q.type, q.location.type, q.location.id, q.requestedHandleTypes);

  P(cuMemsetD8(v + 3 * g, 1, 16));
  P(cuMemUnmap(v + 2 * g, g));
  P(cuMemAddressFree(v, 4 * g));
  P(cuMemUnmap(v, 2 * g));
  P(cuMemAddressFree(v, 4 * g));

  P(cuMemRelease(b));
  P(cuMemAddressReserve(&v, 2 * g, 0, 0, 0));
  P(cuMemCreate(&a, g, &p, 0));
  P(cuMemMap(v, g, 0, a, 0));
  P(cuMemRelease(a));
  P(cuMemAddressFree(v, 2 * g));
  P(cuMemUnmap(v, g));
  P(cuMemAddressFree(v, 2 * g));
}
int main() {
  setvbuf(stdout, 0, _IONBF, 0);
  cuInit(0);
  CUdevice d;
  cuDeviceGet(&d, 0);
  CUcontext c;
  cuDevicePrimaryCtxRetain(&c, d);
  cuCtxSetCurrent(c);
  sizes_and_ranges();
  handles_and_frees();
  return 0;
}
