// rgpu only: a call rgpu does not implement yet returns cudaErrorNotSupported, sets the last
// error, and is logged once by name (the harness checks stderr).
#include "check.h"

int main() {
  // Graphics interop: unsupported by design (docs/compatibility.md), so it stays a stub.
  EXPECT_ERR(cudaGraphicsUnregisterResource(nullptr), cudaErrorNotSupported);
  EXPECT_ERR(cudaGraphicsUnregisterResource(nullptr), cudaErrorNotSupported);
  EXPECT_ERR(cudaGetLastError(), cudaErrorNotSupported);
  EXPECT_ERR(cudaGetLastError(), cudaSuccess);
  void* d = nullptr;
  EXPECT_OK(cudaMalloc(&d, 64));  // the library keeps working
  EXPECT_OK(cudaFree(d));
  return finish("unsupported");
}
