// The launch API from before CUDA 4.0, still exported and still used by old driver-API programs:
// a function's block shape (cuFuncSetBlockShape), dynamic shared memory (cuFuncSetSharedSize) and
// argument bytes (cuParamSetSize, cuParamSeti/f/v) are set on the function, then cuLaunch,
// cuLaunchGrid or cuLaunchGridAsync launch it.  The arguments go as an `extra` buffer through the
// same path as cuLaunchKernel's (frontend/common/launch_extra.h).  cuParamSetTexRef stays
// unsupported (texture references are).
#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "frontend/common/launch_extra.h"
#include "frontend/cuda/api.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::function_of;
using rgpu::cuda_fe::to_driver;

namespace {

// CUDA's limit on a kernel's parameters (since CUDA 12.1; CUDA takes cuParamSetv up to it).
constexpr size_t kMaxParamBytes = 32764;

struct Setup {
  unsigned block[3] = {0, 0, 0};  // unset: the launch fails
  unsigned shared = 0;
  size_t size = 0;          // cuParamSetSize
  std::vector<char> bytes;  // as far as cuParamSet* wrote (zero between)
};

std::mutex g_mu;
std::unordered_map<client::Function*, Setup> g_setups;  // by function, as CUDA keeps them

// Runs `fn` on the function's setup under the lock; invalid handle for no function.
template <typename Fn>
CUresult with_setup(CUfunction hfunc, Fn fn) {
  RGPU_INIT();
  client::Function* f = hfunc ? function_of(hfunc) : nullptr;
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(g_mu);
  return fn(g_setups[f]);
}

CUresult set_bytes(CUfunction hfunc, int offset, const void* p, size_t n) {
  if (offset < 0 || !p) return CUDA_ERROR_INVALID_VALUE;
  return with_setup(hfunc, [&](Setup& s) {
    const size_t end = static_cast<size_t>(offset) + n;
    if (end > kMaxParamBytes) return CUDA_ERROR_INVALID_VALUE;
    if (s.bytes.size() < end) s.bytes.resize(end, 0);
    std::memcpy(s.bytes.data() + offset, p, n);
    return CUDA_SUCCESS;
  });
}

CUresult launch_grid(CUfunction hfunc, int gx, int gy, CUstream st, const char* call) {
  if (gx <= 0 || gy <= 0) return CUDA_ERROR_INVALID_VALUE;
  Setup s;
  if (CUresult r = with_setup(hfunc,
                              [&](Setup& setup) {
                                s = setup;
                                return CUDA_SUCCESS;
                              });
      r != CUDA_SUCCESS)
    return r;
  client::Function* f = function_of(hfunc);
  if (!s.block[0] || !s.block[1] || !s.block[2]) {
    LOG_ERROR("%s: no block shape set for %s (cuFuncSetBlockShape)", call, f->name.c_str());
    return CUDA_ERROR_INVALID_VALUE;
  }
  client::Stream stream;
  if (client::Error e = cuda_fe::stream_of(st, false, &stream); e != err::Success)
    return to_driver(e);
  s.bytes.resize(std::max(s.bytes.size(), s.size), 0);  // what cuParamSetSize names exists
  size_t size = s.size;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, s.bytes.data(), CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &size, CU_LAUNCH_PARAM_END};
  std::vector<void*> holder;
  std::vector<char> padded;  // arguments past cuParamSetSize's bytes read as zero
  void** args = nullptr;
  if (!frontend::launch_arguments(f, nullptr, extra, holder, &args, call, &padded))
    return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().launch(f, {static_cast<unsigned>(gx), static_cast<unsigned>(gy), 1},
                                 {s.block[0], s.block[1], s.block[2]}, args, s.shared, stream));
}

}  // namespace

RGPU_CU CUresult cuFuncSetBlockShape(CUfunction hfunc, int x, int y, int z) {
  if (x <= 0 || y <= 0 || z <= 0) return CUDA_ERROR_INVALID_VALUE;
  return with_setup(hfunc, [&](Setup& s) {
    s.block[0] = static_cast<unsigned>(x);
    s.block[1] = static_cast<unsigned>(y);
    s.block[2] = static_cast<unsigned>(z);
    return CUDA_SUCCESS;
  });
}

RGPU_CU CUresult cuFuncSetSharedSize(CUfunction hfunc, unsigned int bytes) {
  return with_setup(hfunc, [&](Setup& s) {
    s.shared = bytes;
    return CUDA_SUCCESS;
  });
}

RGPU_CU CUresult cuParamSetSize(CUfunction hfunc, unsigned int numbytes) {
  if (numbytes > kMaxParamBytes) return CUDA_ERROR_INVALID_VALUE;
  return with_setup(hfunc, [&](Setup& s) {
    s.size = numbytes;
    return CUDA_SUCCESS;
  });
}

RGPU_CU CUresult cuParamSeti(CUfunction hfunc, int offset, unsigned int value) {
  return set_bytes(hfunc, offset, &value, sizeof value);
}

RGPU_CU CUresult cuParamSetf(CUfunction hfunc, int offset, float value) {
  return set_bytes(hfunc, offset, &value, sizeof value);
}

RGPU_CU CUresult cuParamSetv(CUfunction hfunc, int offset, void* ptr, unsigned int numbytes) {
  return set_bytes(hfunc, offset, ptr, numbytes);
}

RGPU_CU CUresult cuLaunch(CUfunction f) { return launch_grid(f, 1, 1, nullptr, "cuLaunch"); }

RGPU_CU CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height) {
  return launch_grid(f, grid_width, grid_height, nullptr, "cuLaunchGrid");
}

RGPU_CU CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height,
                                   CUstream hStream) {
  return launch_grid(f, grid_width, grid_height, hStream, "cuLaunchGridAsync");
}
