// Probe: the host cost of queueing a device-to-device copy whose source is another process's
// memory (CUDA IPC, as rgpud's direct server-to-server copies), against local memory, on the
// legacy stream and on a created stream.  Usage: ipc_issue export BYTES (prints a handle, stays
// until stdin closes) | ipc_issue import BYTES HANDLE_HEX [N]
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

static double per_copy(void* dst, const void* src, size_t bytes, int n, cudaStream_t s,
                       double* done) {
  cudaStreamSynchronize(s);
  cudaDeviceSynchronize();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
  auto t1 = std::chrono::steady_clock::now();
  cudaDeviceSynchronize();
  auto t2 = std::chrono::steady_clock::now();
  *done = std::chrono::duration<double, std::micro>(t2 - t0).count() / n;
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const size_t bytes = strtoull(argv[2], nullptr, 10);
  void* a = nullptr;
  if (!strcmp(argv[1], "export")) {
    cudaMalloc(&a, bytes);
    cudaIpcMemHandle_t h;
    if (cudaIpcGetMemHandle(&h, a) != cudaSuccess) return 1;
    for (size_t i = 0; i < sizeof h; ++i) printf("%02x", (unsigned char)h.reserved[i]);
    printf("\n");
    fflush(stdout);
    char c;
    while (fread(&c, 1, 1, stdin) == 1) {
    }
    return 0;
  }
  const int n = argc > 4 ? atoi(argv[4]) : 2000;
  cudaIpcMemHandle_t h;
  for (size_t i = 0; i < sizeof h; ++i) {
    unsigned v;
    sscanf(argv[3] + 2 * i, "%2x", &v);
    h.reserved[i] = (char)v;
  }
  void *remote = nullptr, *b = nullptr, *c = nullptr;
  if (cudaIpcOpenMemHandle(&remote, h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
    printf("open failed\n");
    return 1;
  }
  cudaMalloc(&b, bytes);
  cudaMalloc(&c, bytes);
  cudaStream_t blocking, nonblocking;
  cudaStreamCreate(&blocking);
  cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking);
  struct {
    const char* name;
    cudaStream_t s;
  } streams[] = {{"legacy", 0}, {"blocking", blocking}, {"nonblocking", nonblocking}};
  for (int rep = 0; rep < 2; ++rep)
    for (auto& st : streams)
      for (int ipc = 0; ipc < 2; ++ipc) {
        double done;
        double q = per_copy(b, ipc ? remote : c, bytes, n, st.s, &done);
        if (rep)
          printf("%zu B %-11s %-5s queue %6.2f us/copy, done %6.2f us/copy\n", bytes, st.name,
                 ipc ? "ipc" : "local", q, done);
      }
  // The same through the driver API with events between (as rgpud: wait value, copy, record).
  return 0;
}
