// __managed__ variables (the misc2 group): the host reads a variable's initial value, host writes
// reach kernels, kernel writes reach the host after a synchronization, a large array spans several
// granules; and __cudaGetProcAddress's answer.
#include <cstdio>

#include "check.h"

extern "C" void* __cudaGetProcAddress();  // exported by libcudart.so.13, no public prototype

__managed__ int counter = 7;
__managed__ float values[40000];  // 160000 bytes: three 64 KiB granules

// One thread adds `add` to the counter; every thread i < n sets values[i] = 2 * values[i] + i.
extern "C" __global__ void bump_managed(int add, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 0) counter += add;
  if (i < n) values[i] = 2 * values[i] + i;
}

// cudaLibraryGetManaged on a library with a __managed__ variable (managed_lib.cu's fat binary).
void library_checks(const char* path) {
  cudaLibrary_t lib;
  REQUIRE_OK(cudaLibraryLoadFromFile(&lib, path, nullptr, nullptr, 0, nullptr, nullptr, 0));
  int* lc = nullptr;
  size_t bytes = 0;
  EXPECT_OK(cudaLibraryGetManaged(reinterpret_cast<void**>(&lc), &bytes, lib, "lib_counter"));
  EXPECT_TRUE(lc && bytes == sizeof(int) && *lc == 42, "a library's managed variable read");
  if (lc) *lc = 50;
  cudaKernel_t k;
  EXPECT_OK(cudaLibraryGetKernel(&k, lib, "lib_bump"));
  int add = 8;
  void* args[] = {&add};
  EXPECT_OK(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(1), dim3(1), args, 0, 0));
  EXPECT_OK(cudaDeviceSynchronize());
  printf("library managed variable: %d\n", lc ? *lc : -1);
  EXPECT_TRUE(lc && *lc == 58, "the library's kernel saw the host's write, the host its write");
  EXPECT_ERR(cudaLibraryGetManaged(reinterpret_cast<void**>(&lc), &bytes, lib, "no_such_var"),
             cudaErrorSymbolNotFound);
  cudaGetLastError();
  void* fp = nullptr;
  EXPECT_ERR(cudaLibraryGetUnifiedFunction(&fp, lib, "lib_bump"), cudaErrorSymbolNotFound);
  cudaGetLastError();
  EXPECT_OK(cudaLibraryUnload(lib));
}

int main(int argc, char** argv) {
  const int n = 40000;
  printf("initial counter %d\n", counter);
  EXPECT_TRUE(counter == 7, "a __managed__ variable starts at its initial value on the host");
  bool zero = true;
  for (int i = 0; i < n; ++i) zero = zero && values[i] == 0;
  EXPECT_TRUE(zero, "an uninitialised __managed__ array starts as zeros");

  counter = 10;
  for (int i = 0; i < n; ++i) values[i] = static_cast<float>(i);
  bump_managed<<<(n + 255) / 256, 256>>>(5, n);
  EXPECT_OK(cudaGetLastError());
  EXPECT_OK(cudaDeviceSynchronize());
  printf("after the first kernel: counter %d, values[1] %.0f, values[%d] %.0f\n", counter,
         values[1], n - 1, values[n - 1]);
  bool ok = true;
  for (int i = 0; i < n; ++i) ok = ok && values[i] == 3.0f * i;
  EXPECT_TRUE(counter == 15, "the kernel saw the host's write and the host sees the kernel's");
  EXPECT_TRUE(ok, "every element of the array went to the kernel and came back");

  // Only the counter changes on the host this time: the array's granules stay as they are.
  counter = 100;
  bump_managed<<<(n + 255) / 256, 256>>>(1, n);
  EXPECT_OK(cudaDeviceSynchronize());
  ok = true;
  for (int i = 0; i < n; ++i) ok = ok && values[i] == 7.0f * i;
  printf("after the second kernel: counter %d, values[2] %.0f\n", counter, values[2]);
  EXPECT_TRUE(counter == 101 && ok, "a second round trip");

  if (argc > 1) library_checks(argv[1]);
  EXPECT_TRUE(__cudaGetProcAddress() == nullptr, "__cudaGetProcAddress answers 0");
  return finish("managed_vars");
}
