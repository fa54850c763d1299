// NVIDIA's cuBLAS and cuFFT (from the toolkit) on the driver below them: a cuBLAS handle bound to a
// stream and a cuFFT plan are created and destroyed (no kernels run: the host backend has no host
// versions of NVIDIA's kernels).  Built -cudart shared against the toolkit's libraries; run on
// NVIDIA's runtime over rgpu's libcuda.so.1 (tests/integration/drvlibs_test.cc) or natively.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>

#include <cstdio>

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  int failures = 0;
  cudaStream_t s = nullptr;
  if (cudaStreamCreate(&s) != cudaSuccess) {
    printf("FAIL cudaStreamCreate\n");
    return 1;
  }
  cublasHandle_t h = nullptr;
  cublasStatus_t b = cublasCreate(&h);
  printf("%s cublasCreate: %d\n", b == CUBLAS_STATUS_SUCCESS ? "ok  " : "FAIL",
         static_cast<int>(b));
  failures += b != CUBLAS_STATUS_SUCCESS;
  if (b == CUBLAS_STATUS_SUCCESS) {
    b = cublasSetStream(h, s);
    printf("%s cublasSetStream: %d\n", b == CUBLAS_STATUS_SUCCESS ? "ok  " : "FAIL",
           static_cast<int>(b));
    failures += b != CUBLAS_STATUS_SUCCESS;
    b = cublasDestroy(h);
    printf("%s cublasDestroy: %d\n", b == CUBLAS_STATUS_SUCCESS ? "ok  " : "FAIL",
           static_cast<int>(b));
    failures += b != CUBLAS_STATUS_SUCCESS;
  }
  cufftHandle plan = 0;
  cufftResult f = cufftPlan1d(&plan, 1024, CUFFT_C2C, 4);
  printf("%s cufftPlan1d: %d\n", f == CUFFT_SUCCESS ? "ok  " : "FAIL", static_cast<int>(f));
  failures += f != CUFFT_SUCCESS;
  if (f == CUFFT_SUCCESS) {
    f = cufftDestroy(plan);
    printf("%s cufftDestroy: %d\n", f == CUFFT_SUCCESS ? "ok  " : "FAIL", static_cast<int>(f));
    failures += f != CUFFT_SUCCESS;
  }
  cudaStreamDestroy(s);
  printf(failures ? "nvidia_libs: %d FAILED\n" : "nvidia_libs: passed\n", failures);
  return failures ? 1 : 0;
}
