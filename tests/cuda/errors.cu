// Error codes and CUDA's last-error rules.
#include <string>
#include <vector>

#include "check.h"

int main() {
  int count = 0;
  REQUIRE_OK(cudaGetDeviceCount(&count));

  // Last error: a failure is remembered; Peek leaves it, Get returns and clears it; later
  // successful calls do not clear it.
  EXPECT_ERR(cudaGetLastError(), cudaSuccess);
  EXPECT_ERR(cudaFree(reinterpret_cast<void*>(0x10)), cudaErrorInvalidValue);
  void* d = nullptr;
  EXPECT_OK(cudaMalloc(&d, 256));
  EXPECT_ERR(cudaPeekAtLastError(), cudaErrorInvalidValue);
  EXPECT_ERR(cudaPeekAtLastError(), cudaErrorInvalidValue);
  EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_ERR(cudaGetLastError(), cudaSuccess);

  EXPECT_ERR(cudaSetDevice(count), cudaErrorInvalidDevice);
  EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidDevice);
  EXPECT_ERR(cudaSetDevice(-1), cudaErrorInvalidDevice);
  EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidDevice);

  // Over capacity: 1 TiB exceeds every device and the test daemon's capacity.
  void* big = nullptr;
  EXPECT_ERR(cudaMalloc(&big, 1ull << 40), cudaErrorMemoryAllocation);
  EXPECT_ERR(cudaGetLastError(), cudaErrorMemoryAllocation);

  // Bad pointers.
  std::vector<char> host(1024);
  EXPECT_ERR(cudaMemcpy(host.data(), host.data() + 1, 16, cudaMemcpyDeviceToHost),
             cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemset(host.data(), 0, 16), cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemcpy(d, host.data(), 1024, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_ERR(cudaMemcpy(d, host.data(), 256, static_cast<cudaMemcpyKind>(7)),
             cudaErrorInvalidMemcpyDirection);
  EXPECT_ERR(cudaMemcpy2D(d, 8, host.data(), 16, 16, 2, cudaMemcpyHostToDevice),
             cudaErrorInvalidPitchValue);
  (void)cudaGetLastError();

  // Host registration.
  EXPECT_ERR(cudaHostUnregister(host.data()), cudaErrorHostMemoryNotRegistered);
  EXPECT_OK(cudaHostRegister(host.data(), host.size(), cudaHostRegisterDefault));
  EXPECT_ERR(cudaHostRegister(host.data(), host.size(), cudaHostRegisterDefault),
             cudaErrorHostMemoryAlreadyRegistered);
  EXPECT_OK(cudaHostUnregister(host.data()));
  EXPECT_ERR(cudaFreeHost(host.data()), cudaErrorInvalidValue);
  (void)cudaGetLastError();

  // Null and zero-size cases.
  EXPECT_OK(cudaFree(nullptr));
  EXPECT_OK(cudaFreeHost(nullptr));
  EXPECT_OK(cudaMemcpy(d, host.data(), 0, cudaMemcpyHostToDevice));
  EXPECT_OK(cudaMemset(d, 0, 0));

  // Error names and strings.
  EXPECT_TRUE(std::string(cudaGetErrorName(cudaErrorInvalidValue)) == "cudaErrorInvalidValue",
              "cudaGetErrorName(cudaErrorInvalidValue)");
  EXPECT_TRUE(std::string(cudaGetErrorString(cudaErrorMemoryAllocation)) == "out of memory",
              "cudaGetErrorString(cudaErrorMemoryAllocation)");
  EXPECT_TRUE(std::string(cudaGetErrorName(cudaErrorNotSupported)) == "cudaErrorNotSupported",
              "cudaGetErrorName(cudaErrorNotSupported)");

  EXPECT_OK(cudaFree(d));
  EXPECT_ERR(cudaFree(d), cudaErrorInvalidValue);  // double free
  (void)cudaGetLastError();
  return finish("errors");
}
