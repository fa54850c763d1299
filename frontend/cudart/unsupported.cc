// Every function NVIDIA's libcudart.so.13 exports, as a weak stub that logs its name once and
// returns cudaErrorNotSupported.  rgpu's implementations elsewhere in this library are strong
// definitions and replace them at link time, so no CUDA call is ever missing or silently passed.
#include "frontend/cudart/api.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

#define RGPU_STUB extern "C" __attribute__((weak, visibility("default")))
#include "frontend/cudart/unsupported_stubs.inc"
