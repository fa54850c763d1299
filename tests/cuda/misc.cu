// The misc group's calls in one process: the logs API (iterators, dumps to memory and to a file,
// callbacks), cudaDeviceDisablePeerAccess, cudaDeviceFlushGPUDirectRDMAWrites and the atomic
// capability queries.  Prints the same lines natively and through rgpu.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "check.h"

namespace {

std::atomic<int> g_callbacks{0};
std::atomic<bool> g_callback_error{false};

void on_log(void* data, cudaLogLevel level, char* message, size_t length) {
  if (data == &g_callbacks && length > 0 && message && strlen(message) >= length)
    g_callback_error = g_callback_error || level == cudaLogLevelError;
  g_callbacks++;
}

void logs() {
  cudaLogIterator it = 0;
  EXPECT_ERR(cudaLogsCurrent(nullptr, 0), cudaErrorInvalidValue);
  EXPECT_OK(cudaLogsCurrent(&it, 1));  // flags are reserved; NVIDIA's runtime ignores them
  EXPECT_ERR(cudaLogsRegisterCallback(nullptr, nullptr, nullptr), cudaErrorInvalidValue);
  cudaLogsCallbackHandle cb = nullptr;
  EXPECT_OK(cudaLogsRegisterCallback(on_log, &g_callbacks, &cb));
  EXPECT_OK(cudaLogsCurrent(&it, 0));

  char buf[4096];
  size_t size = sizeof buf;
  EXPECT_OK(cudaLogsDumpToMemory(&it, buf, &size, 0));

  void* p = nullptr;  // a failed call the driver (or rgpu's server) explains in the log
  EXPECT_ERR(cudaMalloc(&p, size_t{1} << 60), cudaErrorMemoryAllocation);
  cudaGetLastError();
  cudaLogIterator before = it;
  size = sizeof buf;
  EXPECT_OK(cudaLogsDumpToMemory(&it, buf, &size, 0));
  EXPECT_TRUE(size > 0 && strlen(buf) == size && buf[size - 1] == '\n',
              "the failed allocation is in the log, one line per message");
  EXPECT_TRUE(it != before, "dumping advances the iterator");
  size_t again = sizeof buf;
  EXPECT_OK(cudaLogsDumpToMemory(&it, buf, &again, 0));
  EXPECT_TRUE(again == 0, "a second dump from the advanced iterator is empty");

  char tiny[2];
  size = sizeof tiny;
  // Too small for a message: natively this succeeds and moves the iterator past the messages
  // (seen on an H100, driver 580: the file dump below from there is empty).
  EXPECT_OK(cudaLogsDumpToMemory(&before, tiny, &size, 0));

  char path[] = "/tmp/rgpu-misc-logs-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_TRUE(fd >= 0, "a temporary file");
  if (fd >= 0) {
    close(fd);
    cudaLogIterator from = before;
    EXPECT_OK(cudaLogsDumpToFile(&from, path, 0));
    FILE* f = fopen(path, "r");
    std::string text;
    for (int c; f && (c = fgetc(f)) != EOF;) text += static_cast<char>(c);
    if (f) fclose(f);
    EXPECT_TRUE(text.empty(), "nothing after the iterator the last dump moved");
    unlink(path);
  }
  EXPECT_ERR(cudaLogsDumpToFile(&it, nullptr, 0), cudaErrorInvalidValue);

  // Callbacks run on a thread of their own: a warning may reach them before the error does.
  for (int i = 0; i < 500 && !g_callback_error.load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(g_callbacks.load() > 0 && g_callback_error.load(),
              "the registered callback got the error message");
  EXPECT_OK(cudaLogsUnregisterCallback(cb));
}

void devices() {
  int n = 0;
  REQUIRE_OK(cudaGetDeviceCount(&n));
  EXPECT_ERR(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled);  // as natively
  EXPECT_ERR(cudaDeviceDisablePeerAccess(n), cudaErrorInvalidDevice);
  cudaGetLastError();
  int can = 0;
  if (n >= 2 && cudaDeviceCanAccessPeer(&can, 0, 1) == cudaSuccess && can) {
    EXPECT_OK(cudaDeviceEnablePeerAccess(1, 0));
    EXPECT_ERR(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
    EXPECT_OK(cudaDeviceDisablePeerAccess(1));
    EXPECT_ERR(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
    cudaGetLastError();
  }

  cudaError_t r = cudaDeviceFlushGPUDirectRDMAWrites(
      cudaFlushGPUDirectRDMAWritesTargetCurrentDevice, cudaFlushGPUDirectRDMAWritesToOwner);
  printf("flush GPUDirect RDMA writes: %s\n", cudaGetErrorName(r));
  cudaGetLastError();

  cudaAtomicOperation ops[] = {cudaAtomicOperationIntegerAdd, cudaAtomicOperationCAS,
                               cudaAtomicOperationFloatAdd};
  unsigned caps[3] = {0xdead, 0xdead, 0xdead};
  EXPECT_OK(cudaDeviceGetHostAtomicCapabilities(caps, ops, 3, 0));
  EXPECT_TRUE(caps[0] != 0xdead && caps[1] != 0xdead && caps[2] != 0xdead,
              "every host atomic capability answered");
  printf("host atomic capabilities: 0x%x 0x%x 0x%x\n", caps[0], caps[1], caps[2]);
  EXPECT_ERR(cudaDeviceGetHostAtomicCapabilities(caps, ops, 3, n), cudaErrorInvalidDevice);
  cudaGetLastError();
  if (n >= 2) {
    EXPECT_OK(cudaDeviceGetP2PAtomicCapabilities(caps, ops, 3, 0, 1));
    printf("p2p atomic capabilities: 0x%x 0x%x 0x%x\n", caps[0], caps[1], caps[2]);
  }
}

// The driver's private tables through the runtime: the one NVIDIA's runtime itself uses is there,
// a table nobody defines is not.
void export_tables() {
  const cudaUUID_t cudart_interface = {{0x6b, (char)0xd5, (char)0xfb, 0x6c, 0x5b, (char)0xf4,
                                        (char)0xe7, 0x4a, (char)0x89, (char)0x87, (char)0xd9, 0x39,
                                        0x12, (char)0xfd, (char)0x9d, (char)0xf9}};
  const void* table = nullptr;
  EXPECT_OK(cudaGetExportTable(&table, &cudart_interface));
  EXPECT_TRUE(table != nullptr && *static_cast<const size_t*>(table) >= 3 * sizeof(void*),
              "CUDART_INTERFACE starts with its size");
  const cudaUUID_t nobody = {};
  table = nullptr;
  EXPECT_TRUE(cudaGetExportTable(&table, &nobody) != cudaSuccess && table == nullptr,
              "an unknown table is refused");
  cudaGetLastError();
}

}  // namespace

int main() {
  REQUIRE_OK(cudaSetDevice(0));
  logs();
  devices();
  export_tables();
  return finish("misc");
}
