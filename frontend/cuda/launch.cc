// Launches: cuLaunchKernel (argument pointers, or the `extra` CU_LAUNCH_PARAM_BUFFER_POINTER
// buffer), cuLaunchKernelEx with attributes, cuLaunchCooperativeKernel, and occupancy queries.
// Argument layouts are the server's (sent with the module's load, cached per module and device).
#include <cstring>
#include <vector>

#include "common/log.h"
#include "frontend/common/launch_attributes.h"
#include "frontend/common/launch_extra.h"
#include "frontend/cuda/api.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::function_of;
using rgpu::cuda_fe::to_driver;

namespace {

using Attr = client::Client::LaunchAttribute;

// One driver launch attribute in the core's terms; false for an id rgpu does not know.
bool convert(const CUlaunchAttribute& a, Attr& out) {
  int id;
  std::memcpy(&id, &a.id, sizeof id);
  return frontend::launch_attribute(id, a.value, out,
                                    [](CUevent e) { return cuda_fe::event_of(e); });
}

CUresult launch(CUfunction fn, client::Client::Dim3 grid, client::Client::Dim3 block, unsigned smem,
                CUstream st, bool pt, void** params, void** extra, const std::vector<Attr>& attrs) {
  RGPU_INIT();
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  client::Function* f = function_of(fn);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  client::Stream s;
  if (client::Error e = cuda_fe::stream_of(st, pt, &s); e != err::Success) return to_driver(e);
  std::vector<void*> holder;
  void** args = nullptr;
  if (!frontend::launch_arguments(f, params, extra, holder, &args, "cuLaunchKernel"))
    return CUDA_ERROR_INVALID_VALUE;
  if (attrs.empty()) return to_driver(core().launch(f, grid, block, args, smem, s));
  return to_driver(core().launch_ex(f, grid, block, args, smem, s, attrs));
}

// A launch configuration's attributes in the core's terms.
CUresult attributes(const CUlaunchConfig* c, const char* call, std::vector<Attr>& attrs) {
  if (c->numAttrs && !c->attrs) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < c->numAttrs; ++i) {
    const CUlaunchAttribute& a = c->attrs[i];
    int id;  // the number the program stored: it may be no enumerator (reading it as one is UB)
    std::memcpy(&id, &a.id, sizeof id);
    if (id == CU_LAUNCH_ATTRIBUTE_IGNORE) continue;
    if (id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && !a.value.cooperative) continue;
    if (id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
        !a.value.programmaticStreamSerializationAllowed)
      continue;
    Attr x;
    if (!convert(a, x)) {
      LOG_ERROR("%s: launch attribute %d is unknown to rgpu (CUDA_ERROR_INVALID_VALUE)", call, id);
      return CUDA_ERROR_INVALID_VALUE;
    }
    attrs.push_back(x);
  }
  return CUDA_SUCCESS;
}

CUresult launch_ex(const CUlaunchConfig* c, CUfunction f, void** params, void** extra, bool pt) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  std::vector<Attr> attrs;
  if (CUresult r = attributes(c, "cuLaunchKernelEx", attrs); r != CUDA_SUCCESS) return r;
  return launch(f, {c->gridDimX, c->gridDimY, c->gridDimZ},
                {c->blockDimX, c->blockDimY, c->blockDimZ}, c->sharedMemBytes, c->hStream, pt,
                params, extra, attrs);
}

// Cluster occupancy: max active clusters (query 0) or max potential cluster size (1).
CUresult cluster_query(int query, int* value, CUfunction fn, const CUlaunchConfig* c) {
  RGPU_INIT();
  if (!value || !c) return CUDA_ERROR_INVALID_VALUE;
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  client::Function* f = function_of(fn);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  std::vector<Attr> attrs;
  if (CUresult r = attributes(c, "cuOccupancy*Cluster*", attrs); r != CUDA_SUCCESS) return r;
  return to_driver(core().occupancy_cluster(f, query, {c->gridDimX, c->gridDimY, c->gridDimZ},
                                            {c->blockDimX, c->blockDimY, c->blockDimZ},
                                            c->sharedMemBytes, attrs, value));
}

std::vector<Attr> cooperative() {
  Attr a;
  a.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  a.v[0] = 1;
  return {a};
}

}  // namespace

RGPU_CU CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                unsigned by, unsigned bz, unsigned smem, CUstream st, void** params,
                                void** extra) {
  return launch(f, {gx, gy, gz}, {bx, by, bz}, smem, st, false, params, extra, {});
}
RGPU_CU CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                     unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                     CUstream st, void** params, void** extra) {
  return launch(f, {gx, gy, gz}, {bx, by, bz}, smem, st, true, params, extra, {});
}
RGPU_CU CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                                  void** extra) {
  return launch_ex(config, f, params, extra, false);
}
RGPU_CU CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                                       void** extra) {
  return launch_ex(config, f, params, extra, true);
}
RGPU_CU CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                           unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                           CUstream st, void** params) {
  return launch(f, {gx, gy, gz}, {bx, by, bz}, smem, st, false, params, nullptr, cooperative());
}
RGPU_CU CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                                unsigned bx, unsigned by, unsigned bz,
                                                unsigned smem, CUstream st, void** params) {
  return launch(f, {gx, gy, gz}, {bx, by, bz}, smem, st, true, params, nullptr, cooperative());
}

// ---- occupancy --------------------------------------------------------------------------------

RGPU_CU CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize, unsigned int flags) {
  RGPU_INIT();
  if (!numBlocks || !func || blockSize <= 0) return CUDA_ERROR_INVALID_VALUE;
  client::Function* f = function_of(func);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  return to_driver(core().occupancy(f, blockSize, dynamicSMemSize, flags, numBlocks));
}
RGPU_CU CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, CUfunction func,
                                                             int blockSize,
                                                             size_t dynamicSMemSize) {
  return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize,
                                                              dynamicSMemSize, 0);
}
RGPU_CU CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t* dynamicSmemSize, CUfunction func,
                                                         int numBlocks, int blockSize) {
  RGPU_INIT();
  if (!dynamicSmemSize || !func) return CUDA_ERROR_INVALID_VALUE;
  client::Function* f = function_of(func);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  return to_driver(core().occupancy_dynamic_smem(f, numBlocks, blockSize, dynamicSmemSize));
}

RGPU_CU CUresult cuOccupancyMaxActiveClusters(int* numClusters, CUfunction func,
                                              const CUlaunchConfig* config) {
  return cluster_query(0, numClusters, func, config);
}

RGPU_CU CUresult cuOccupancyMaxPotentialClusterSize(int* clusterSize, CUfunction func,
                                                    const CUlaunchConfig* config) {
  return cluster_query(1, clusterSize, func, config);
}

// Deprecated: bank size is fixed on every GPU CUDA 13 supports; the call checks and succeeds.
RGPU_CU CUresult cuFuncSetSharedMemConfig(CUfunction hfunc, CUsharedconfig config) {
  RGPU_INIT();
  if (config < CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE ||
      config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)
    return CUDA_ERROR_INVALID_VALUE;
  if (!function_of(hfunc)) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}
