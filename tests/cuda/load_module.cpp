// Loads module images from files through the driver API (cuModuleLoad with
// CUDA_MODULE_LOADING=EAGER, which loads the image on the GPU at once), one after another, and
// prints for each what the load returned and how long it took: "load <file> <CUresult name>
// <milliseconds>"; modules stay loaded until it exits. The integration tests hand it crafted images
// (tests/integration/tenant_modules_test.cc). Built like driver_api.cpp.
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

static const char* name_of(CUresult r) {
  const char* s = nullptr;
  return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "(unknown CUresult)";
}

int main(int argc, char** argv) {
  setenv("CUDA_MODULE_LOADING", "EAGER", 1);  // as a driver does it: at the load
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
    printf("no context\n");
    return 1;
  }
  for (int i = 1; i < argc; ++i) {
    auto start = std::chrono::steady_clock::now();
    CUmodule m = nullptr;
    CUresult r = cuModuleLoad(&m, argv[i]);
    long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count();
    printf("load %s %s %lld\n", argv[i], name_of(r), ms);
    fflush(stdout);
  }
  cuDevicePrimaryCtxRelease(dev);
  return 0;
}
