// Helpers for rgpu's CUDA test programs.  Each program checks its own results and prints one line
// per check on stdout ("ok ..." / "FAIL ..."), identical natively and through rgpu, so that
// scripts/gpu-e2e.sh can compare the two outputs; it exits non-zero when a check failed.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

static int g_failures = 0;

#define EXPECT_ERR(expr, expected)                                        \
  do {                                                                    \
    cudaError_t _e = (expr);                                              \
    if (_e == (expected)) {                                               \
      printf("ok   %-48s %s\n", #expr, cudaGetErrorName(_e));             \
    } else {                                                              \
      printf("FAIL %-48s got %s, want %s\n", #expr, cudaGetErrorName(_e), \
             cudaGetErrorName(expected));                                 \
      ++g_failures;                                                       \
    }                                                                     \
  } while (0)

#define EXPECT_OK(expr) EXPECT_ERR(expr, cudaSuccess)

#define EXPECT_TRUE(cond, what)               \
  do {                                        \
    if (cond) {                               \
      printf("ok   %s\n", what);              \
    } else {                                  \
      printf("FAIL %s  (%s)\n", what, #cond); \
      ++g_failures;                           \
    }                                         \
  } while (0)

// Must succeed for the test to continue.
#define REQUIRE_OK(expr)                                                      \
  do {                                                                        \
    cudaError_t _e = (expr);                                                  \
    if (_e != cudaSuccess) {                                                  \
      printf("FAIL %s: %s (cannot continue)\n", #expr, cudaGetErrorName(_e)); \
      exit(2);                                                                \
    }                                                                         \
  } while (0)

static int finish(const char* name) {
  printf("%s: %s (%d failure%s)\n", name, g_failures ? "FAILED" : "passed", g_failures,
         g_failures == 1 ? "" : "s");
  return g_failures ? 1 : 0;
}
