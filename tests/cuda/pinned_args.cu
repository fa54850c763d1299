// Page-locked memory given to a kernel.  Natively every page-locked allocation is
// device-accessible under unified addressing; through rgpu it is where the session maps it for its
// GPU (over shm) or where managed memory stands in (cudaHostAllocMapped over TCP).
//   local    (shm) kernels write plain cudaMallocHost memory; the host reads what they wrote.
//   network  (tcp) a launch naming plain cudaMallocHost memory is refused before anything runs
//            (cudaErrorNotSupported from the launch, the device stays usable: no illegal-address
//            fault); the same launch into cudaHostAllocMapped memory runs, and so does a kernel
//            given device memory while the page-locked allocation still exists.
#include <cstring>
#include <string>

#include "check.h"

extern "C" __global__ void pools_fill(int* p, int n, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = base + i;
}

namespace {

constexpr int kN = 4096;

bool filled(const int* h, int base) {
  for (int i = 0; i < kN; ++i)
    if (h[i] != base + i) return false;
  return true;
}

void local() {
  int* h = nullptr;
  REQUIRE_OK(cudaMallocHost(&h, kN * sizeof(int)));
  std::memset(h, 0, kN * sizeof(int));
  pools_fill<<<kN / 256, 256>>>(h, kN, 7);
  EXPECT_OK(cudaGetLastError());
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT_TRUE(filled(h, 7), "a kernel wrote plain page-locked memory");
  EXPECT_OK(cudaFreeHost(h));
}

void network() {
  int* h = nullptr;
  REQUIRE_OK(cudaMallocHost(&h, kN * sizeof(int)));
  std::memset(h, 0, kN * sizeof(int));
  pools_fill<<<kN / 256, 256>>>(h + 16, kN - 16, 7);  // inside the allocation, not at its base
  EXPECT_ERR(cudaGetLastError(), cudaErrorNotSupported);
  EXPECT_OK(cudaDeviceSynchronize());  // nothing ran: no fault, the context is intact
  EXPECT_TRUE(h[16] == 0, "the refused kernel did not run");

  int* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, kN * sizeof(int)));
  pools_fill<<<kN / 256, 256>>>(d, kN, 3);  // device memory: runs
  EXPECT_OK(cudaGetLastError());
  EXPECT_OK(cudaMemcpy(h, d, kN * sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(filled(h, 3), "a kernel given device memory runs beside page-locked memory");

  int* m = nullptr;
  REQUIRE_OK(cudaHostAlloc(&m, kN * sizeof(int), cudaHostAllocMapped));
  pools_fill<<<kN / 256, 256>>>(m, kN, 5);
  EXPECT_OK(cudaGetLastError());
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT_TRUE(filled(m, 5), "a kernel wrote cudaHostAllocMapped memory");
  EXPECT_OK(cudaFreeHost(m));
  EXPECT_OK(cudaFree(d));
  EXPECT_OK(cudaFreeHost(h));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "network";
  if (mode == "local") {
    local();
  } else if (mode == "network") {
    network();
  } else {
    printf("usage: pinned_args [local|network]\n");
    return 2;
  }
  return finish(("pinned_args " + mode).c_str());
}
