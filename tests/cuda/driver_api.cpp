// The driver API (libcuda.so.1) on its own: initialisation, devices and attributes, primary and
// created contexts, memory and every linear copy and memset form, modules from a cubin, a fat
// binary and PTX text (tests/cuda/launch_lib.cu, embedded by bin2c), cuLaunchKernel with argument
// pointers and with the `extra` buffer, libraries and kernels, streams, events, host functions,
// pointer attributes, cuGetProcAddress and errors.  Built by the host compiler against the
// toolkit's stub libcuda.so; it runs on NVIDIA's driver natively and on rgpu's libcuda.so.1 under
// LD_LIBRARY_PATH, printing the same lines.
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "driver_check.h"
#include "launch_lib_cubin.h"
#include "launch_lib_fatbin.h"
#include "launch_lib_ptx.h"

static void host_fn(void* p) { *static_cast<int*>(p) += 1; }
static void CUDA_CB stream_cb(CUstream, CUresult status, void* p) {
  *static_cast<int*>(p) += status == CUDA_SUCCESS ? 10 : 1000;
}

// lib_add(int* x, int v, int n) on `n` ints, with argument pointers or with the `extra` buffer.
// `globals`: also read lib_counter (PTX modules: the host backend finds no globals in PTX text,
// whose parser reads .entry parameter lists only).
static void check_module(const char* what, CUmodule m, bool globals) {
  char line[160];
  CUfunction f = nullptr;
  EXPECT_OK(cuModuleGetFunction(&f, m, "lib_add"));
  EXPECT_ERR(cuModuleGetFunction(&f, m, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
  cuModuleGetFunction(&f, m, "lib_add");
  size_t off = 0, size = 0;
  EXPECT_OK(cuFuncGetParamInfo(f, 2, &off, &size));
  snprintf(line, sizeof line, "%s: lib_add parameter 2 at offset %zu, %zu bytes", what, off, size);
  EXPECT_TRUE(off == 12 && size == 4, line);
  EXPECT_ERR(cuFuncGetParamInfo(f, 3, &off, &size), CUDA_ERROR_INVALID_VALUE);

  const int n = 1000;
  CUdeviceptr d = 0;
  cuMemAlloc(&d, n * sizeof(int));
  std::vector<int> h(n);
  for (int i = 0; i < n; ++i) h[i] = i;
  cuMemcpyHtoD(d, h.data(), n * sizeof(int));
  int v = 5, count = n;
  void* args[] = {&d, &v, &count};
  EXPECT_OK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
  struct {
    CUdeviceptr x;
    int v;
    int n;
  } packed = {d, 100, n};
  size_t packed_size = sizeof packed;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &packed_size, CU_LAUNCH_PARAM_END};
  EXPECT_OK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, nullptr, extra));
  EXPECT_ERR(cuLaunchKernel(f, 1, 1, 1, 4096, 1, 1, 0, nullptr, args, nullptr),
             CUDA_ERROR_INVALID_VALUE);
  // The launch API from before CUDA 4.0: shape and argument bytes set on the function.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  EXPECT_OK(cuFuncSetBlockShape(f, 256, 1, 1));
  EXPECT_OK(cuFuncSetSharedSize(f, 0));
  EXPECT_OK(cuParamSetSize(f, sizeof packed));
  EXPECT_OK(cuParamSetv(f, 0, &d, sizeof d));
  EXPECT_OK(cuParamSeti(f, 8, 1000));
  EXPECT_OK(cuParamSeti(f, 12, n));
  EXPECT_OK(cuLaunchGrid(f, (n + 255) / 256, 1));
  EXPECT_OK(cuParamSeti(f, 8, 2000));
  CUstream ls = nullptr;
  EXPECT_OK(cuStreamCreate(&ls, CU_STREAM_NON_BLOCKING));
  EXPECT_OK(cuCtxSynchronize());
  EXPECT_OK(cuLaunchGridAsync(f, (n + 255) / 256, 1, ls));
  EXPECT_OK(cuStreamSynchronize(ls));
  EXPECT_OK(cuStreamDestroy(ls));
  EXPECT_OK(cuParamSeti(f, 8, 10000));
  EXPECT_OK(cuLaunch(f));  // one block of 256: the first 256 ints only
  EXPECT_ERR(cuFuncSetBlockShape(nullptr, 1, 1, 1), CUDA_ERROR_INVALID_HANDLE);
#pragma GCC diagnostic pop
  EXPECT_OK(cuCtxSynchronize());
  cuMemcpyDtoH(h.data(), d, n * sizeof(int));
  bool good = true;
  for (int i = 0; i < n; ++i) good = good && h[i] == i + 3105 + (i < 256 ? 10000 : 0);
  snprintf(line, sizeof line,
           "%s: lib_add by argument pointers, the extra buffer and the pre-4.0 launch API", what);
  EXPECT_TRUE(good, line);
  if (!good) printf("   h[0] %d h[255] %d h[256] %d h[999] %d\n", h[0], h[255], h[256], h[999]);

  cuMemFree(d);
  if (!globals) return;
  CUdeviceptr g = 0;
  size_t gsize = 0;
  EXPECT_OK(cuModuleGetGlobal(&g, &gsize, m, "lib_counter"));
  int counter = 0;
  cuMemcpyDtoH(&counter, g, sizeof counter);
  snprintf(line, sizeof line, "%s: global lib_counter = %d, %zu bytes", what, counter, gsize);
  EXPECT_TRUE(counter == 42 && gsize == sizeof(int), line);
}

int main() {
  int count = -1;
  EXPECT_ERR(cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_OK(cuInit(0));
  int version = 0;
  EXPECT_OK(cuDriverGetVersion(&version));
  EXPECT_TRUE(version >= 13000, "driver version is 13000 or later");

  // ---- devices
  EXPECT_OK(cuDeviceGetCount(&count));
  EXPECT_TRUE(count >= 1, "at least one device");
  CUdevice dev = -1;
  EXPECT_OK(cuDeviceGet(&dev, 0));
  EXPECT_ERR(cuDeviceGet(&dev, count), CUDA_ERROR_INVALID_DEVICE);
  cuDeviceGet(&dev, 0);
  char name[256] = {};
  EXPECT_OK(cuDeviceGetName(name, sizeof name, dev));
  EXPECT_TRUE(name[0] != '\0', "device has a name");
  size_t total = 0;
  EXPECT_OK(cuDeviceTotalMem(&total, dev));
  EXPECT_TRUE(total > 0, "device has memory");
  int warp = 0, threads = 0, major = 0;
  EXPECT_OK(cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev));
  EXPECT_OK(cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev));
  EXPECT_OK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  EXPECT_TRUE(warp == 32 && threads == 1024 && major >= 7, "warp size 32, 1024 threads, cc >= 7");
  CUuuid uuid;
  EXPECT_OK(cuDeviceGetUuid(&uuid, dev));
  char bus[64] = {};
  EXPECT_OK(cuDeviceGetPCIBusId(bus, sizeof bus, dev));
  CUdevice by_bus = -1;
  EXPECT_OK(cuDeviceGetByPCIBusId(&by_bus, bus));
  EXPECT_TRUE(by_bus == dev, "cuDeviceGetByPCIBusId finds the device by its bus id");
  EXPECT_ERR(cuDeviceGetByPCIBusId(&by_bus, "not a bus id"), CUDA_ERROR_INVALID_VALUE);

  // ---- contexts
  CUcontext none = nullptr;
  CUdeviceptr early = 0;
  EXPECT_ERR(cuMemAlloc(&early, 16), CUDA_ERROR_INVALID_CONTEXT);
  CUcontext primary = nullptr;
  EXPECT_OK(cuDevicePrimaryCtxRetain(&primary, dev));
  unsigned flags = 99;
  int active = 0;
  EXPECT_OK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  EXPECT_TRUE(active == 1, "primary context active after retain");
  EXPECT_OK(cuCtxSetCurrent(primary));
  CUcontext cur = nullptr;
  EXPECT_OK(cuCtxGetCurrent(&cur));
  EXPECT_TRUE(cur == primary, "current context is the primary one");
  CUcontext created = nullptr;
  EXPECT_OK(cuCtxCreate(&created, nullptr, 0, dev));
  cuCtxGetCurrent(&cur);
  EXPECT_TRUE(cur == created && created != primary, "a created context is made current");
  CUdevice cdev = -1;
  EXPECT_OK(cuCtxGetDevice(&cdev));
  EXPECT_TRUE(cdev == dev, "cuCtxGetDevice names the device");
  unsigned long long id1 = 0, id2 = 0;
  EXPECT_OK(cuCtxGetId(created, &id1));
  EXPECT_OK(cuCtxGetId(primary, &id2));
  EXPECT_TRUE(id1 != id2, "contexts have distinct ids");
  int least = 0, greatest = 0;
  EXPECT_OK(cuCtxGetStreamPriorityRange(&least, &greatest));
  EXPECT_TRUE(greatest <= least, "stream priorities: greatest <= least");
  size_t cig = 99;  // cusolverDnCreate asks whether the context shares a graphics context (CIG)
  EXPECT_OK(cuCtxGetLimit(&cig, CU_LIMIT_CIG_ENABLED));
  EXPECT_TRUE(cig == 0, "a context made by cuCtxCreate is not a CIG context");
  CUcontext popped = nullptr;
  EXPECT_OK(cuCtxPopCurrent(&popped));
  cuCtxGetCurrent(&cur);
  EXPECT_TRUE(popped == created && cur == primary, "pop returns the created context");
  EXPECT_OK(cuCtxPushCurrent(created));
  EXPECT_OK(cuCtxSynchronize());
  EXPECT_OK(cuCtxPopCurrent(&popped));
  EXPECT_OK(cuCtxDestroy(created));
  (void)none;

  // ---- memory and copies
  const size_t n = 4096;
  std::vector<unsigned char> a(n), b(n);
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<unsigned char>(i * 7);
  CUdeviceptr d1 = 0, d2 = 0;
  EXPECT_OK(cuMemAlloc(&d1, n));
  EXPECT_OK(cuMemAlloc(&d2, n));
  size_t free_b = 0, total_b = 0;
  EXPECT_OK(cuMemGetInfo(&free_b, &total_b));
  EXPECT_TRUE(free_b <= total_b && total_b > 0, "cuMemGetInfo: free <= total");
  CUdeviceptr base = 0;
  size_t range = 0;
  EXPECT_OK(cuMemGetAddressRange(&base, &range, d1 + 100));
  EXPECT_TRUE(base == d1 && range >= n, "cuMemGetAddressRange finds the allocation");
  EXPECT_OK(cuMemcpyHtoD(d1, a.data(), n));
  EXPECT_OK(cuMemcpyDtoD(d2, d1, n));
  EXPECT_OK(cuMemcpyDtoH(b.data(), d2, n));
  EXPECT_TRUE(a == b, "HtoD, DtoD, DtoH round trip");
  std::fill(b.begin(), b.end(), 0);
  EXPECT_OK(cuMemcpy(reinterpret_cast<CUdeviceptr>(b.data()), d1, n));
  EXPECT_TRUE(a == b, "cuMemcpy (unified addressing) device to host");

  CUstream s = nullptr;
  EXPECT_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::fill(b.begin(), b.end(), 0);
  EXPECT_OK(cuMemsetD8Async(d2, 0, n, s));
  EXPECT_OK(cuMemcpyHtoDAsync(d2, a.data(), n, s));
  EXPECT_OK(cuMemcpyDtoDAsync(d1, d2, n, s));
  EXPECT_OK(cuMemcpyDtoHAsync(b.data(), d1, n, s));
  EXPECT_OK(cuStreamSynchronize(s));
  EXPECT_TRUE(a == b, "asynchronous copies on a stream");

  // Memsets: bytes, 16- and 32-bit patterns, 2-D.
  std::vector<unsigned> w(n / 4);
  EXPECT_OK(cuMemsetD32(d1, 0x12345678u, n / 4));
  cuMemcpyDtoH(w.data(), d1, n);
  bool all = true;
  for (unsigned x : w) all = all && x == 0x12345678u;
  EXPECT_TRUE(all, "cuMemsetD32 with a 32-bit pattern");
  EXPECT_OK(cuMemsetD16(d1, 0xabcd, n / 2));
  std::vector<unsigned short> hw(n / 2);
  cuMemcpyDtoH(hw.data(), d1, n);
  all = true;
  for (unsigned short x : hw) all = all && x == 0xabcd;
  EXPECT_TRUE(all, "cuMemsetD16 with a 16-bit pattern");
  EXPECT_OK(cuMemsetD8(d1, 0x5a, n));
  cuMemcpyDtoH(b.data(), d1, n);
  all = true;
  for (unsigned char x : b) all = all && x == 0x5a;
  EXPECT_TRUE(all, "cuMemsetD8");
  EXPECT_OK(cuMemsetD32Async(d1, 0x01010101u, n / 4, s));
  EXPECT_OK(cuStreamSynchronize(s));
  cuMemcpyDtoH(b.data(), d1, n);
  all = true;
  for (unsigned char x : b) all = all && x == 1;
  EXPECT_TRUE(all, "cuMemsetD32Async with a repeated byte");

  // Pitched 2-D: 40 rows of 100 bytes.
  CUdeviceptr p2 = 0;
  size_t pitch = 0;
  EXPECT_OK(cuMemAllocPitch(&p2, &pitch, 100, 40, 4));
  EXPECT_TRUE(pitch >= 100, "pitch covers the row");
  EXPECT_OK(cuMemsetD2D8(p2, pitch, 0, 100, 40));
  std::vector<unsigned char> img(100 * 40), back(100 * 40);
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<unsigned char>(i * 3 + 1);
  CUDA_MEMCPY2D c2 = {};
  c2.srcMemoryType = CU_MEMORYTYPE_HOST, c2.srcHost = img.data(), c2.srcPitch = 100;
  c2.dstMemoryType = CU_MEMORYTYPE_DEVICE, c2.dstDevice = p2, c2.dstPitch = pitch;
  c2.WidthInBytes = 100, c2.Height = 40;
  EXPECT_OK(cuMemcpy2D(&c2));
  CUDA_MEMCPY2D r2 = {};
  r2.srcMemoryType = CU_MEMORYTYPE_DEVICE, r2.srcDevice = p2, r2.srcPitch = pitch;
  r2.dstMemoryType = CU_MEMORYTYPE_HOST, r2.dstHost = back.data(), r2.dstPitch = 100;
  r2.WidthInBytes = 100, r2.Height = 40;
  EXPECT_OK(cuMemcpy2DAsync(&r2, s));
  EXPECT_OK(cuStreamSynchronize(s));
  EXPECT_TRUE(img == back, "cuMemcpy2D host to pitched device and back (async)");
  EXPECT_OK(cuMemsetD2D32(p2, pitch, 0x00ff00ffu, 25, 40));
  cuMemcpy2D(&r2);
  all = true;
  for (size_t i = 0; i < back.size(); i += 4) all = all && back[i] == 0xff && back[i + 1] == 0;
  EXPECT_TRUE(all, "cuMemsetD2D32 with a pattern");
  // 3-D: 4 slices of 40 rows, device (pitched) to host, from slice 1 row 2 byte 10.
  CUDA_MEMCPY3D c3 = {};
  c3.srcMemoryType = CU_MEMORYTYPE_DEVICE, c3.srcDevice = p2, c3.srcPitch = pitch,
  c3.srcHeight = 10;
  c3.srcXInBytes = 10, c3.srcY = 2, c3.srcZ = 1;
  std::vector<unsigned char> box(50 * 5 * 2, 0xee);
  c3.dstMemoryType = CU_MEMORYTYPE_HOST, c3.dstHost = box.data(), c3.dstPitch = 50,
  c3.dstHeight = 5;
  c3.WidthInBytes = 50, c3.Height = 5, c3.Depth = 2;
  EXPECT_OK(cuMemcpy2D(&c2));
  EXPECT_OK(cuMemcpy3D(&c3));
  all = true;
  for (size_t z = 0; z < 2; ++z)
    for (size_t y = 0; y < 5; ++y)
      for (size_t x = 0; x < 50; ++x)
        all = all && box[(z * 5 + y) * 50 + x] == img[((1 + z) * 10 + 2 + y) * 100 + 10 + x];
  EXPECT_TRUE(all, "cuMemcpy3D of a box of pitched device memory to host");
  EXPECT_OK(cuMemFree(p2));

  // Page-locked host memory.
  void* pinned = nullptr;
  EXPECT_OK(cuMemHostAlloc(&pinned, n, 0));
  unsigned hflags = 99;
  EXPECT_OK(cuMemHostGetFlags(&hflags, pinned));
  std::memcpy(pinned, a.data(), n);
  EXPECT_OK(cuMemcpyHtoD(d2, pinned, n));
  std::vector<unsigned char> reg(n);
  EXPECT_OK(cuMemHostRegister(reg.data(), n, 0));
  EXPECT_OK(cuMemcpyDtoH(reg.data(), d2, n));
  EXPECT_TRUE(reg == a, "copies from page-locked and into registered memory");
  EXPECT_OK(cuMemHostUnregister(reg.data()));
  EXPECT_ERR(cuMemHostUnregister(reg.data()), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);

  // Pointer attributes.
  unsigned mtype = 0;
  EXPECT_OK(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d1));
  EXPECT_TRUE(mtype == CU_MEMORYTYPE_DEVICE, "device memory is CU_MEMORYTYPE_DEVICE");
  EXPECT_OK(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  reinterpret_cast<CUdeviceptr>(pinned)));
  EXPECT_TRUE(mtype == CU_MEMORYTYPE_HOST, "page-locked memory is CU_MEMORYTYPE_HOST");
  CUdeviceptr start = 0;
  EXPECT_OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d1 + 8));
  EXPECT_TRUE(start == d1, "range start of an interior pointer");
  int ordinal = -1;
  EXPECT_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d1));
  EXPECT_TRUE(ordinal == dev, "device ordinal of an allocation");
  unsigned long long handle_types = 99;
  EXPECT_OK(cuPointerGetAttribute(&handle_types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, d1));
  EXPECT_TRUE(handle_types == 0, "ALLOWED_HANDLE_TYPES of cuMemAlloc memory: none");

  // Page-locked memory named as device memory: under unified addressing its device address is
  // its host address, and the driver copies from and into it (XLA reads a scalar it keeps in
  // cuMemHostAlloc'd memory with cuMemcpyDtoHAsync).
  {
    std::vector<unsigned char> out(n, 0), pat(n);
    for (size_t i = 0; i < n; ++i) pat[i] = static_cast<unsigned char>(i * 7 + 3);
    std::memcpy(pinned, a.data(), n);
    const CUdeviceptr pin = reinterpret_cast<CUdeviceptr>(pinned);
    EXPECT_OK(cuMemcpyDtoHAsync(out.data(), pin + 16, n - 16, s));
    EXPECT_OK(cuStreamSynchronize(s));
    EXPECT_TRUE(std::memcmp(out.data(), a.data() + 16, n - 16) == 0,
                "cuMemcpyDtoHAsync from page-locked memory");
    EXPECT_OK(cuMemcpyHtoD(pin, pat.data(), n));
    EXPECT_TRUE(std::memcmp(pinned, pat.data(), n) == 0, "cuMemcpyHtoD into page-locked memory");
    EXPECT_OK(cuMemcpyDtoD(d2, pin, n));  // page-locked -> device
    EXPECT_OK(cuMemcpyDtoH(out.data(), d2, n));
    EXPECT_TRUE(out == pat, "cuMemcpyDtoD from page-locked memory into device memory");
    EXPECT_OK(cuMemcpyHtoD(d2, a.data(), n));
    EXPECT_OK(cuCtxSynchronize());                // s does not wait for the legacy stream's copy
    EXPECT_OK(cuMemcpyDtoDAsync(pin, d2, n, s));  // device -> page-locked, in stream order
    EXPECT_OK(cuStreamSynchronize(s));
    EXPECT_TRUE(std::memcmp(pinned, a.data(), n) == 0,
                "cuMemcpyDtoDAsync from device memory into page-locked memory");
    // A synchronous copy out of page-locked memory comes after the legacy stream's copy into it.
    const size_t big = 16 << 20;
    void* pinned_big = nullptr;
    CUdeviceptr dbig = 0;
    EXPECT_OK(cuMemHostAlloc(&pinned_big, big, 0));
    EXPECT_OK(cuMemAlloc(&dbig, big));
    std::memset(pinned_big, 0, big);
    EXPECT_OK(cuMemsetD8(dbig, 0x5A, big));
    EXPECT_OK(cuMemcpyDtoHAsync(pinned_big, dbig, big, nullptr));
    std::vector<unsigned char> back(big);
    EXPECT_OK(cuMemcpyDtoH(back.data(), reinterpret_cast<CUdeviceptr>(pinned_big), big));
    EXPECT_TRUE(back == std::vector<unsigned char>(big, 0x5A),
                "cuMemcpyDtoH from page-locked memory waits for the legacy stream's copy into it");
    // Freed while an asynchronous copy into it is on its way: the free waits for it (as CUDA's
    // waits for the work before it), and the link to the server survives.
    void* doomed = nullptr;
    EXPECT_OK(cuMemHostAlloc(&doomed, big, 0));
    EXPECT_OK(cuMemcpyDtoHAsync(doomed, dbig, big, s));
    EXPECT_OK(cuMemFreeHost(doomed));
    EXPECT_OK(cuCtxSynchronize());
    EXPECT_OK(cuMemFree(dbig));
    EXPECT_OK(cuMemFreeHost(pinned_big));
  }
  EXPECT_OK(cuMemFreeHost(pinned));

  // ---- streams, events, host functions
  CUevent e1 = nullptr, e2 = nullptr;
  EXPECT_OK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  EXPECT_OK(cuEventCreate(&e2, CU_EVENT_DEFAULT));
  EXPECT_OK(cuEventRecord(e1, s));
  int calls = 0;
  EXPECT_OK(cuLaunchHostFunc(s, host_fn, &calls));
  EXPECT_OK(cuStreamAddCallback(s, stream_cb, &calls, 0));
  EXPECT_OK(cuEventRecordWithFlags(e2, s, 0));
  EXPECT_OK(cuEventSynchronize(e2));
  EXPECT_OK(cuEventQuery(e2));
  EXPECT_OK(cuStreamQuery(s));
  EXPECT_TRUE(calls == 11, "host function and stream callback ran in order");
  float ms = -1;
  EXPECT_OK(cuEventElapsedTime(&ms, e1, e2));
  EXPECT_TRUE(ms >= 0, "elapsed time is not negative");
  CUstream s2 = nullptr;
  EXPECT_OK(cuStreamCreateWithPriority(&s2, 0, greatest));
  int prio = 99;
  unsigned sflags = 99;
  EXPECT_OK(cuStreamGetPriority(s2, &prio));
  EXPECT_OK(cuStreamGetFlags(s, &sflags));
  EXPECT_TRUE(prio == greatest && sflags == CU_STREAM_NON_BLOCKING, "stream priority and flags");
  EXPECT_OK(cuStreamWaitEvent(s2, e2, 0));
  EXPECT_OK(cuStreamSynchronize(s2));
  CUcontext sctx = nullptr;
  EXPECT_OK(cuStreamGetCtx(s, &sctx));
  EXPECT_TRUE(sctx == primary, "a stream belongs to the context it was made in");
  EXPECT_OK(cuEventDestroy(e1));
  EXPECT_OK(cuEventDestroy(e2));
  EXPECT_OK(cuStreamDestroy(s2));

  // ---- stream-ordered allocation
  CUdeviceptr pa = 0;
  EXPECT_OK(cuMemAllocAsync(&pa, 1 << 20, s));
  EXPECT_OK(cuMemsetD32Async(pa, 7, (1 << 20) / 4, s));
  unsigned seven = 0;
  EXPECT_OK(cuMemcpyDtoHAsync(&seven, pa + 4096, 4, s));
  EXPECT_OK(cuMemFreeAsync(pa, s));
  EXPECT_OK(cuStreamSynchronize(s));
  EXPECT_TRUE(seven == 7, "cuMemAllocAsync memory set and read on the stream");

  // ---- modules: cubin, fat binary, PTX; libraries
  CUmodule m = nullptr;
  EXPECT_OK(cuModuleLoadData(&m, lib_cubin));
  check_module("cubin", m, true);
  EXPECT_OK(cuModuleUnload(m));
  EXPECT_OK(cuModuleLoadFatBinary(&m, lib_fatbin));
  check_module("fatbin", m, true);
  EXPECT_OK(cuModuleUnload(m));
  EXPECT_OK(cuModuleLoadDataEx(&m, lib_ptx, 0, nullptr, nullptr));
  check_module("ptx", m, false);
  EXPECT_OK(cuModuleUnload(m));

  // The same image loaded twice, each module asked for its functions in another order: each
  // function runs itself (through rgpu both modules share one server module, numbered by name).
  {
    CUmodule a = nullptr, b = nullptr;
    EXPECT_OK(cuModuleLoadData(&a, lib_fatbin));
    EXPECT_OK(cuModuleLoadData(&b, lib_fatbin));
    CUfunction scale = nullptr, add = nullptr;
    EXPECT_OK(cuModuleGetFunction(&scale, a, "lib_scale"));
    EXPECT_OK(cuModuleGetFunction(&add, b, "lib_add"));
    CUdeviceptr xs = 0, xi = 0;
    EXPECT_OK(cuMemAlloc(&xs, 64 * sizeof(float)));
    EXPECT_OK(cuMemAlloc(&xi, 64 * sizeof(int)));
    std::vector<float> hs(64, 3.0f);
    std::vector<int> hi(64, 5);
    cuMemcpyHtoD(xs, hs.data(), 64 * sizeof(float));
    cuMemcpyHtoD(xi, hi.data(), 64 * sizeof(int));
    float f = 2.0f;
    int v = 10, n = 64;
    void* add_args[] = {&xi, &v, &n};
    void* scale_args[] = {&xs, &f, &n};
    EXPECT_OK(cuLaunchKernel(add, 1, 1, 1, 64, 1, 1, 0, nullptr, add_args, nullptr));
    EXPECT_OK(cuLaunchKernel(scale, 1, 1, 1, 64, 1, 1, 0, nullptr, scale_args, nullptr));
    EXPECT_OK(cuCtxSynchronize());
    cuMemcpyDtoH(hs.data(), xs, 64 * sizeof(float));
    cuMemcpyDtoH(hi.data(), xi, 64 * sizeof(int));
    EXPECT_TRUE(hs[0] == 6.0f && hs[63] == 6.0f && hi[0] == 15 && hi[63] == 15,
                "one image loaded twice: each module's functions run themselves");
    cuMemFree(xs);
    cuMemFree(xi);
    EXPECT_OK(cuModuleUnload(a));
    EXPECT_OK(cuModuleUnload(b));
  }

  CUlibrary lib = nullptr;
  EXPECT_OK(cuLibraryLoadData(&lib, lib_fatbin, nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel k = nullptr;
  EXPECT_OK(cuLibraryGetKernel(&k, lib, "lib_scale"));
  CUfunction kf = nullptr;
  EXPECT_OK(cuKernelGetFunction(&kf, k));
  std::vector<float> fl(256);
  for (int i = 0; i < 256; ++i) fl[i] = static_cast<float>(i);
  // On `s` too: a synchronous copy runs on the legacy stream, which a non-blocking stream does not
  // wait for (through rgpu a small one may return before it is done; seen under load in CI).
  cuMemcpyHtoDAsync(d1, fl.data(), 256 * sizeof(float), s);
  float factor = 2.0f;
  int cnt = 256;
  void* kargs[] = {&d1, &factor, &cnt};
  // NVIDIA's runtime passes the CUkernel itself as the CUfunction.  Both launches on `s`: it is
  // non-blocking, so a launch on the legacy stream could overlap the next one (a race CI's
  // sanitizer run caught).
  EXPECT_OK(
      cuLaunchKernel(reinterpret_cast<CUfunction>(k), 1, 1, 1, 256, 1, 1, 0, s, kargs, nullptr));
  EXPECT_OK(cuLaunchKernel(kf, 1, 1, 1, 256, 1, 1, 0, s, kargs, nullptr));
  EXPECT_OK(cuStreamSynchronize(s));
  std::vector<float> fr(256);
  cuMemcpyDtoH(fr.data(), d1, 256 * sizeof(float));
  all = true;
  for (int i = 0; i < 256; ++i) all = all && fr[i] == 4.0f * i;
  EXPECT_TRUE(all, "library kernel launched as CUkernel and as its CUfunction");
  int nregs = -1;
  EXPECT_OK(cuFuncGetAttribute(&nregs, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, kf));
  EXPECT_TRUE(nregs > 0, "kernel attribute max threads per block");
  CUlaunchAttribute attr = {};
  attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attr.value.priority = greatest;
  CUlaunchConfig cfg = {};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 256, cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = s, cfg.attrs = &attr, cfg.numAttrs = 1;
  EXPECT_OK(cuLaunchKernelEx(&cfg, kf, kargs, nullptr));
  EXPECT_OK(cuStreamSynchronize(s));
  cuMemcpyDtoH(fr.data(), d1, 256 * sizeof(float));
  EXPECT_TRUE(fr[3] == 24.0f, "cuLaunchKernelEx with a priority attribute");
  EXPECT_OK(cuLibraryUnload(lib));

  // ---- memsets of page-locked host memory (XLA sets such words with cuMemsetD32Async): CUDA
  // reaches them through unified addressing; in stream order, after a copy into the same memory
  {
    const size_t hn = 8192;
    void* hp = nullptr;
    EXPECT_OK(cuMemAllocHost(&hp, hn));
    auto* h8 = static_cast<unsigned char*>(hp);
    const CUdeviceptr hd = reinterpret_cast<CUdeviceptr>(hp);
    EXPECT_OK(cuMemsetD8(hd, 0x5a, hn));
    bool ok = true;
    for (size_t i = 0; i < hn; ++i) ok = ok && h8[i] == 0x5a;
    EXPECT_TRUE(ok, "cuMemsetD8 of page-locked host memory is done when it returns");
    EXPECT_OK(cuMemsetD8(d1, 0x11, n));
    EXPECT_OK(cuCtxSynchronize());  // `s` does not wait for the legacy stream
    EXPECT_OK(cuMemcpyDtoHAsync(hp, d1, n, s));
    EXPECT_OK(cuMemsetD32Async(hd + 64, 0xdeadbeefu, 2, s));  // 8 bytes, a 32-bit pattern
    EXPECT_OK(cuMemsetD16Async(hd + 128, 0x1234, 4, s));
    EXPECT_OK(cuStreamSynchronize(s));
    uint32_t w[2];
    uint16_t hw[4];
    std::memcpy(w, h8 + 64, sizeof w);
    std::memcpy(hw, h8 + 128, sizeof hw);
    ok = h8[0] == 0x11 && h8[63] == 0x11 && h8[72] == 0x11 && h8[136] == 0x11;
    EXPECT_TRUE(ok, "the copy into page-locked memory ran before the memsets after it");
    EXPECT_TRUE(w[0] == 0xdeadbeefu && w[1] == 0xdeadbeefu && hw[0] == 0x1234 && hw[3] == 0x1234,
                "cuMemsetD32Async/cuMemsetD16Async of page-locked memory in stream order");
    EXPECT_TRUE(h8[n] == 0x5a, "bytes beyond the copy kept the synchronous memset's value");
    EXPECT_OK(cuMemFreeHost(hp));
  }

  // ---- cuGetProcAddress and errors
  void* pfn = nullptr;
  CUdriverProcAddressQueryResult qr = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
  EXPECT_OK(cuGetProcAddress("cuMemAlloc", &pfn, 12000, 0, &qr));
  EXPECT_TRUE(pfn && qr == CU_GET_PROC_ADDRESS_SUCCESS, "cuGetProcAddress finds cuMemAlloc");
  CUdeviceptr via = 0;
  EXPECT_OK(reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(pfn)(&via, 64));
  EXPECT_OK(cuMemFree(via));
  EXPECT_OK(cuGetProcAddress("cuNoSuchFunction", &pfn, 12000, 0, &qr));
  EXPECT_TRUE(!pfn && qr == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
              "an unknown name: NULL, not found");
  const char* str = nullptr;
  EXPECT_OK(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &str));
  EXPECT_TRUE(str && std::strcmp(str, "CUDA_ERROR_INVALID_VALUE") == 0, "cuGetErrorName");
  EXPECT_OK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &str));
  EXPECT_ERR(cuGetErrorName(static_cast<CUresult>(123456), &str), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuStreamQuery(reinterpret_cast<CUstream>(s)), CUDA_SUCCESS);

  EXPECT_OK(cuStreamDestroy(s));
  EXPECT_OK(cuMemFree(d1));
  EXPECT_OK(cuMemFree(d2));
  EXPECT_OK(cuDevicePrimaryCtxRelease(dev));
  printf("driver_api: %s\n", g_failures ? "FAILED" : "passed");
  return g_failures ? 1 : 0;
}
