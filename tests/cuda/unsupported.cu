// rgpu only: a call rgpu does not implement yet returns cudaErrorNotSupported, sets the last
// error, and is logged once by name (the harness checks stderr).
#include "check.h"

int main() {
  cudaGraph_t g = nullptr;
  EXPECT_ERR(cudaGraphDebugDotPrint(g, "/tmp/rgpu-unsupported.dot", 0), cudaErrorNotSupported);
  EXPECT_ERR(cudaGraphDebugDotPrint(g, "/tmp/rgpu-unsupported.dot", 0), cudaErrorNotSupported);
  EXPECT_ERR(cudaGetLastError(), cudaErrorNotSupported);
  EXPECT_ERR(cudaGetLastError(), cudaSuccess);
  void* d = nullptr;
  EXPECT_OK(cudaMalloc(&d, 64));  // the library keeps working
  EXPECT_OK(cudaFree(d));
  return finish("unsupported");
}
