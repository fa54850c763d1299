// rgpu bench's Thrust loop: the same step as bench/loop_small.cu, written the way a Thrust
// program does it (a device_vector built from a host vector, thrust::find, one element written
// through the vector's reference, the vector freed).  Thrust's kernels have no host
// implementation, so this runs only on a real GPU (through rgpu on rgpud's host backend the first
// launch fails, and rgpu bench leaves it out with a note).  Every answer is checked (a wrong one
// exits 1).  argv[1]: iterations (default 1000).  Prints
//   loop_us <microseconds per iteration>
//   loop_iters <iterations>
#include <thrust/device_vector.h>
#include <thrust/find.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

namespace {

constexpr int kN = 64;  // 256 bytes

bool step(int iter, std::vector<int>& h) {
  for (int i = 0; i < kN; ++i) h[i] = iter * kN + i;  // distinct values
  const int at = iter % kN;
  thrust::device_vector<int> d(h.begin(), h.end());
  const auto it = thrust::find(d.begin(), d.end(), h[at]);
  if (it - d.begin() != at) {
    fprintf(stderr, "loop_thrust: iteration %d found %d, want %d\n", iter,
            static_cast<int>(it - d.begin()), at);
    return false;
  }
  d[3] = 12345;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 1000;
  std::vector<int> h(kN);
  try {
    // A few untimed steps: the context and Thrust's modules are start-up, not the loop.
    for (int i = 0; i < 5; ++i)
      if (!step(i, h)) return 1;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i)
      if (!step(i, h)) return 1;
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    printf("loop_us %.3f\nloop_iters %d\n", us / (iters > 0 ? iters : 1), iters);
  } catch (const std::exception& e) {
    fprintf(stderr, "loop_thrust: %s\n", e.what());
    return 1;
  }
  return 0;
}
