// The Thrust loop of issue 29 (GPU machine only: the host backend has no Thrust kernels): a
// 256-byte device_vector built from host data, thrust::find, the index read back, one element
// written through a device_vector reference, per iteration.  Checks every answer; prints the time
// per iteration.  scripts/gpu-e2e.sh runs it natively and through rgpu and counts round trips.
#include <thrust/device_vector.h>
#include <thrust/find.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 2000;
  const int n = 64;
  std::vector<int> h(n);
  thrust::device_vector<int> warm(1);  // the context first
  auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < iters; ++it) {
    for (int i = 0; i < n; ++i) h[i] = (i * 7 + it) % n;
    const int target = (it * 5) % n;
    thrust::device_vector<int> d(h.begin(), h.end());
    const long found = thrust::find(d.begin(), d.end(), target) - d.begin();
    long expect = -1;
    for (int i = 0; i < n && expect < 0; ++i)
      if (h[i] == target) expect = i;
    if (found != expect) {
      fprintf(stderr, "thrust_loop: iteration %d found %ld, expected %ld\n", it, found, expect);
      return 1;
    }
    d[3] = 12345;
  }
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  printf("thrust_loop: %d iterations, %.2f us per iteration\n", iters, us / iters);
  return 0;
}
