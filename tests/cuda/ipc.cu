// CUDA IPC memory handles between two processes (run the exporter, then the importer with the
// handle it printed).
//   export             cudaMalloc + a pattern, cudaIpcGetMemHandle (twice: the same handle),
//                      prints "handle <128 hex digits>", then waits (30 s at most) until another
//                      process wrote its pattern into the memory.
//   import <hex>       cudaIpcOpenMemHandle: reads the exporter's pattern, writes its own,
//                      cudaIpcCloseMemHandle; bad handles and flags are refused.
//   import-gone <hex>  opening the handle fails with cudaErrorInvalidResourceHandle (its
//                      exporter ended, or the handle comes from another server).
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "ipc_handle_text.h"

namespace {

constexpr int kN = 1 << 18;  // 1 MiB of ints: an allocation of its own on rgpu's server
constexpr size_t kBytes = kN * sizeof(int);

int export_mode() {
  int* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, kBytes));
  std::vector<int> h(kN);
  for (int i = 0; i < kN; ++i) h[i] = i;
  REQUIRE_OK(cudaMemcpy(d, h.data(), kBytes, cudaMemcpyHostToDevice));
  cudaIpcMemHandle_t a, b;
  EXPECT_OK(cudaIpcGetMemHandle(&a, d));
  EXPECT_OK(cudaIpcGetMemHandle(&b, d));
  EXPECT_TRUE(memcmp(&a, &b, sizeof a) == 0, "the same allocation gives the same handle");
  EXPECT_ERR(cudaIpcGetMemHandle(&b, h.data()), cudaErrorInvalidValue);
  printf("handle %s\n", to_hex(a).c_str());
  fflush(stdout);
  bool seen = false;
  for (int tries = 0; tries < 300 && !seen; ++tries) {
    REQUIRE_OK(cudaMemcpy(h.data(), d, kBytes, cudaMemcpyDeviceToHost));
    seen = h[0] == 7 && h[kN - 1] == 7 + 3 * (kN - 1);
    if (!seen) usleep(100000);
  }
  bool all = seen;
  for (int i = 0; all && i < kN; ++i) all = h[i] == 7 + 3 * i;
  EXPECT_TRUE(all, "the exporter sees the importer's writes");
  REQUIRE_OK(cudaFree(d));
  return finish("ipc export");
}

int import_mode(const std::string& hex) {
  cudaIpcMemHandle_t handle;
  if (!from_hex(hex, handle)) {
    printf("FAIL not a handle: %s\n", hex.c_str());
    return 2;
  }
  int* d = nullptr;
  EXPECT_ERR(cudaIpcOpenMemHandle(reinterpret_cast<void**>(&d), handle, 0x80),
             cudaErrorInvalidValue);
  REQUIRE_OK(
      cudaIpcOpenMemHandle(reinterpret_cast<void**>(&d), handle, cudaIpcMemLazyEnablePeerAccess));
  std::vector<int> h(kN);
  EXPECT_OK(cudaMemcpy(h.data(), d, kBytes, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; ok && i < kN; ++i) ok = h[i] == i;
  EXPECT_TRUE(ok, "the importer reads the exporter's pattern");
  cudaPointerAttributes attr{};
  EXPECT_OK(cudaPointerGetAttributes(&attr, d + 5));
  EXPECT_TRUE(attr.type == cudaMemoryTypeDevice, "opened memory is device memory");
  for (int i = 0; i < kN; ++i) h[i] = 7 + 3 * i;
  EXPECT_OK(cudaMemcpy(d, h.data(), kBytes, cudaMemcpyHostToDevice));
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT_OK(cudaIpcCloseMemHandle(d));
  EXPECT_ERR(cudaIpcCloseMemHandle(d), cudaErrorInvalidValue);
  cudaGetLastError();
  return finish("ipc import");
}

int import_gone_mode(const std::string& hex) {
  cudaIpcMemHandle_t handle;
  if (!from_hex(hex, handle)) {
    printf("FAIL not a handle: %s\n", hex.c_str());
    return 2;
  }
  void* d = nullptr;
  EXPECT_ERR(cudaIpcOpenMemHandle(&d, handle, cudaIpcMemLazyEnablePeerAccess),
             cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  return finish("ipc import-gone");
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "export") return export_mode();
  if (mode == "import" && argc > 2) return import_mode(argv[2]);
  if (mode == "import-gone" && argc > 2) return import_gone_mode(argv[2]);
  fprintf(stderr, "usage: ipc export | import <handle> | import-gone <handle>\n");
  return 2;
}
