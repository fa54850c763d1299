// The runtime and the driver API interleaved on the same objects: a cudaMalloc pointer in cuMemcpy,
// a cuMemAlloc pointer in cudaMemcpy, a cudaStream_t in cuMemcpyAsync and a CUstream in the
// runtime, events across both, a context made current by cuCtxSetCurrent is the runtime's device,
// and cudaGetDriverEntryPoint* hand out the driver's functions.  Host code built with -cudart
// shared and linked against the toolkit's stub libcuda.so: natively NVIDIA's runtime and driver,
// through rgpu rgpu's libcudart.so.13 on rgpu's libcuda.so.1 (one client core).  Prints the same
// lines either way; the device count is not printed (it may differ).
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // cudaGetDriverEntryPoint is tested

static int g_failures = 0;

#define CHECK(cond, what)        \
  do {                           \
    if (cond) {                  \
      printf("ok   %s\n", what); \
    } else {                     \
      printf("FAIL %s\n", what); \
      ++g_failures;              \
    }                            \
  } while (0)
#define RT(expr) CHECK((expr) == cudaSuccess, #expr)
#define DRV(expr) CHECK((expr) == CUDA_SUCCESS, #expr)

static bool equal(const std::vector<int>& a, const std::vector<int>& b) { return a == b; }

int main() {
  const size_t n = 1 << 16;
  const size_t bytes = n * sizeof(int);
  std::vector<int> src(n), dst(n);
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<int>(i * 7 + 3);

  int count = 0;
  RT(cudaGetDeviceCount(&count));
  if (count < 1) return 1;
  RT(cudaSetDevice(0));
  DRV(cuInit(0));

  // The runtime's current context is the driver's.
  CUcontext cur = nullptr, primary0 = nullptr;
  DRV(cuCtxGetCurrent(&cur));
  DRV(cuDevicePrimaryCtxRetain(&primary0, 0));
  CHECK(cur != nullptr && cur == primary0,
        "cudaSetDevice(0) made device 0's primary context current");

  // A cudaMalloc pointer in the driver's copies.
  int* rt_ptr = nullptr;
  RT(cudaMalloc(reinterpret_cast<void**>(&rt_ptr), bytes));
  DRV(cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(rt_ptr), src.data(), bytes));
  std::fill(dst.begin(), dst.end(), 0);
  RT(cudaMemcpy(dst.data(), rt_ptr, bytes, cudaMemcpyDeviceToHost));
  CHECK(equal(src, dst), "cuMemcpyHtoD into cudaMalloc memory, read back by cudaMemcpy");
  int ordinal = -1;
  DRV(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                            reinterpret_cast<CUdeviceptr>(rt_ptr)));
  CHECK(ordinal == 0, "cuPointerGetAttribute: a cudaMalloc pointer is device 0's");

  // A cuMemAlloc pointer in the runtime's copies, and cuMemcpy between the two.
  CUdeviceptr drv_ptr = 0;
  DRV(cuMemAlloc(&drv_ptr, bytes));
  DRV(cuMemcpy(drv_ptr, reinterpret_cast<CUdeviceptr>(rt_ptr), bytes));
  std::fill(dst.begin(), dst.end(), 0);
  RT(cudaMemcpy(dst.data(), reinterpret_cast<void*>(drv_ptr), bytes, cudaMemcpyDeviceToHost));
  CHECK(equal(src, dst), "cuMemcpy from cudaMalloc to cuMemAlloc memory, read by cudaMemcpy");
  cudaPointerAttributes pa{};
  RT(cudaPointerGetAttributes(&pa, reinterpret_cast<void*>(drv_ptr)));
  CHECK(pa.type == cudaMemoryTypeDevice && pa.device == 0,
        "cudaPointerGetAttributes: a cuMemAlloc pointer is device 0's memory");

  // A cudaStream_t in the driver's asynchronous calls, a CUstream in the runtime's.
  cudaStream_t rs = nullptr;
  RT(cudaStreamCreateWithFlags(&rs, cudaStreamNonBlocking));
  RT(cudaMemsetAsync(rt_ptr, 0, bytes, rs));
  DRV(cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(rt_ptr), src.data(), bytes / 2,
                        reinterpret_cast<CUstream>(rs)));
  std::fill(dst.begin(), dst.end(), -1);
  DRV(cuMemcpyDtoHAsync(dst.data(), reinterpret_cast<CUdeviceptr>(rt_ptr), bytes,
                        reinterpret_cast<CUstream>(rs)));
  DRV(cuStreamSynchronize(reinterpret_cast<CUstream>(rs)));
  bool halves = std::memcmp(dst.data(), src.data(), bytes / 2) == 0;
  for (size_t i = n / 2; i < n && halves; ++i) halves = dst[i] == 0;
  CHECK(halves, "cudaMemsetAsync then cuMemcpyHtoDAsync/DtoHAsync on one cudaStream_t, in order");
  CUcontext stream_ctx = nullptr;
  DRV(cuStreamGetCtx(reinterpret_cast<CUstream>(rs), &stream_ctx));
  CHECK(stream_ctx == primary0, "cuStreamGetCtx: a cudaStream_t belongs to the primary context");

  CUstream ds = nullptr;
  DRV(cuStreamCreate(&ds, CU_STREAM_NON_BLOCKING));
  std::fill(dst.begin(), dst.end(), 0);
  RT(cudaMemcpyAsync(dst.data(), reinterpret_cast<void*>(drv_ptr), bytes, cudaMemcpyDeviceToHost,
                     reinterpret_cast<cudaStream_t>(ds)));
  RT(cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(ds)));
  CHECK(equal(src, dst), "cudaMemcpyAsync on a CUstream, cudaStreamSynchronize on it");
  unsigned flags = 0;
  RT(cudaStreamGetFlags(reinterpret_cast<cudaStream_t>(ds), &flags));
  CHECK(flags == cudaStreamNonBlocking, "cudaStreamGetFlags of a CUstream");

  // Events across the two.
  cudaEvent_t ev = nullptr;
  RT(cudaEventCreate(&ev));
  DRV(cuEventRecord(reinterpret_cast<CUevent>(ev), ds));
  DRV(cuEventSynchronize(reinterpret_cast<CUevent>(ev)));
  RT(cudaEventQuery(ev));
  CUevent dev_ev = nullptr;
  DRV(cuEventCreate(&dev_ev, CU_EVENT_DEFAULT));
  RT(cudaEventRecord(reinterpret_cast<cudaEvent_t>(dev_ev), rs));
  DRV(cuStreamWaitEvent(ds, dev_ev, 0));
  RT(cudaEventSynchronize(reinterpret_cast<cudaEvent_t>(dev_ev)));
  float ms = -1;
  RT(cudaEventRecord(ev, rs));
  RT(cudaEventSynchronize(ev));
  DRV(cuEventElapsedTime(&ms, dev_ev, reinterpret_cast<CUevent>(ev)));
  CHECK(ms >= 0, "cuEventElapsedTime between a CUevent and a cudaEvent_t");

  // A context made current through the driver is the runtime's device.
  const int last = count - 1;
  CUcontext last_primary = nullptr;
  DRV(cuDevicePrimaryCtxRetain(&last_primary, last));
  DRV(cuCtxSetCurrent(last_primary));
  int rt_dev = -1;
  RT(cudaGetDevice(&rt_dev));
  CHECK(rt_dev == last,
        "cudaGetDevice reports the device of the context cuCtxSetCurrent made current");
  int* on_last = nullptr;
  RT(cudaMalloc(reinterpret_cast<void**>(&on_last), 256));
  CUdevice owner = -1;
  DRV(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                            reinterpret_cast<CUdeviceptr>(on_last)));
  CHECK(owner == last, "cudaMalloc allocates on the driver's current context's device");
  RT(cudaFree(on_last));
  RT(cudaSetDevice(0));
  DRV(cuCtxGetCurrent(&cur));
  CHECK(cur == primary0, "cudaSetDevice(0) is seen by cuCtxGetCurrent");

  // cudaGetDriverEntryPoint*: the driver's functions, working on the runtime's objects.
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult qr = cudaDriverEntryPointSymbolNotFound;
  RT(cudaGetDriverEntryPointByVersion("cuMemsetD8", &fn, 12000, cudaEnableDefault, &qr));
  CHECK(fn != nullptr && qr == cudaDriverEntryPointSuccess,
        "cudaGetDriverEntryPointByVersion(cuMemsetD8)");
  if (fn != nullptr) {
    using MemsetD8 = CUresult (*)(CUdeviceptr, unsigned char, size_t);
    DRV(reinterpret_cast<MemsetD8>(fn)(reinterpret_cast<CUdeviceptr>(rt_ptr), 0x5a, bytes));
    std::vector<unsigned char> b(bytes);
    RT(cudaMemcpy(b.data(), rt_ptr, bytes, cudaMemcpyDeviceToHost));
    bool all = true;
    for (unsigned char c : b) all = all && c == 0x5a;
    CHECK(all, "cuMemsetD8 from cudaGetDriverEntryPointByVersion on cudaMalloc memory");
  }
  fn = nullptr;
  RT(cudaGetDriverEntryPoint("cuCtxGetCurrent", &fn, cudaEnableDefault, &qr));
  if (fn != nullptr) {
    CUcontext via = nullptr;
    DRV(reinterpret_cast<CUresult (*)(CUcontext*)>(fn)(&via));
    CHECK(via == primary0, "cuCtxGetCurrent from cudaGetDriverEntryPoint is the driver's");
  } else {
    CHECK(false, "cudaGetDriverEntryPoint(cuCtxGetCurrent)");
  }
  fn = reinterpret_cast<void*>(1);
  cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &fn, 12000, cudaEnableDefault, &qr);
  CHECK(fn == nullptr && qr == cudaDriverEntryPointSymbolNotFound,
        "cudaGetDriverEntryPointByVersion of an unknown name: null, symbol not found");
  // (No check of a null output pointer: NVIDIA's driver dereferences it - a crash natively.)

  // Teardown across the APIs.
  DRV(cuStreamDestroy(reinterpret_cast<CUstream>(rs)));
  RT(cudaStreamDestroy(reinterpret_cast<cudaStream_t>(ds)));
  RT(cudaEventDestroy(reinterpret_cast<cudaEvent_t>(dev_ev)));
  DRV(cuEventDestroy(reinterpret_cast<CUevent>(ev)));
  DRV(cuMemFree(reinterpret_cast<CUdeviceptr>(rt_ptr)));
  RT(cudaFree(reinterpret_cast<void*>(drv_ptr)));
  DRV(cuDevicePrimaryCtxRelease(last));
  DRV(cuDevicePrimaryCtxRelease(0));
  RT(cudaDeviceSynchronize());

  // A thread that only used the runtime (no cudaSetDevice) has device 0's primary context
  // current for the driver API, as NVIDIA's runtime binds it.
  std::thread([&] {
    RT(cudaFree(nullptr));
    CUcontext mine = nullptr, p0 = nullptr;
    DRV(cuCtxGetCurrent(&mine));
    DRV(cuDevicePrimaryCtxRetain(&p0, 0));
    CHECK(mine != nullptr && mine == p0, "a runtime call bound device 0's primary context");
    size_t free_b = 0, total_b = 0;
    DRV(cuMemGetInfo(&free_b, &total_b));
    DRV(cuDevicePrimaryCtxRelease(0));
  }).join();
  printf("%s\n", g_failures == 0 ? "mixed_apis: all passed" : "mixed_apis: FAILED");
  return g_failures == 0 ? 0 : 1;
}
