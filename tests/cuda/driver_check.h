// Checks for rgpu's driver-API test programs (driver_api.cpp, driver_graphs.cpp, driver_libs.cpp):
// one line per check on stdout ("ok ..." / "FAIL ..."), the same natively and through rgpu.
#pragma once

#include <cuda.h>

#include <cstdio>

static int g_failures = 0;

static const char* name_of(CUresult r) {
  const char* s = nullptr;
  return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "(unknown CUresult)";
}

#define EXPECT_ERR(expr, expected)                                                      \
  do {                                                                                  \
    CUresult e_ = (expr);                                                               \
    if (e_ == (expected)) {                                                             \
      printf("ok   %-60.60s %s\n", #expr, name_of(e_));                                 \
    } else {                                                                            \
      printf("FAIL %-60.60s got %s, want %s\n", #expr, name_of(e_), name_of(expected)); \
      ++g_failures;                                                                     \
    }                                                                                   \
  } while (0)
#define EXPECT_OK(expr) EXPECT_ERR(expr, CUDA_SUCCESS)
#define EXPECT_TRUE(cond, what)  \
  do {                           \
    if (cond) {                  \
      printf("ok   %s\n", what); \
    } else {                     \
      printf("FAIL %s\n", what); \
      ++g_failures;              \
    }                            \
  } while (0)
