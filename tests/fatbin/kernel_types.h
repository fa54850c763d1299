// Types shared by tests/fatbin/kernels.cu (compiled by nvcc into fat binaries) and the fatbin unit
// test (compiled by the host compiler), so that the expected parameter layouts come from the host
// ABI the device ABI matches.
#pragma once

#include <vector_types.h>

struct Padded {  // 24 bytes, align 8
  char c;
  double d;
  int i;
  short s;
};
struct WithArray {  // 24 bytes, align 4
  int a[5];
  char c;
};
struct Big {  // 4800 bytes: more than the 4 KiB of classic kernel parameters
  int v[1200];
};
