// Virtual memory management through the driver API (what PyTorch's expandable segments use):
// granularity, a reservation of two chunks, two physical chunks mapped back to back with access
// set over both at once, memsets, copies and a kernel (launch_lib.cu's lib_add, as a cubin) across
// the boundary, one chunk unmapped and another mapped at its place, one allocation mapped at two
// addresses, handles retained from an address, properties, release orders, the memory coming back,
// and the errors of bad requests.  Built like driver_api.cpp; natively and through rgpu's
// libcuda.so.1 it prints the same lines.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "driver_check.h"
#include "launch_lib_cubin.h"

static bool all_equal(const std::vector<int>& v, size_t from, size_t to, int x) {
  for (size_t i = from; i < to; ++i)
    if (v[i] != x) return false;
  return true;
}

int main() {
  EXPECT_OK(cuInit(0));
  CUdevice dev = 0;
  cuDeviceGet(&dev, 0);
  CUcontext ctx = nullptr;
  EXPECT_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
  EXPECT_OK(cuCtxSetCurrent(ctx));

  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0, rec = 0;
  EXPECT_OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  EXPECT_OK(cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  EXPECT_TRUE(gran > 0 && (gran & (gran - 1)) == 0 && rec >= gran && rec % gran == 0,
              "granularity: a power of two, the recommended one a multiple of it");
  EXPECT_ERR(cuMemGetAllocationGranularity(&gran, &prop, (CUmemAllocationGranularity_flags)7),
             CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuMemGetAllocationGranularity(nullptr, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
             CUDA_ERROR_INVALID_VALUE);

  size_t free0 = 0, total = 0;
  EXPECT_OK(cuMemGetInfo(&free0, &total));

  // Two chunks of one granule each, reserved together.
  const size_t chunk = gran;
  const size_t n = 2 * chunk / sizeof(int);  // ints over the whole range
  CUdeviceptr va = 0;
  EXPECT_OK(cuMemAddressReserve(&va, 2 * chunk, 0, 0, 0));
  EXPECT_TRUE(va != 0 && va % gran == 0, "cuMemAddressReserve: an aligned range");
  CUmemGenericAllocationHandle h1 = 0, h2 = 0, h3 = 0;
  EXPECT_OK(cuMemCreate(&h1, chunk, &prop, 0));
  EXPECT_OK(cuMemCreate(&h2, chunk, &prop, 0));
  EXPECT_TRUE(h1 != 0 && h2 != 0 && h1 != h2, "cuMemCreate: two different handles");
  size_t free1 = 0;
  cuMemGetInfo(&free1, &total);
  EXPECT_TRUE(free1 + 2 * chunk <= free0 + chunk, "cuMemCreate: the memory is taken at once");

  EXPECT_OK(cuMemMap(va, chunk, 0, h1, 0));
  EXPECT_OK(cuMemMap(va + chunk, chunk, 0, h2, 0));
  unsigned long long flags = 99;
  CUmemLocation loc;
  loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = dev;
  EXPECT_OK(cuMemGetAccess(&flags, &loc, va));
  EXPECT_TRUE(flags == CU_MEM_ACCESS_FLAGS_PROT_NONE, "cuMemGetAccess: no access after cuMemMap");
  CUmemAccessDesc access;
  memset(&access, 0, sizeof access);
  access.location = loc;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  EXPECT_OK(cuMemSetAccess(va, 2 * chunk, &access, 1));  // both mappings at once
  EXPECT_OK(cuMemGetAccess(&flags, &loc, va + chunk + 12));
  EXPECT_TRUE(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "cuMemGetAccess: read-write");

  // Memsets and copies across the boundary between the two mappings.
  std::vector<int> h(n, 0);
  EXPECT_OK(cuMemsetD32(va, 7, n));
  EXPECT_OK(cuMemcpyDtoH(h.data(), va, 2 * chunk));
  EXPECT_TRUE(all_equal(h, 0, n, 7), "cuMemsetD32 over both mappings");
  const size_t mid = chunk / sizeof(int);
  std::vector<int> pattern(1024);
  for (int i = 0; i < 1024; ++i) pattern[i] = 1000 + i;
  EXPECT_OK(cuMemcpyHtoD(va + chunk - 512 * sizeof(int), pattern.data(), 1024 * sizeof(int)));
  EXPECT_OK(cuMemsetD8(va + chunk - 64, 0, 128));  // 32 ints: 16 on each side
  CUfunction add = nullptr;
  CUmodule mod = nullptr;
  EXPECT_OK(cuModuleLoadData(&mod, lib_cubin));
  EXPECT_OK(cuModuleGetFunction(&add, mod, "lib_add"));
  int v = 5, count = static_cast<int>(n);
  void* args[] = {&va, &v, &count};
  EXPECT_OK(cuLaunchKernel(add, (count + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
  EXPECT_OK(cuCtxSynchronize());
  EXPECT_OK(cuMemcpyDtoH(h.data(), va, 2 * chunk));
  bool good = all_equal(h, 0, mid - 512, 12) && all_equal(h, mid + 512, n, 12) &&
              all_equal(h, mid - 16, mid + 16, 5);
  for (size_t i = mid - 512; i < mid - 16; ++i) good = good && h[i] == 1005 + int(i - (mid - 512));
  for (size_t i = mid + 16; i < mid + 512; ++i) good = good && h[i] == 1005 + int(i - (mid - 512));
  EXPECT_TRUE(good, "copies, memsets and a kernel across the boundary give the expected bytes");
  // Device-to-device across the boundary, both ways.
  CUdeviceptr plain = 0;
  EXPECT_OK(cuMemAlloc(&plain, 4096));
  EXPECT_OK(cuMemcpyDtoD(plain, va + chunk - 2048, 4096));
  EXPECT_OK(cuMemcpyDtoD(va, plain, 4096));
  std::vector<int> first(1024);
  EXPECT_OK(cuMemcpyDtoH(first.data(), va, 4096));
  EXPECT_TRUE(memcmp(first.data(), h.data() + mid - 512, 4096) == 0,
              "cuMemcpyDtoD across the boundary and back into the range");
  EXPECT_OK(cuMemFree(plain));
  size_t free_mid = 0;  // two chunks held (the module and the driver's own pools counted here)
  EXPECT_OK(cuMemGetInfo(&free_mid, &total));
  unsigned int mem_type = 0;
  EXPECT_OK(cuPointerGetAttribute(&mem_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va + chunk + 4));
  EXPECT_TRUE(mem_type == CU_MEMORYTYPE_DEVICE, "a mapped address is device memory");
  unsigned long long types = 99;  // 64 bits, as NCCL reads it
  EXPECT_OK(cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, va + chunk));
  EXPECT_TRUE(types == 0, "ALLOWED_HANDLE_TYPES: none requested, none allowed");
  if (getenv("DRIVER_VMM_FABRIC_REFUSED")) {
    // Through rgpu a fabric handle is refused by name (natively it depends on the IMEX setup).
    CUmemAllocationProp fab_prop = prop;
    fab_prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
    CUmemGenericAllocationHandle fab = 0;
    EXPECT_ERR(cuMemCreate(&fab, chunk, &fab_prop, 0), CUDA_ERROR_NOT_SUPPORTED);
  }
  {
    // An allocation that may be exported as a file descriptor says so through its addresses.
    CUmemAllocationProp fd_prop = prop;
    fd_prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUdeviceptr fva = 0;
    CUmemGenericAllocationHandle fh = 0;
    EXPECT_OK(cuMemAddressReserve(&fva, chunk, 0, 0, 0));
    EXPECT_OK(cuMemCreate(&fh, chunk, &fd_prop, 0));
    EXPECT_OK(cuMemMap(fva, chunk, 0, fh, 0));
    types = 0;
    EXPECT_OK(cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, fva + 64));
    EXPECT_TRUE(types == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                "ALLOWED_HANDLE_TYPES: the requested POSIX file descriptor type");
    CUdeviceptr mbase = 0;
    size_t msize = 0;
    EXPECT_OK(cuPointerGetAttribute(&mbase, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, fva + 64));
    EXPECT_OK(cuPointerGetAttribute(&msize, CU_POINTER_ATTRIBUTE_MAPPING_SIZE, fva + 64));
    EXPECT_TRUE(mbase == fva && msize == chunk, "MAPPING_BASE_ADDR and MAPPING_SIZE of a mapping");
    EXPECT_OK(cuMemUnmap(fva, chunk));
    EXPECT_OK(cuMemRelease(fh));
    EXPECT_OK(cuMemAddressFree(fva, chunk));
  }

  // Handles: retained from an address, properties.
  CUmemGenericAllocationHandle r = 0;
  EXPECT_OK(cuMemRetainAllocationHandle(&r, reinterpret_cast<void*>(va + chunk + 100)));
  EXPECT_TRUE(r == h2, "cuMemRetainAllocationHandle gives the mapped handle");
  EXPECT_OK(cuMemRelease(r));
  CUmemAllocationProp got;
  memset(&got, 0, sizeof got);
  EXPECT_OK(cuMemGetAllocationPropertiesFromHandle(&got, h1));
  EXPECT_TRUE(got.type == CU_MEM_ALLOCATION_TYPE_PINNED &&
                  got.location.type == CU_MEM_LOCATION_TYPE_DEVICE && got.location.id == dev,
              "cuMemGetAllocationPropertiesFromHandle: pinned memory of device 0");

  // Errors (NVIDIA's driver's answers, CUDA 13 on an H200): a mapped range mapped again, sizes
  // that are no multiple of the granularity, part of a mapping unmapped or given access.
  EXPECT_ERR(cuMemMap(va, chunk, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuMemCreate(&h3, chunk + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr bad = 0;
  EXPECT_ERR(cuMemAddressReserve(&bad, chunk + 1, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuMemUnmap(va, chunk / 2), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuMemSetAccess(va, chunk / 2, &access, 1), CUDA_ERROR_INVALID_VALUE);
  CUmemGenericAllocationHandle r2 = 0;
  EXPECT_ERR(cuMemRetainAllocationHandle(&r2, reinterpret_cast<void*>(va + 2 * chunk)),
             CUDA_ERROR_INVALID_VALUE);  // beyond the mappings
  if (getenv("DRIVER_VMM_BAD_HANDLES")) {
    // NVIDIA's driver takes a handle for a pointer (a bad one crashes the program); rgpu's
    // refuses it.
    const auto none = static_cast<CUmemGenericAllocationHandle>(0xdead0000);
    EXPECT_ERR(cuMemRelease(none), CUDA_ERROR_INVALID_VALUE);
    EXPECT_ERR(cuMemMap(va, chunk, 0, none, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_ERR(cuMemGetAllocationPropertiesFromHandle(&got, none), CUDA_ERROR_INVALID_VALUE);
  }

  // The second chunk unmapped, a third allocation mapped at its place.
  EXPECT_OK(cuMemUnmap(va + chunk, chunk));
  // A mapping is a whole allocation from offset 0 (NVIDIA's driver: not supported otherwise).
  EXPECT_ERR(cuMemMap(va + chunk, chunk / 2, 0, h2, 0), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_ERR(cuMemMap(va + chunk, chunk, 4096, h2, 0), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_OK(cuMemCreate(&h3, chunk, &prop, 0));
  EXPECT_OK(cuMemMap(va + chunk, chunk, 0, h3, 0));
  EXPECT_OK(cuMemSetAccess(va + chunk, chunk, &access, 1));
  EXPECT_OK(cuMemsetD32(va + chunk, 3, mid));
  EXPECT_OK(cuMemcpyDtoH(h.data(), va, 2 * chunk));
  EXPECT_TRUE(memcmp(h.data(), first.data(), 4096) == 0 && all_equal(h, 1024, mid - 512, 12) &&
                  all_equal(h, mid, n, 3),
              "remapped: the first chunk kept its bytes, the second has the new memory's");

  // h2 is still alive (not released): mapped at a second reservation it kept its bytes.
  CUdeviceptr va2 = 0;
  EXPECT_OK(cuMemAddressReserve(&va2, chunk, 0, 0, 0));
  EXPECT_OK(cuMemMap(va2, chunk, 0, h2, 0));
  EXPECT_OK(cuMemSetAccess(va2, chunk, &access, 1));
  std::vector<int> second(mid);
  EXPECT_OK(cuMemcpyDtoH(second.data(), va2, chunk));
  EXPECT_TRUE(all_equal(second, 512, mid, 12) && second[0] == 5 && second[16] == 1005 + 528,
              "an unmapped allocation keeps its bytes and maps again elsewhere");
  // h3 mapped twice: one allocation seen at two addresses.
  CUdeviceptr va3 = 0;
  EXPECT_OK(cuMemAddressReserve(&va3, chunk, 0, 0, 0));
  EXPECT_OK(cuMemMap(va3, chunk, 0, h3, 0));
  EXPECT_OK(cuMemSetAccess(va3, chunk, &access, 1));
  EXPECT_OK(cuMemsetD32(va3, 44, 16));
  int alias[16] = {};
  EXPECT_OK(cuMemcpyDtoH(alias, va + chunk, sizeof alias));
  EXPECT_TRUE(alias[0] == 44 && alias[15] == 44, "one allocation mapped at two addresses");

  // Release orders: h1 released while mapped (freed at its unmap), h2 unmapped then released,
  // h3 released while mapped twice (freed at the second unmap); reservations go once empty.
  EXPECT_OK(cuMemRelease(h1));
  EXPECT_OK(cuMemsetD32(va, 9, 16));  // still mapped, still usable
  EXPECT_OK(cuMemcpyDtoH(alias, va, sizeof alias));
  EXPECT_TRUE(alias[0] == 9, "memory stays usable after cuMemRelease while mapped");
  EXPECT_OK(cuMemRetainAllocationHandle(&r, reinterpret_cast<void*>(va)));
  EXPECT_TRUE(r == h1, "a released handle is retained again from its mapping");
  EXPECT_OK(cuMemRelease(r));
  EXPECT_OK(cuMemUnmap(va2, chunk));
  EXPECT_OK(cuMemRelease(h2));
  EXPECT_ERR(cuMemRelease(h2), CUDA_ERROR_INVALID_VALUE);  // gone
  EXPECT_OK(cuMemRelease(h3));
  EXPECT_OK(cuMemUnmap(va3, chunk));
  EXPECT_ERR(cuMemAddressFree(va, 2 * chunk), CUDA_ERROR_INVALID_VALUE);    // mappings left
  EXPECT_ERR(cuMemUnmap(va, chunk + chunk / 2), CUDA_ERROR_INVALID_VALUE);  // half of the second
  EXPECT_OK(cuMemUnmap(va, 2 * chunk));  // two mappings in one call
  EXPECT_OK(cuMemUnmap(va, chunk));      // nothing mapped there: no error either
  EXPECT_ERR(cuMemsetD8(va, 0, 16), CUDA_ERROR_INVALID_VALUE);  // reserved, not mapped
  EXPECT_OK(cuMemAddressFree(va3, chunk));
  EXPECT_OK(cuMemAddressFree(va2, chunk));
  EXPECT_ERR(cuMemAddressFree(va, chunk), CUDA_ERROR_INVALID_VALUE);  // not the reserved size
  EXPECT_OK(cuMemAddressFree(va, 2 * chunk));
  size_t free2 = 0;
  EXPECT_OK(cuMemGetInfo(&free2, &total));
  EXPECT_TRUE(free2 >= free_mid + chunk, "every physical allocation is freed again");

  EXPECT_OK(cuModuleUnload(mod));
  if (getenv("DRIVER_VMM_RESET")) {
    // rgpu: a device reset releases the device's reservations, mappings and allocations.
    CUdeviceptr rv = 0;
    CUmemGenericAllocationHandle rh = 0;
    EXPECT_OK(cuMemAddressReserve(&rv, chunk, 0, 0, 0));
    EXPECT_OK(cuMemCreate(&rh, chunk, &prop, 0));
    EXPECT_OK(cuMemMap(rv, chunk, 0, rh, 0));
    EXPECT_OK(cuMemSetAccess(rv, chunk, &access, 1));
    EXPECT_OK(cuDevicePrimaryCtxReset(dev));
    EXPECT_OK(cuCtxSetCurrent(ctx));
    size_t free3 = 0;
    EXPECT_OK(cuMemGetInfo(&free3, &total));
    EXPECT_TRUE(free3 >= free2, "a device reset gives the physical allocation back");
    EXPECT_ERR(cuMemsetD8(rv, 0, 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT_ERR(cuMemRelease(rh), CUDA_ERROR_INVALID_VALUE);
    EXPECT_ERR(cuMemAddressFree(rv, chunk), CUDA_ERROR_INVALID_VALUE);
  } else {
    EXPECT_OK(cuDevicePrimaryCtxRelease(dev));
  }
  printf("driver_vmm: %s\n", g_failures ? "FAILED" : "passed");
  return g_failures ? 1 : 0;
}
