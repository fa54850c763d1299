// A module whose variables take 900 MiB of device memory (a __device__ array the image holds no
// bytes of), for rgpud's per-client limit: the module's variables count like cudaMalloc's memory.
// Prints what it saw, one line per step (the integration tests decide what is right):
//   module_globals load MiB...    loads the module (cudaGetSymbolAddress): "symbol <error>",
//                                 then one cudaMalloc per size: "malloc <MiB> <error>"
//   module_globals noload MiB...  only the cudaMallocs
#include <cstdlib>
#include <cstring>

#include "check.h"

__device__ char g_big[900u << 20];

__global__ void touch(int i) { g_big[i] = 1; }

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (!strcmp(argv[1], "load")) {
    void* p = nullptr;
    printf("symbol %s\n", cudaGetErrorName(cudaGetSymbolAddress(&p, g_big)));
  } else if (strcmp(argv[1], "noload") != 0) {
    return 2;
  }
  for (int i = 2; i < argc; ++i) {
    long mib = strtol(argv[i], nullptr, 10);
    void* p = nullptr;
    printf("malloc %ld %s\n", mib,
           cudaGetErrorName(cudaMalloc(&p, static_cast<size_t>(mib) << 20)));
  }
  fflush(stdout);
  return 0;
}
