// cudaPointerGetAttributes on device, page-locked, registered and ordinary host memory.
#include <vector>

#include "check.h"

static cudaMemoryType type_of(const void* p, int* device = nullptr) {
  cudaPointerAttributes a{};
  cudaError_t e = cudaPointerGetAttributes(&a, p);
  if (e != cudaSuccess) {
    printf("     cudaPointerGetAttributes: %s\n", cudaGetErrorName(e));
    return static_cast<cudaMemoryType>(-1);
  }
  if (device) *device = a.device;
  return a.type;
}

int main() {
  void* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, 1 << 20));
  int dev = -1;
  EXPECT_TRUE(type_of(d, &dev) == cudaMemoryTypeDevice && dev == 0,
              "device allocation: device memory on device 0");
  EXPECT_TRUE(type_of(static_cast<char*>(d) + 12345) == cudaMemoryTypeDevice,
              "pointer inside a device allocation: device memory");
  cudaPointerAttributes a{};
  EXPECT_OK(cudaPointerGetAttributes(&a, d));
  EXPECT_TRUE(a.devicePointer == d && a.hostPointer == nullptr,
              "device allocation: devicePointer is the pointer, no host pointer");

  void* pinned = nullptr;
  REQUIRE_OK(cudaMallocHost(&pinned, 4096));
  EXPECT_TRUE(type_of(pinned) == cudaMemoryTypeHost, "cudaMallocHost: host memory");
  EXPECT_OK(cudaPointerGetAttributes(&a, pinned));
  EXPECT_TRUE(a.hostPointer == pinned, "cudaMallocHost: hostPointer is the pointer");

  void* alloc = nullptr;
  REQUIRE_OK(cudaHostAlloc(&alloc, 8192, cudaHostAllocPortable));
  EXPECT_TRUE(type_of(static_cast<char*>(alloc) + 100) == cudaMemoryTypeHost,
              "cudaHostAlloc: host memory (inside the range too)");

  std::vector<char> v(1 << 16);
  EXPECT_TRUE(type_of(v.data()) == cudaMemoryTypeUnregistered,
              "ordinary heap memory: unregistered");
  REQUIRE_OK(cudaHostRegister(v.data(), v.size(), 0));
  EXPECT_TRUE(type_of(v.data() + 10) == cudaMemoryTypeHost, "cudaHostRegister: host memory");
  REQUIRE_OK(cudaHostUnregister(v.data()));
  EXPECT_TRUE(type_of(v.data()) == cudaMemoryTypeUnregistered,
              "after cudaHostUnregister: unregistered");

  int local = 0;
  EXPECT_TRUE(type_of(&local) == cudaMemoryTypeUnregistered, "a stack variable: unregistered");

  REQUIRE_OK(cudaFreeHost(pinned));
  REQUIRE_OK(cudaFreeHost(alloc));
  REQUIRE_OK(cudaFree(d));
  return finish("pointer_attrs");
}
