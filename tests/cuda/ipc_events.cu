// CUDA IPC event handles between two processes (run the exporter, then the importer with the
// handle it printed; both get the same scratch directory).
//   export <dir>           an interprocess event; cudaIpcGetEventHandle (refused for an event
//                          without cudaEventInterprocess); prints "handle <128 hex digits>", then
//                          records the event on a stream held by a host function until <dir>/go
//                          exists, and prints "recorded".  Waits (30 s at most) for <dir>/done.
//   import <dir> <hex>     cudaIpcOpenEventHandle: the event is not reached yet (cudaEventQuery);
//                          creates <dir>/go; a stream waiting on it and cudaEventSynchronize finish
//                          once the exporter's work did; then <dir>/done.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "check.h"
#include "ipc_handle_text.h"

namespace {

bool wait_file(const std::string& path, int seconds) {
  struct stat st;
  for (int i = 0; i < seconds * 100; ++i) {
    if (stat(path.c_str(), &st) == 0) return true;
    usleep(10000);
  }
  return false;
}

void touch(const std::string& path) {
  FILE* f = fopen(path.c_str(), "w");
  if (f) fclose(f);
}

std::string g_dir;
bool g_went = false;

void CUDART_CB hold_until_go(void*) { g_went = wait_file(g_dir + "/go", 30); }

int export_mode() {
  cudaEvent_t plain, ev;
  REQUIRE_OK(cudaEventCreate(&plain));
  cudaIpcEventHandle_t h;
  EXPECT_ERR(cudaIpcGetEventHandle(&h, plain), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  REQUIRE_OK(cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming));
  REQUIRE_OK(cudaIpcGetEventHandle(&h, ev));
  printf("handle %s\n", to_hex(h).c_str());
  fflush(stdout);
  cudaStream_t s;
  REQUIRE_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_OK(cudaLaunchHostFunc(s, hold_until_go, nullptr));
  EXPECT_OK(cudaEventRecord(ev, s));
  EXPECT_ERR(cudaEventQuery(ev), cudaErrorNotReady);  // also: the record reached the GPU
  printf("recorded\n");
  fflush(stdout);
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(g_went, "the importer let the stream go");
  EXPECT_OK(cudaEventQuery(ev));
  EXPECT_TRUE(wait_file(g_dir + "/done", 30), "the importer finished");
  EXPECT_OK(cudaEventDestroy(ev));
  EXPECT_OK(cudaEventDestroy(plain));
  EXPECT_OK(cudaStreamDestroy(s));
  return finish("ipc_events export");
}

int import_mode(const std::string& hex) {
  cudaIpcEventHandle_t h;
  if (!from_hex(hex, h)) {
    printf("FAIL not a handle: %s\n", hex.c_str());
    return 2;
  }
  EXPECT_ERR(cudaIpcOpenEventHandle(nullptr, h), cudaErrorInvalidValue);
  cudaGetLastError();
  cudaEvent_t ev;
  REQUIRE_OK(cudaIpcOpenEventHandle(&ev, h));
  EXPECT_ERR(cudaEventQuery(ev), cudaErrorNotReady);
  cudaGetLastError();
  // A stream that waits for the exporter's event: its later work runs only after it.
  cudaStream_t s;
  REQUIRE_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_OK(cudaStreamWaitEvent(s, ev, 0));
  EXPECT_ERR(cudaStreamQuery(s), cudaErrorNotReady);
  cudaGetLastError();
  touch(g_dir + "/go");
  EXPECT_OK(cudaEventSynchronize(ev));
  EXPECT_OK(cudaEventQuery(ev));
  EXPECT_OK(cudaStreamSynchronize(s));
  float ms = 0;
  EXPECT_ERR(cudaEventElapsedTime(&ms, ev, ev), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  EXPECT_OK(cudaEventDestroy(ev));
  EXPECT_OK(cudaStreamDestroy(s));
  touch(g_dir + "/done");
  return finish("ipc_events import");
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  g_dir = argc > 2 ? argv[2] : "";
  if (mode == "export" && argc > 2) return export_mode();
  if (mode == "import" && argc > 3) return import_mode(argv[3]);
  fprintf(stderr, "usage: ipc_events export <dir> | import <dir> <handle>\n");
  return 2;
}
