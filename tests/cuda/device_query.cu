// Device management: count, current device, properties vs attributes, memory info, versions,
// synchronize and reset.  Device-specific values go to stderr; stdout is the same on any GPU.
#include "check.h"

int main() {
  int count = 0;
  EXPECT_OK(cudaGetDeviceCount(&count));
  EXPECT_TRUE(count >= 1, "at least one device");
  int dev = -1;
  EXPECT_OK(cudaGetDevice(&dev));
  EXPECT_TRUE(dev == 0, "the current device starts as 0");
  EXPECT_OK(cudaSetDevice(count - 1));
  EXPECT_OK(cudaGetDevice(&dev));
  EXPECT_TRUE(dev == count - 1, "cudaSetDevice changes the current device");
  EXPECT_OK(cudaSetDevice(0));

  cudaDeviceProp p;
  EXPECT_OK(cudaGetDeviceProperties(&p, 0));
  fprintf(stderr, "device 0: %s, cc %d.%d, %d SMs, %.1f GiB\n", p.name, p.major, p.minor,
          p.multiProcessorCount, p.totalGlobalMem / 1073741824.0);
  int v = 0;
  EXPECT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0));
  EXPECT_TRUE(v == p.major && v >= 1, "attribute compute capability major matches the properties");
  EXPECT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0));
  EXPECT_TRUE(v == p.multiProcessorCount && v > 0, "attribute SM count matches the properties");
  EXPECT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 0));
  EXPECT_TRUE(v == 32 && p.warpSize == 32, "warp size is 32");
  EXPECT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, 0));
  EXPECT_TRUE(v == p.maxThreadsPerBlock && v >= 512, "max threads per block matches");
  EXPECT_ERR(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, count), cudaErrorInvalidDevice);
  EXPECT_ERR(cudaGetDeviceProperties(&p, count), cudaErrorInvalidDevice);
  (void)cudaGetLastError();

  size_t free = 0, total = 0;
  EXPECT_OK(cudaMemGetInfo(&free, &total));
  EXPECT_TRUE(total > 0 && free <= total, "memory info: 0 < free <= total");
  EXPECT_TRUE(total <= p.totalGlobalMem, "memory info total <= totalGlobalMem");

  int drv = 0, rt = 0;
  EXPECT_OK(cudaDriverGetVersion(&drv));
  EXPECT_OK(cudaRuntimeGetVersion(&rt));
  fprintf(stderr, "driver %d, runtime %d\n", drv, rt);
  EXPECT_TRUE(drv >= 13000 && rt >= 13000, "driver and runtime report CUDA 13");

  EXPECT_OK(cudaDeviceSynchronize());
  void* d = nullptr;
  EXPECT_OK(cudaMalloc(&d, 1 << 20));
  EXPECT_OK(cudaDeviceReset());
  EXPECT_OK(cudaMalloc(&d, 1 << 20));  // the device works again after a reset
  EXPECT_OK(cudaMemset(d, 1, 1 << 20));
  EXPECT_OK(cudaFree(d));
  EXPECT_OK(cudaDeviceSynchronize());
  return finish("device_query");
}
