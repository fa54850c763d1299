// The private export-table slots NVIDIA's libraries call, driven directly through
// cuGetExportTable: TOOLS_CONTEXT (21318c60...) slot 51 turns a public stream into a tools
// handle and slot 39 answers that handle's stream number, which must equal cuStreamGetId
// (cuBLAS's per-stream workspace pool relies on both). Built with the toolkit's stub libcuda.so:
// natively it runs on NVIDIA's driver, through rgpu on rgpu's.
#include <cuda.h>

#include <cstdio>
#include <cstring>

namespace {
int g_failures = 0;
void expect(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++g_failures;
}
}  // namespace

int main() {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
    std::printf("FAIL no device\n");
    return 1;
  }
  const unsigned char kId[16] = {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48,
                                 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2};
  CUuuid kToolsContext;
  std::memcpy(kToolsContext.bytes, kId, 16);
  const void* const* table = nullptr;
  expect(cuGetExportTable(reinterpret_cast<const void**>(&table), &kToolsContext) == CUDA_SUCCESS &&
             table != nullptr,
         "TOOLS_CONTEXT table");
  if (table == nullptr) return 1;
  expect(reinterpret_cast<size_t>(table[0]) >= 52 * sizeof(void*), "table has slot 51");
  using Handle = CUresult (*)(CUcontext, CUstream, void**, unsigned char);
  using Id = CUresult (*)(CUcontext, void*, unsigned long long*);
  auto handle = reinterpret_cast<Handle>(const_cast<void*>(table[51]));
  auto stream_id = reinterpret_cast<Id>(const_cast<void*>(table[39]));
  CUstream s = nullptr;
  expect(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "cuStreamCreate");
  void* th = nullptr;
  void* again = nullptr;
  void* null_th = nullptr;
  unsigned long long got = 0, want = 0, null_got = 0, null_want = 0;
  expect(handle(ctx, s, &th, 0) == CUDA_SUCCESS && th != nullptr, "slot 51: a stream's handle");
  expect(handle(ctx, s, &again, 0) == CUDA_SUCCESS && again == th,
         "slot 51: the same handle again");
  expect(stream_id(ctx, th, &got) == CUDA_SUCCESS, "slot 39: the handle's stream number");
  expect(cuStreamGetId(s, &want) == CUDA_SUCCESS && got == want, "slot 39 equals cuStreamGetId");
  expect(handle(ctx, nullptr, &null_th, 0) == CUDA_SUCCESS && null_th != nullptr,
         "slot 51: the NULL stream's handle");
  expect(stream_id(ctx, null_th, &null_got) == CUDA_SUCCESS &&
             cuStreamGetId(nullptr, &null_want) == CUDA_SUCCESS && null_got == null_want,
         "slot 39 of the NULL stream equals cuStreamGetId");
  cuStreamDestroy(s);
  cuDevicePrimaryCtxRelease(dev);
  std::printf("export_slots: %s\n", g_failures == 0 ? "passed" : "FAILED");
  return g_failures == 0 ? 0 : 1;
}
