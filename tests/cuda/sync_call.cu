// The cost of one synchronous call through the runtime and through the driver API, in one process
// (issue 12's "a synchronous call within 1 us of the runtime front-end's"): medians of
// cudaMemGetInfo vs cuMemGetInfo (a query the server answers) and cudaDeviceSynchronize vs
// cuCtxSynchronize on an idle GPU, interleaved in rounds.  Prints the figures on stdout.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace {

template <typename Fn>
double median_us(Fn fn, int n) {
  std::vector<double> t(n);
  for (int i = 0; i < n; ++i) {
    auto a = std::chrono::steady_clock::now();
    fn();
    t[i] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
  }
  std::nth_element(t.begin(), t.begin() + n / 2, t.end());
  return t[n / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 2000;
  if (cudaFree(nullptr) != cudaSuccess) return 1;  // the runtime's context first
  size_t f = 0, total = 0;
  double rt_info = 0, drv_info = 0, rt_sync = 0, drv_sync = 0;
  for (int round = 0; round < 3; ++round) {  // interleaved: drift hits both
    rt_info += median_us([&] { cudaMemGetInfo(&f, &total); }, n) / 3;
    drv_info += median_us([&] { cuMemGetInfo(&f, &total); }, n) / 3;
    rt_sync += median_us([] { cudaDeviceSynchronize(); }, n) / 3;
    drv_sync += median_us([] { cuCtxSynchronize(); }, n) / 3;
  }
  printf("sync_call: mem_info runtime %.2f us, driver %.2f us (driver - runtime %+.2f us)\n",
         rt_info, drv_info, drv_info - rt_info);
  printf("sync_call: synchronize runtime %.2f us, driver %.2f us (driver - runtime %+.2f us)\n",
         rt_sync, drv_sync, drv_sync - rt_sync);
  return 0;
}
