// Liveness checks (tests/integration/liveness_test.cc).
//   liveness long SECONDS   a kernel that runs SECONDS, then its result is checked: a server that
//                           is busy for longer than RGPU_TIMEOUT must not be taken for gone
//   liveness stall          starts a 60 s kernel, prints "waiting", then synchronizes: the test
//                           stops the server meanwhile; prints the outcome of that call and of a
//                           later one, with the seconds each took
//   liveness abandon SECONDS  starts a kernel that runs SECONDS and exits without waiting for it:
//                           the server must not keep the session for the kernel's whole run
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include "async_common.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int long_kernel(double seconds) {
  const int n = 1024;
  int* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, n * sizeof(int)));
  auto t0 = std::chrono::steady_clock::now();
  slow_fill<<<1, 256>>>(d, 7, n, static_cast<unsigned long long>(seconds * 1e9));
  EXPECT_OK(cudaDeviceSynchronize());
  double took = seconds_since(t0);
  EXPECT_TRUE(took >= seconds * 0.9, "the synchronization waited for the kernel");
  int h[n];
  EXPECT_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  bool all = true;
  for (int v : h) all = all && v == 7;
  EXPECT_TRUE(all, "the long kernel's result arrived");
  EXPECT_OK(cudaFree(d));
  return finish("liveness long");
}

int stall() {
  int* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, 1024 * sizeof(int)));
  slow_fill<<<1, 256>>>(d, 1, 1024, 60ull * 1000 * 1000 * 1000);
  printf("waiting\n");
  fflush(stdout);
  auto t0 = std::chrono::steady_clock::now();
  cudaError_t e = cudaDeviceSynchronize();
  printf("sync: %s after %.1f s\n", cudaGetErrorName(e), seconds_since(t0));
  t0 = std::chrono::steady_clock::now();
  e = cudaMemset(d, 0, 4);
  printf("later: %s after %.1f s\n", cudaGetErrorName(e), seconds_since(t0));
  fflush(stdout);
  return 0;
}

int abandon(double seconds) {
  int* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, 1024 * sizeof(int)));
  slow_fill<<<1, 256>>>(d, 1, 1024, static_cast<unsigned long long>(seconds * 1e9));
  printf("left a kernel running\n");
  fflush(stdout);
  _exit(0);  // no synchronization, no destructors: as a program that crashes
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "abandon") == 0) return abandon(atof(argv[2]));
  if (argc == 3 && strcmp(argv[1], "long") == 0) return long_kernel(atof(argv[2]));
  if (argc == 2 && strcmp(argv[1], "stall") == 0) return stall();
  fprintf(stderr, "usage: liveness long SECONDS | liveness stall\n");
  return 2;
}
