// Every function NVIDIA's libcuda.so.1 exports, as a weak stub that logs its name once and returns
// CUDA_ERROR_NOT_SUPPORTED (tools/gen_cuda_driver.py).  rgpu's implementations elsewhere in this
// library are strong definitions and replace them at link time.  The stubs take no parameters:
// every driver entry point returns a CUresult in the integer register and a callee may ignore its
// arguments, so one shape serves all of them.  This file therefore does not include cuda.h, whose
// prototypes would conflict with that shape.
namespace rgpu::cuda_fe {
int unsupported(const char* name);
}

#define RGPU_STUB extern "C" __attribute__((weak, visibility("default")))
#include "frontend/cuda/unsupported_stubs.inc"
