// Kernels and a global for tests/cuda/launch.cu's library API checks: built into a fat binary and
// into PTX, both embedded in launch.cu as data (bin2c) and loaded with cudaLibraryLoadData.
extern "C" __global__ void lib_scale(float* x, float f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= f;
}

extern "C" __global__ void lib_add(int* x, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}

__device__ int lib_counter = 42;
