// Host implementations of the kernels in tests/cuda and bench/loop_small.cu, for rgpud's host
// backend (a test double: CI has no GPU).  Each computes what its CUDA kernel computes, from the
// parameters rgpu packed by the kernel's layout, so argument packing and launching are checked
// end to end.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "backend/host/host_kernel_api.h"
#include "tests/host_kernels/texture_kernels.h"

namespace {

template <class T>
T arg(void** params, int i) {
  T v;
  memcpy(&v, params[i], sizeof v);
  return v;
}

// Calls f(global thread index x, y) for every thread of the launch.
template <class F>
void each_thread(const rgpu_host_launch* l, F f) {
  for (unsigned by = 0; by < l->grid[1]; ++by)
    for (unsigned bx = 0; bx < l->grid[0]; ++bx)
      for (unsigned ty = 0; ty < l->block[1]; ++ty)
        for (unsigned tx = 0; tx < l->block[0]; ++tx)
          f(static_cast<long>(bx) * l->block[0] + tx, static_cast<long>(by) * l->block[1] + ty);
}

void vec_add(const rgpu_host_launch* l, void** p) {
  auto a = arg<const float*>(p, 0);
  auto b = arg<const float*>(p, 1);
  auto c = arg<float*>(p, 2);
  int n = arg<int>(p, 3);
  each_thread(l, [&](long i, long) {
    if (i < n) c[i] = a[i] + b[i];
  });
}

// tests/cuda/small_loop.cu: the first index of `target` (atomicMin into *out).
void find_first(const rgpu_host_launch* l, void** p) {
  auto v = arg<const int*>(p, 0);
  int n = arg<int>(p, 1), target = arg<int>(p, 2);
  auto out = arg<int*>(p, 3);
  each_thread(l, [&](long i, long) {
    if (i < n && v[i] == target && i < *out) *out = static_cast<int>(i);
  });
}

void matmul_tiled(const rgpu_host_launch* l, void** p) {
  auto A = arg<const float*>(p, 0);
  auto B = arg<const float*>(p, 1);
  auto C = arg<float*>(p, 2);
  int M = arg<int>(p, 3), N = arg<int>(p, 4), K = arg<int>(p, 5);
  each_thread(l, [&](long col, long row) {
    if (row >= M || col >= N) return;
    float acc = 0;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  });
}

void reduce_sum(const rgpu_host_launch* l, void** p) {
  auto in = arg<const int*>(p, 0);
  auto out = arg<unsigned long long*>(p, 1);
  int n = arg<int>(p, 2);
  for (unsigned b = 0; b < l->grid[0]; ++b) {
    long long s = 0;
    for (unsigned t = 0; t < l->block[0]; ++t) {
      long i = static_cast<long>(b) * l->block[0] + t;
      if (i < n) s += in[i];
    }
    *out += static_cast<unsigned long long>(s);
  }
}

template <class T>
void scale(const rgpu_host_launch* l, void** p) {
  auto data = arg<T*>(p, 0);
  T factor = arg<T>(p, 1);
  int n = arg<int>(p, 2);
  each_thread(l, [&](long i, long) {
    if (i < n) data[i] = data[i] * factor;
  });
}

struct Padded {
  char c;
  double d;
  int i;
  short s;
};
struct WithArray {
  int a[5];
  char c;
};
void struct_args(const rgpu_host_launch*, void** p) {
  auto pd = arg<Padded>(p, 0);
  auto w = arg<WithArray>(p, 1);
  auto out = arg<double*>(p, 2);
  out[0] = pd.c + pd.d + pd.i + pd.s;
  double s = w.c;
  for (int k = 0; k < 5; ++k) s += w.a[k] * (k + 1);
  out[1] = s;
}

void many_params(const rgpu_host_launch*, void** p) {
  double s = arg<int>(p, 0) + arg<char>(p, 1) + arg<double>(p, 2) + arg<short>(p, 3) +
             arg<float>(p, 4) + arg<long long>(p, 5) + arg<int>(p, 6) + arg<char>(p, 7) +
             arg<int>(p, 8) + arg<double>(p, 9) + arg<int>(p, 10) + arg<float>(p, 11) +
             arg<char>(p, 12) + arg<int>(p, 13) + arg<short>(p, 14) + arg<int>(p, 15) +
             arg<double>(p, 16) + arg<char>(p, 17) + arg<int>(p, 18) + arg<float>(p, 19) +
             arg<int>(p, 20);
  *arg<double*>(p, 21) = s;
}

struct Big {
  int v[1200];
};
void big_params(const rgpu_host_launch*, void** p) {
  const auto* big = static_cast<const Big*>(p[0]);
  long long s = arg<char>(p, 2);
  for (int k = 0; k < 1200; ++k) s += static_cast<long long>(big->v[k]) * (k % 7);
  *arg<long long*>(p, 1) = s;
}

void poly(const rgpu_host_launch* l, void** p) {
  const auto* c = static_cast<const float*>(l->symbol(l->ctx, "coeffs"));
  auto x = arg<const float*>(p, 0);
  auto y = arg<float*>(p, 1);
  int n = arg<int>(p, 2);
  each_thread(l, [&](long i, long) {
    if (i < n) y[i] = c[0] + x[i] * (c[1] + x[i] * (c[2] + x[i] * c[3]));
  });
}

void count_and_fill(const rgpu_host_launch* l, void** p) {
  auto* counter = static_cast<int*>(l->symbol(l->ctx, "counter"));
  auto* table = static_cast<float*>(l->symbol(l->ctx, "table"));
  int n = arg<int>(p, 0);
  each_thread(l, [&](long i, long) {
    if (i < n) ++*counter;
    if (i < 64) table[i] = i * 2.0f;
  });
}

// tests/cuda/managed_vars.cu: __managed__ int counter; __managed__ float values[40000].
void bump_managed(const rgpu_host_launch* l, void** p) {
  auto* counter = static_cast<int*>(l->symbol(l->ctx, "counter"));
  auto* values = static_cast<float*>(l->symbol(l->ctx, "values"));
  int add = arg<int>(p, 0), n = arg<int>(p, 1);
  each_thread(l, [&](long i, long) {
    if (i == 0) *counter += add;
    if (i < n) values[i] = 2 * values[i] + static_cast<float>(i);
  });
}

// tests/cuda/managed_lib.cu: __managed__ int lib_counter.
void lib_bump(const rgpu_host_launch* l, void** p) {
  *static_cast<int*>(l->symbol(l->ctx, "lib_counter")) += arg<int>(p, 0);
}

void say(const rgpu_host_launch*, void** p) {
  int round = arg<int>(p, 0), lines = arg<int>(p, 1);
  for (int i = 0; i < lines; ++i)
    printf("round %d: line %d from the device (%.2f)\n", round, i, i * 0.5);
}

void bump(const rgpu_host_launch*, void** p) { *arg<int*>(p, 0) += 1; }

void fill(const rgpu_host_launch* l, void** p) {
  auto out = arg<int*>(p, 0);
  int value = arg<int>(p, 1), n = arg<int>(p, 2);
  each_thread(l, [&](long i, long) {
    if (i < n) out[i] = value + static_cast<int>(i);
  });
}

void slow_fill(const rgpu_host_launch*, void** p) {
  auto out = arg<int*>(p, 0);
  int value = arg<int>(p, 1), n = arg<int>(p, 2);
  std::this_thread::sleep_for(std::chrono::nanoseconds(arg<unsigned long long>(p, 3)));
  for (int i = 0; i < n; ++i) out[i] = value;
}

// tests/cuda/overlap.cu: waits (bounded) for a marker a concurrent copy writes.
void wait_flag(const rgpu_host_launch*, void** p) {
  auto flag = arg<int*>(p, 0);
  int expect = arg<int>(p, 1);
  auto timeout = std::chrono::nanoseconds(arg<unsigned long long>(p, 2));
  auto seen = arg<int*>(p, 3);
  auto end = std::chrono::steady_clock::now() + timeout;
  int ok = 0;
  do {
    if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == expect) {
      ok = 1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  } while (std::chrono::steady_clock::now() < end);
  *seen = ok;
}

void add_one(const rgpu_host_launch*, void** p) {
  auto out = arg<int*>(p, 0);
  int n = arg<int>(p, 1);
  for (int i = 0; i < n; ++i) out[i] += 1;
}

void bench_empty(const rgpu_host_launch*, void**) {}

// bench/loop_small.cu: the index of the first element equal to `want`, or n (one block).  With
// RGPU_TEST_BENCH_FIND_WRONG set in rgpud's environment it answers one too far, so that a test
// can see a wrong answer fail `rgpu bench` (tests/integration/bench_startup_test.cc).
void bench_find(const rgpu_host_launch*, void** p) {
  static const bool wrong = getenv("RGPU_TEST_BENCH_FIND_WRONG") != nullptr;
  auto v = arg<const int*>(p, 0);
  int n = arg<int>(p, 1), want = arg<int>(p, 2);
  int best = n;
  for (int i = 0; i < n && best == n; ++i)
    if (v[i] == want) best = i;
  *arg<int*>(p, 3) = wrong ? best + 1 : best;
}

// tests/cuda/devmem.cu
void pitch_fill(const rgpu_host_launch* l, void** p) {
  auto d = arg<unsigned char*>(p, 0);
  auto pitch = arg<size_t>(p, 1);
  int width = arg<int>(p, 2), height = arg<int>(p, 3);
  for (unsigned y = 0; y < l->grid[1]; ++y)
    for (unsigned x = 0; x < l->grid[0] * l->block[0]; ++x)
      if (static_cast<int>(x) < width && static_cast<int>(y) < height)
        d[y * pitch + x] = static_cast<unsigned char>(x * 3 + y);
}

void devmem_say(const rgpu_host_launch*, void** p) {
  printf("devmem: device says %d\n", arg<int>(p, 0));
}

// A failed device assert: the message on stderr, then the context fails (cudaErrorAssert).
void devmem_assert(const rgpu_host_launch* l, void** p) {
  if (arg<int>(p, 0) == 0) return;
  fprintf(stderr,
          "devmem.cu:18: void devmem_assert(int): block: [0,0,0], thread: [0,0,0] Assertion "
          "`v == 0` failed.\n");
  l->fail(l->fail_ctx, 710);
}

// ---- tests/cuda/launch.cu: kernels that check the launch attributes rgpu forwarded.
// Without a cooperative launch a grid sync would not work on a GPU: the host version fails loudly.
void coop_sum(const rgpu_host_launch* l, void** p) {
  auto slots = arg<int*>(p, 0);
  auto out = arg<long long*>(p, 1);
  int n = arg<int>(p, 2);
  if (!l->cooperative) {
    *out = -1;
    return;
  }
  each_thread(l, [&](long i, long) {
    if (i < n) slots[i] = static_cast<int>(i + 1);
  });
  long long s = 0;
  for (int k = 0; k < n; ++k) s += slots[k];
  *out = s;
}

// Needs programmatic stream serialization (attribute 6) to have reached the server.
void chain_step(const rgpu_host_launch* l, void** p) {
  auto v = arg<int*>(p, 0);
  int k = arg<int>(p, 1), n = arg<int>(p, 2);
  each_thread(l, [&](long i, long) {
    if (i < n) v[i] = l->programmatic_serialization ? v[i] * 2 + k : -1;
  });
}

void cluster_shape(const rgpu_host_launch* l, void** p) {
  auto out = arg<unsigned*>(p, 0);
  for (int i = 0; i < 3; ++i) out[i] = l->cluster[i] ? l->cluster[i] : 1;
  out[3] = l->grid[0] / out[0];
}

void fill_value(const rgpu_host_launch* l, void** p) {
  auto out = arg<int*>(p, 0);
  int value = arg<int>(p, 1), n = arg<int>(p, 2);
  each_thread(l, [&](long i, long) {
    if (i < n) out[i] = value;
  });
}

void lib_scale(const rgpu_host_launch* l, void** p) {
  auto x = arg<float*>(p, 0);
  float f = arg<float>(p, 1);
  int n = arg<int>(p, 2);
  each_thread(l, [&](long i, long) {
    if (i < n) x[i] *= f;
  });
}

void lib_add(const rgpu_host_launch* l, void** p) {
  auto x = arg<int*>(p, 0);
  int v = arg<int>(p, 1), n = arg<int>(p, 2);
  each_thread(l, [&](long i, long) {
    if (i < n) x[i] += v;
  });
}

// tests/cuda/pools.cu
void pools_fill(const rgpu_host_launch* l, void** p) {
  auto out = arg<int*>(p, 0);
  int n = arg<int>(p, 1), base = arg<int>(p, 2);
  each_thread(l, [&](long i, long) {
    if (i < n) out[i] = base + static_cast<int>(i);
  });
}

void pools_sum(const rgpu_host_launch*, void** p) {
  auto in = arg<const int*>(p, 0);
  int n = arg<int>(p, 1);
  auto out = arg<long long*>(p, 2);
  long long s = 0;
  for (int i = 0; i < n; ++i) s += in[i];
  *out = s;
}

// tests/cuda/managed.cu
void managed_scale(const rgpu_host_launch* l, void** p) {
  auto a = arg<int*>(p, 0);
  int n = arg<int>(p, 1), k = arg<int>(p, 2);
  each_thread(l, [&](long i, long) {
    if (i < n) a[i] = a[i] * k + 1;
  });
}

void managed_gather(const rgpu_host_launch*, void** p) {
  auto in = arg<const int*>(p, 0);
  auto stride = arg<long long>(p, 1);
  int count = arg<int>(p, 2);
  auto out = arg<long long*>(p, 3);
  long long s = 0;
  for (int i = 0; i < count; ++i) s += in[i * stride];
  *out = s;
}

// ---- tests/cuda/graphs_cond.cu: kernels that set conditional handles (cudaGraphSetConditional).
void cond_countdown(const rgpu_host_launch* l, void** p) {
  auto counter = arg<int*>(p, 0);
  auto acc = arg<int*>(p, 1);
  *acc += *counter;
  if (--*counter <= 0) l->set_conditional(l->cond_ctx, arg<unsigned long long>(p, 2), 0);
}
void cond_set(const rgpu_host_launch* l, void** p) {
  l->set_conditional(l->cond_ctx, arg<unsigned long long>(p, 0),
                     static_cast<unsigned>(*arg<const int*>(p, 1)));
}
void cond_add(const rgpu_host_launch*, void** p) { *arg<int*>(p, 0) += arg<int>(p, 1); }

const rgpu_host_kernel kKernels[] = {
    {"cond_countdown", cond_countdown},
    {"cond_set", cond_set},
    {"cond_add", cond_add},
    {"coop_sum", coop_sum},
    {"chain_step", chain_step},
    {"cluster_shape", cluster_shape},
    {"fill_value", fill_value},
    {"lib_scale", lib_scale},
    {"lib_add", lib_add},
    {"bench_empty", bench_empty},
    {"bench_find", bench_find},
    {"slow_fill", slow_fill},
    {"add_one", add_one},
    {"wait_flag", wait_flag},
    {"vec_add", vec_add},
    {"find_first", find_first},
    {"matmul_tiled", matmul_tiled},
    {"reduce_sum", reduce_sum},
    {"_Z5scaleIiEvPT_S0_i", scale<int>},
    {"_Z5scaleIfEvPT_S0_i", scale<float>},
    {"_Z5scaleIdEvPT_S0_i", scale<double>},
    {"struct_args", struct_args},
    {"many_params", many_params},
    {"big_params", big_params},
    {"poly", poly},
    {"count_and_fill", count_and_fill},
    {"say", say},
    {"bump", bump},
    {"fill", fill},
    {"pitch_fill", pitch_fill},
    {"devmem_say", devmem_say},
    {"devmem_assert", devmem_assert},
    {"pools_fill", pools_fill},
    {"pools_sum", pools_sum},
    {"managed_scale", managed_scale},
    {"managed_gather", managed_gather},
    {"arrays_tex_fetch", arrays_tex_fetch},
    {"arrays_tex_lod", arrays_tex_lod},
    {"arrays_tex_layered", arrays_tex_layered},
    {"arrays_surf_write", arrays_surf_write},
    {"bump_managed", bump_managed},
    {"lib_bump", lib_bump},
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const rgpu_host_kernel* rgpu_host_kernels(
    unsigned* count) {
  *count = sizeof kKernels / sizeof kKernels[0];
  return kKernels;
}
