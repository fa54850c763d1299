// Run-time compilation on the driver API: a kernel compiled by NVRTC to PTX and to a cubin, and
// NVRTC's PTX linked to a cubin by nvJitLink, each loaded with cuModuleLoadData and launched.
// NVRTC and nvJitLink run on the client (the toolkit's libraries; no GPU needed); the modules go
// to the server like any other.  Output is the same natively and through rgpu.
#include <nvJitLink.h>
#include <nvrtc.h>

#include <string>
#include <vector>

#include "driver_check.h"

#ifndef JIT_ARCH
#define JIT_ARCH "sm_90"
#endif
#ifndef JIT_COMPUTE
#define JIT_COMPUTE "compute_90"
#endif

namespace {

// The host backend's test plugin implements lib_add by name (tests/host_kernels).
const char* kSource = R"(
extern "C" __global__ void lib_add(int* x, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}
)";

// NVRTC's output for `arch` ("compute_XX": PTX; "sm_XX": a cubin); empty on failure.
std::vector<char> compile(const char* arch, bool cubin) {
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, kSource, "lib_add.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS)
    return {};
  std::string opt = std::string("--gpu-architecture=") + arch;
  const char* opts[] = {opt.c_str()};
  std::vector<char> out;
  if (nvrtcCompileProgram(prog, 1, opts) == NVRTC_SUCCESS) {
    size_t n = 0;
    if (cubin ? nvrtcGetCUBINSize(prog, &n) == NVRTC_SUCCESS
              : nvrtcGetPTXSize(prog, &n) == NVRTC_SUCCESS) {
      out.resize(n);
      if ((cubin ? nvrtcGetCUBIN(prog, out.data()) : nvrtcGetPTX(prog, out.data())) !=
          NVRTC_SUCCESS)
        out.clear();
    }
  } else {
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    nvrtcGetProgramLog(prog, log.data());
    printf("nvrtc log: %s\n", log.c_str());
  }
  nvrtcDestroyProgram(&prog);
  return out;
}

// PTX linked into a cubin for JIT_ARCH by nvJitLink; empty on failure.
std::vector<char> link(const std::vector<char>& ptx) {
  nvJitLinkHandle h;
  std::string opt = std::string("-arch=") + JIT_ARCH;
  const char* opts[] = {opt.c_str()};
  if (nvJitLinkCreate(&h, 1, opts) != NVJITLINK_SUCCESS) return {};
  std::vector<char> out;
  if (nvJitLinkAddData(h, NVJITLINK_INPUT_PTX, ptx.data(), ptx.size(), "lib_add.ptx") ==
          NVJITLINK_SUCCESS &&
      nvJitLinkComplete(h) == NVJITLINK_SUCCESS) {
    size_t n = 0;
    if (nvJitLinkGetLinkedCubinSize(h, &n) == NVJITLINK_SUCCESS) {
      out.resize(n);
      if (nvJitLinkGetLinkedCubin(h, out.data()) != NVJITLINK_SUCCESS) out.clear();
    }
  }
  nvJitLinkDestroy(&h);
  return out;
}

// Loads `image`, runs lib_add(x, v, n) with argument pointers, checks x[i] == i + v.
void run(const char* what, const std::vector<char>& image, int v) {
  char line[160];
  snprintf(line, sizeof line, "%s: compiled", what);
  EXPECT_TRUE(!image.empty(), line);
  if (image.empty()) return;
  CUmodule m = nullptr;
  EXPECT_OK(cuModuleLoadData(&m, image.data()));
  CUfunction f = nullptr;
  EXPECT_OK(cuModuleGetFunction(&f, m, "lib_add"));
  const int n = 777;
  CUdeviceptr d = 0;
  EXPECT_OK(cuMemAlloc(&d, n * sizeof(int)));
  std::vector<int> h(n);
  for (int i = 0; i < n; ++i) h[i] = i;
  EXPECT_OK(cuMemcpyHtoD(d, h.data(), n * sizeof(int)));
  int count = n;
  void* args[] = {&d, &v, &count};
  EXPECT_OK(cuLaunchKernel(f, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr));
  EXPECT_OK(cuCtxSynchronize());
  EXPECT_OK(cuMemcpyDtoH(h.data(), d, n * sizeof(int)));
  bool good = true;
  for (int i = 0; i < n; ++i) good = good && h[i] == i + v;
  snprintf(line, sizeof line, "%s: the kernel added %d", what, v);
  EXPECT_TRUE(good, line);
  EXPECT_OK(cuMemFree(d));
  EXPECT_OK(cuModuleUnload(m));
}

}  // namespace

int main() {
  EXPECT_OK(cuInit(0));
  CUdevice dev;
  EXPECT_OK(cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  EXPECT_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
  EXPECT_OK(cuCtxSetCurrent(ctx));
  std::vector<char> ptx = compile(JIT_COMPUTE, false);
  run("NVRTC PTX", ptx, 3);
  run("NVRTC cubin", compile(JIT_ARCH, true), 5);
  run("nvJitLink cubin from NVRTC's PTX", ptx.empty() ? ptx : link(ptx), 7);
  EXPECT_OK(cuDevicePrimaryCtxRelease(dev));
  printf("nvrtc_jit: %s (%d failures)\n", g_failures ? "FAILED" : "passed", g_failures);
  return g_failures ? 1 : 0;
}
