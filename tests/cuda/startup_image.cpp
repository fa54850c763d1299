// Lazy modules through the driver API (tests/integration/startup_test.cc counts what travels with
// RGPU_STATS): images whose headers are garbage are refused at cuModuleLoadData; an image whose
// headers are right but whose contents do not parse loads, and fails at its first use with
// CUDA_ERROR_INVALID_IMAGE (the reason is logged), again without being sent again; a module
// loaded and unloaded unused costs nothing; a missing name is CUDA_ERROR_NOT_FOUND; two threads
// launching kernels of one library at once send it once.  Built like driver_api (the toolkit's
// stub libcuda.so); rgpu only: natively a driver may refuse the broken image at load.
#include <cuda.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "driver_check.h"
#include "launch_lib_cubin.h"
#include "launch_lib_fatbin.h"

namespace {

template <class T>
void put(std::vector<uint8_t>& v, size_t off, T x) {
  memcpy(v.data() + off, &x, sizeof x);
}

// A fat binary whose headers are right and whose one cubin entry says it is ZSTD-compressed, but
// holds bytes that are no ZSTD frame.
std::vector<uint8_t> broken_fatbin() {
  const size_t payload = 64;
  std::vector<uint8_t> f(16 + 64 + payload, 0x5a);
  put<uint32_t>(f, 0, 0xBA55ED50);  // magic
  put<uint16_t>(f, 4, 1);           // version
  put<uint16_t>(f, 6, 16);          // header size
  put<uint64_t>(f, 8, 64 + payload);
  uint8_t* e = f.data() + 16;
  memset(e, 0, 64);
  std::vector<uint8_t> h(64, 0);
  put<uint16_t>(h, 0, 2);  // an ELF entry
  put<uint32_t>(h, 4, 64);
  put<uint32_t>(h, 8, payload);
  put<uint32_t>(h, 16, payload);  // compressed size
  put<uint32_t>(h, 28, 90);       // sm_90
  put<uint64_t>(h, 40, 0x8000);   // ZSTD
  put<uint64_t>(h, 56, 4096);     // decompressed size
  memcpy(e, h.data(), h.size());
  return f;
}

}  // namespace

int main() {
  EXPECT_OK(cuInit(0));
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  EXPECT_OK(cuDeviceGet(&dev, 0));
  EXPECT_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
  EXPECT_OK(cuCtxSetCurrent(ctx));

  // Refused at load: garbage headers.
  CUmodule m = nullptr;
  const char text[] = "not an image";
  EXPECT_ERR(cuModuleLoadData(&m, text), CUDA_ERROR_INVALID_IMAGE);
  std::vector<uint8_t> bad_header = broken_fatbin();
  put<uint32_t>(bad_header, 16 + 8, 1u << 30);  // the entry runs past the fat binary
  EXPECT_ERR(cuModuleLoadData(&m, bad_header.data()), CUDA_ERROR_INVALID_IMAGE);
  std::vector<uint8_t> bad_elf(lib_cubin, lib_cubin + sizeof lib_cubin);
  put<uint16_t>(bad_elf, 18, 62);  // x86-64, not CUDA
  EXPECT_ERR(cuModuleLoadData(&m, bad_elf.data()), CUDA_ERROR_INVALID_IMAGE);

  // Loads; fails where it is first used, and again at the next use.
  std::vector<uint8_t> broken = broken_fatbin();
  EXPECT_OK(cuModuleLoadData(&m, broken.data()));
  CUfunction f = nullptr;
  EXPECT_ERR(cuModuleGetFunction(&f, m, "lib_add"), CUDA_ERROR_INVALID_IMAGE);
  EXPECT_ERR(cuModuleGetFunction(&f, m, "lib_add"), CUDA_ERROR_INVALID_IMAGE);
  CUdeviceptr g = 0;
  EXPECT_ERR(cuModuleGetGlobal(&g, nullptr, m, "lib_counter"), CUDA_ERROR_INVALID_IMAGE);
  EXPECT_OK(cuModuleUnload(m));

  // Loaded and unloaded unused: nothing travels.
  EXPECT_OK(cuModuleLoadData(&m, lib_cubin));
  EXPECT_OK(cuModuleUnload(m));

  // A module used: its global's initial value before any launch, a missing name, a launch.
  EXPECT_OK(cuModuleLoadData(&m, lib_cubin));
  size_t bytes = 0;
  EXPECT_OK(cuModuleGetGlobal(&g, &bytes, m, "lib_counter"));
  int counter = 0;
  EXPECT_OK(cuMemcpyDtoH(&counter, g, sizeof counter));
  EXPECT_TRUE(bytes == sizeof(int) && counter == 42, "lib_counter's initial value");
  EXPECT_ERR(cuModuleGetFunction(&f, m, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
  EXPECT_OK(cuModuleGetFunction(&f, m, "lib_add"));
  const int n = 256;
  CUdeviceptr d = 0;
  EXPECT_OK(cuMemAlloc(&d, 2 * n * sizeof(int)));
  EXPECT_OK(cuMemsetD32(d, 1, 2 * n));
  int v = 5, count = n;
  void* args[] = {&d, &v, &count};
  EXPECT_OK(cuLaunchKernel(f, 1, 1, 1, n, 1, 1, 0, nullptr, args, nullptr));
  EXPECT_OK(cuModuleUnload(m));

  // Two threads first-launching kernels of one library at the same moment.
  CUlibrary lib = nullptr;
  EXPECT_OK(cuLibraryLoadData(&lib, lib_fatbin, nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel k[2] = {nullptr, nullptr};
  EXPECT_OK(cuLibraryGetKernel(&k[0], lib, "lib_add"));
  EXPECT_OK(cuLibraryGetKernel(&k[1], lib, "lib_scale"));
  EXPECT_ERR(cuLibraryGetKernel(&k[1], lib, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
  EXPECT_OK(cuLibraryGetKernel(&k[1], lib, "lib_scale"));
  CUresult r[2] = {CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      cuCtxSetCurrent(ctx);
      CUdeviceptr at = d + t * n * sizeof(int);
      float scale = 3.0f;
      int add = 2;
      void* targs[] = {&at, t == 0 ? static_cast<void*>(&add) : static_cast<void*>(&scale), &count};
      r[t] = cuLaunchKernel(reinterpret_cast<CUfunction>(k[t]), 1, 1, 1, n, 1, 1, 0, nullptr, targs,
                            nullptr);
    });
  for (auto& t : threads) t.join();
  EXPECT_OK(r[0]);
  EXPECT_OK(r[1]);
  std::vector<int> h(2 * n);
  EXPECT_OK(cuMemcpyDtoH(h.data(), d, h.size() * sizeof(int)));
  bool added = true;
  for (int i = 0; i < n; ++i) added = added && h[i] == 1 + 5 + 2;
  EXPECT_TRUE(added, "lib_add from the module, then from the library");
  EXPECT_OK(cuLibraryUnload(lib));
  EXPECT_OK(cuMemFree(d));
  printf("startup_image: %s (%d failures)\n", g_failures ? "FAILED" : "passed", g_failures);
  return g_failures ? 1 : 0;
}
