// CUDA IPC between tenants of one server (issue 36; tests/integration/tenant_ipc_test.cc).
//   hold <count> <bytes>      cudaMalloc `count` buffers, then cudaIpcGetMemHandle of each; prints
//                             "holding exported=N refused=M error=NAME retry=NAME reason=TEXT"
//                             (retry: exporting a refused buffer again after freeing an exported
//                             one; reason: the server's, from the logs API), then holds them
//                             (60 s at most; the test kills it).
//   smoke                     another client's ordinary work: copies that must round-trip.
//   stale-export <bytes> <dir>   a handle of a buffer, freed, the same size allocated again and
//                             a handle of that; prints "handles <old> <new>", waits for <dir>/done
//                             and checks the importer's writes reached the new buffer.
//   stale-import <bytes> <old> <new>  the old handle is refused; the new one opens the new
//                             buffer.
//   bounds-export <bytes> <dir>  three neighbours x, a, y; a's handle; z allocated after the
//                             export lies outside a's mapping; prints "handle <h> <a-x> <y-a>
//                             <z-a>", waits for <dir>/done and checks x, y, z kept their bytes.
//   bounds-import <bytes> <h> <a-x> <y-a> <z-a>  only a is reachable through the opened pointer.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "check.h"
#include "ipc_handle_text.h"

namespace {

constexpr uint64_t kSlab = 2ull << 20;  // rgpu's server carves allocations <= 1 MiB from these

bool wait_file(const std::string& path, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (access(path.c_str(), F_OK) == 0) return true;
    usleep(100000);
  }
  return false;
}

void touch(const std::string& path) {
  FILE* f = fopen(path.c_str(), "w");
  if (f) fclose(f);
}

bool all_bytes(const void* p, size_t n, unsigned char v) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i] != v) return false;
  return true;
}

bool filled(const void* d, size_t n, unsigned char v) {
  std::vector<unsigned char> h(n);
  return cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost) == cudaSuccess &&
         all_bytes(h.data(), n, v);
}

// The first server reason that mentions an export, from the logs API.
std::mutex g_mu;
std::string g_reason;

void on_log(void*, cudaLogLevel, char* message, size_t length) {
  std::string m(message, strnlen(message, length));
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_reason.empty() && m.find("through rgpud") != std::string::npos) g_reason = m;
}

int hold_mode(int count, size_t bytes) {
  cudaLogsCallbackHandle cb = nullptr;
  REQUIRE_OK(cudaLogsRegisterCallback(on_log, nullptr, &cb));
  std::vector<void*> bufs(static_cast<size_t>(count));
  for (auto& p : bufs) REQUIRE_OK(cudaMalloc(&p, bytes));
  int exported = 0, refused = 0, first_refused = -1;
  cudaError_t error = cudaSuccess;
  for (int i = 0; i < count; ++i) {
    cudaIpcMemHandle_t h;
    cudaError_t e = cudaIpcGetMemHandle(&h, bufs[static_cast<size_t>(i)]);
    if (e == cudaSuccess) {
      ++exported;
      continue;
    }
    ++refused;
    if (first_refused < 0) first_refused = i;
    error = e;
  }
  cudaGetLastError();
  // Freeing an exported buffer ends its export: the refused one fits now.
  cudaError_t retry = cudaSuccess;
  if (first_refused > 0) {
    REQUIRE_OK(cudaFree(bufs[0]));
    cudaIpcMemHandle_t h;
    retry = cudaIpcGetMemHandle(&h, bufs[static_cast<size_t>(first_refused)]);
  }
  std::string reason;
  for (int i = 0; i < 300 && refused > 0 && reason.empty(); ++i) {  // callbacks: their own thread
    {
      std::lock_guard<std::mutex> lock(g_mu);
      reason = g_reason;
    }
    if (reason.empty()) usleep(10000);
  }
  for (char& c : reason)
    if (c == '\n') c = ' ';
  printf("holding exported=%d refused=%d error=%s retry=%s reason=%s\n", exported, refused,
         cudaGetErrorName(error), cudaGetErrorName(retry), reason.c_str());
  fflush(stdout);
  sleep(60);
  return 0;
}

int smoke_mode() {
  constexpr size_t n = 1 << 20;
  std::vector<unsigned char> h(n), back(n);
  for (size_t i = 0; i < n; ++i) h[i] = static_cast<unsigned char>(i * 7);
  void* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, n));
  EXPECT_OK(cudaMemcpy(d, h.data(), n, cudaMemcpyHostToDevice));
  EXPECT_OK(cudaMemcpy(back.data(), d, n, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(h == back, "the bytes round-trip");
  EXPECT_OK(cudaFree(d));
  return finish("tenant_ipc smoke");
}

int stale_export(size_t bytes, const std::string& dir) {
  void* a = nullptr;
  REQUIRE_OK(cudaMalloc(&a, bytes));
  EXPECT_OK(cudaMemset(a, 0x11, bytes));
  cudaIpcMemHandle_t old_h, new_h;
  REQUIRE_OK(cudaIpcGetMemHandle(&old_h, a));
  REQUIRE_OK(cudaFree(a));
  void* b = nullptr;  // the same size again: rgpu's server may reuse the address
  REQUIRE_OK(cudaMalloc(&b, bytes));
  EXPECT_OK(cudaMemset(b, 0x22, bytes));
  EXPECT_OK(cudaDeviceSynchronize());
  REQUIRE_OK(cudaIpcGetMemHandle(&new_h, b));
  EXPECT_TRUE(memcmp(&old_h, &new_h, sizeof old_h) != 0, "the new buffer has a new handle");
  printf("same address: %s\n", a == b ? "yes" : "no");
  printf("handles %s %s\n", to_hex(old_h).c_str(), to_hex(new_h).c_str());
  fflush(stdout);
  EXPECT_TRUE(wait_file(dir + "/done", 60), "the importer finished");
  EXPECT_TRUE(filled(b, bytes, 0x33), "the importer's writes reached the new buffer");
  EXPECT_OK(cudaFree(b));
  return finish("tenant_ipc stale-export");
}

int stale_import(const std::string& old_hex, const std::string& new_hex, size_t bytes) {
  cudaIpcMemHandle_t old_h, new_h;
  if (!from_hex(old_hex, old_h) || !from_hex(new_hex, new_h)) {
    printf("FAIL not handles\n");
    return 2;
  }
  void* p = nullptr;
  EXPECT_ERR(cudaIpcOpenMemHandle(&p, old_h, cudaIpcMemLazyEnablePeerAccess),
             cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  void* q = nullptr;
  REQUIRE_OK(cudaIpcOpenMemHandle(&q, new_h, cudaIpcMemLazyEnablePeerAccess));
  EXPECT_TRUE(filled(q, bytes, 0x22), "the new handle opens the new buffer");
  EXPECT_OK(cudaMemset(q, 0x33, bytes));
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT_OK(cudaIpcCloseMemHandle(q));
  return finish("tenant_ipc stale-import");
}

// Where rgpu's server puts a buffer of `bytes` at `p`: its 2 MiB slab, or its own mapping.
void mapping_of(uintptr_t p, size_t bytes, uintptr_t& lo, uintptr_t& hi) {
  if (bytes <= kSlab / 2) {
    lo = p / kSlab * kSlab;
    hi = lo + kSlab;
  } else {
    lo = p;
    hi = p + (bytes + kSlab - 1) / kSlab * kSlab;
  }
}

int bounds_export(size_t bytes, const std::string& dir) {
  void *x = nullptr, *a = nullptr, *y = nullptr, *z = nullptr;
  REQUIRE_OK(cudaMalloc(&x, bytes));
  REQUIRE_OK(cudaMalloc(&a, bytes));
  REQUIRE_OK(cudaMalloc(&y, bytes));
  EXPECT_OK(cudaMemset(x, 0xaa, bytes));
  EXPECT_OK(cudaMemset(a, 0x11, bytes));
  EXPECT_OK(cudaMemset(y, 0xbb, bytes));
  const auto ua = reinterpret_cast<uintptr_t>(a);
  uintptr_t lo = 0, hi = 0;
  mapping_of(ua, bytes, lo, hi);
  if (bytes <= kSlab / 2)
    EXPECT_TRUE(reinterpret_cast<uintptr_t>(x) >= lo && reinterpret_cast<uintptr_t>(y) < hi,
                "the neighbours share the exported buffer's slab");
  cudaIpcMemHandle_t h;
  REQUIRE_OK(cudaIpcGetMemHandle(&h, a));
  REQUIRE_OK(cudaMalloc(&z, bytes));  // after the export, the same size
  EXPECT_OK(cudaMemset(z, 0xcc, bytes));
  EXPECT_OK(cudaDeviceSynchronize());
  const auto uz = reinterpret_cast<uintptr_t>(z);
  EXPECT_TRUE(uz + bytes <= lo || uz >= hi,
              "a buffer allocated after the export lies outside the exported mapping");
  printf("handle %s %lld %lld %lld\n", to_hex(h).c_str(),
         static_cast<long long>(ua - reinterpret_cast<uintptr_t>(x)),
         static_cast<long long>(reinterpret_cast<uintptr_t>(y) - ua),
         static_cast<long long>(uz - ua));
  fflush(stdout);
  EXPECT_TRUE(wait_file(dir + "/done", 60), "the importer finished");
  EXPECT_TRUE(filled(a, bytes, 0x44), "the importer wrote the exported buffer");
  EXPECT_TRUE(filled(x, bytes, 0xaa) && filled(y, bytes, 0xbb) && filled(z, bytes, 0xcc),
              "the other buffers kept their bytes");
  for (void* p : {x, a, y, z}) EXPECT_OK(cudaFree(p));
  return finish("tenant_ipc bounds-export");
}

int bounds_import(size_t bytes, const std::string& hex, long long dx, long long dy, long long dz) {
  cudaIpcMemHandle_t h;
  if (!from_hex(hex, h)) {
    printf("FAIL not a handle\n");
    return 2;
  }
  char* p = nullptr;
  REQUIRE_OK(cudaIpcOpenMemHandle(reinterpret_cast<void**>(&p), h, cudaIpcMemLazyEnablePeerAccess));
  EXPECT_TRUE(filled(p, bytes, 0x11), "the opened pointer is the exported buffer's start");
  std::vector<unsigned char> buf(bytes + 1);
  // Nothing but the exported buffer: not past its end, not its neighbours, not what came later.
  EXPECT_ERR(cudaMemcpy(buf.data(), p + bytes, 256, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemcpy(buf.data(), p, bytes + 1, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemcpy(buf.data(), p - dx, 256, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemcpy(buf.data(), p + dy, 256, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemcpy(buf.data(), p + dz, 256, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemcpy(p + bytes, buf.data(), 16, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemcpy(p + dy, p, 16, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemset(p + bytes, 0, 16), cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemset(p - dx, 0, 16), cudaErrorInvalidValue);
  cudaPointerAttributes attr{};
  const cudaError_t e = cudaPointerGetAttributes(&attr, p + bytes);
  EXPECT_TRUE(e != cudaSuccess || attr.type != cudaMemoryTypeDevice,
              "past the buffer is not device memory here");
  cudaGetLastError();
  EXPECT_OK(cudaMemset(p, 0x44, bytes));
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT_OK(cudaIpcCloseMemHandle(p));
  return finish("tenant_ipc bounds-import");
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  auto num = [&](int i) { return strtoull(argv[i], nullptr, 10); };
  if (mode == "hold" && argc > 3) return hold_mode(static_cast<int>(num(2)), num(3));
  if (mode == "smoke") return smoke_mode();
  if (mode == "stale-export" && argc > 3) return stale_export(num(2), argv[3]);
  if (mode == "stale-import" && argc > 4) return stale_import(argv[3], argv[4], num(2));
  if (mode == "bounds-export" && argc > 3) return bounds_export(num(2), argv[3]);
  if (mode == "bounds-import" && argc > 6)
    return bounds_import(num(2), argv[3], atoll(argv[4]), atoll(argv[5]), atoll(argv[6]));
  fprintf(stderr,
          "usage: tenant_ipc hold <count> <bytes> | smoke | stale-export <bytes> <dir> |\n"
          "       stale-import <bytes> <old> <new> | bounds-export <bytes> <dir> |\n"
          "       bounds-import <bytes> <handle> <a-x> <y-a> <z-a>\n");
  return 2;
}
