// Prints every device attribute the local driver answers for device 0, as "{id, value}," lines
// (the host backend's table of a Hopper-class part is taken from this).
#include <cuda.h>
#include <cstdio>
int main() {
  if (cuInit(0) != CUDA_SUCCESS) return 1;
  CUdevice d;
  cuDeviceGet(&d, 0);
  char name[256];
  cuDeviceGetName(name, sizeof name, d);
  printf("// %s\n", name);
  for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; ++a) {
    int v = 0;
    CUresult r = cuDeviceGetAttribute(&v, static_cast<CUdevice_attribute>(a), d);
    if (r == CUDA_SUCCESS) printf("{%d, %d},\n", a, v);
    else printf("// %d: error %d\n", a, r);
  }
  return 0;
}
