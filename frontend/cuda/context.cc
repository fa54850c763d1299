// Contexts: primary contexts (retain/release/reset/flags/state), created contexts, the calling
// thread's context stack, and what a context answers (device, flags, limits, ids, sync).
#include <map>
#include <mutex>

#include "frontend/cuda/api.h"
#include "frontend/cuda/export_tables.h"
#include "proto/messages_devmem.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::ctx_of;
using rgpu::cuda_fe::cu;
using rgpu::cuda_fe::to_driver;

namespace rgpu::cuda_fe {

client::Error current_device(int* dev) {
  client::Context* c = core().contexts().current();
  if (!c) return client::errc::InvalidContext;
  if (c->destroyed.load()) return client::errc::ContextIsDestroyed;
  *dev = c->device;
  return err::Success;
}

}  // namespace rgpu::cuda_fe

namespace {

CUresult check_dev(CUdevice dev) {
  return core().check_device(dev) == err::Success ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

// The context a call names, or the current one for NULL.
CUresult context_arg(CUcontext c, client::Context** out) {
  if (c) {
    if (!core().contexts().valid(ctx_of(c))) return CUDA_ERROR_INVALID_CONTEXT;
    *out = ctx_of(c);
    return CUDA_SUCCESS;
  }
  client::Context* cur = core().contexts().current();
  if (!cur) return CUDA_ERROR_INVALID_CONTEXT;
  if (cur->destroyed.load()) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *out = cur;
  return CUDA_SUCCESS;
}

CUresult create(CUcontext* pctx, unsigned flags, CUdevice dev) {
  RGPU_INIT();
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~client::kContextFlagsMask) return CUDA_ERROR_INVALID_VALUE;
  client::Context* c = nullptr;
  CUresult r = to_driver(core().context_create(dev, flags, &c));
  if (r == CUDA_SUCCESS) *pctx = cu(c);
  return r;
}

CUresult limit_op(uint32_t op, CUlimit limit, uint64_t* value) {
  RGPU_INIT();
  int dev = 0;
  if (client::Error e = cuda_fe::current_device(&dev); e != err::Success) return to_driver(e);
  return to_driver(core().device_config(dev, op, static_cast<uint32_t>(limit), value));
}

}  // namespace

// ---- primary contexts -------------------------------------------------------------------------

RGPU_CU CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  RGPU_INIT();
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_dev(dev); r != CUDA_SUCCESS) return r;
  client::Context* c = nullptr;
  CUresult r = to_driver(core().contexts().primary_retain(dev, &c));
  if (r == CUDA_SUCCESS) *pctx = cu(c);
  return r;
}

RGPU_CU CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  RGPU_INIT();
  if (CUresult r = check_dev(dev); r != CUDA_SUCCESS) return r;
  return to_driver(core().primary_release(dev));
}

RGPU_CU CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  RGPU_INIT();
  if (CUresult r = check_dev(dev); r != CUDA_SUCCESS) return r;
  // NVIDIA's runtime's per-context state, if it runs on us.
  if (client::Context* c = core().contexts().primary(dev)) cuda_fe::context_ended(cu(c));
  return to_driver(core().primary_reset(dev));
}

RGPU_CU CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  RGPU_INIT();
  if (CUresult r = check_dev(dev); r != CUDA_SUCCESS) return r;
  return to_driver(core().contexts().primary_set_flags(dev, flags));
}

RGPU_CU CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  RGPU_INIT();
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_dev(dev); r != CUDA_SUCCESS) return r;
  bool a = false;
  CUresult r = to_driver(core().contexts().primary_state(dev, flags, &a));
  *active = a ? 1 : 0;
  return r;
}

// The first versions behave the same for everything rgpu does.
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuDevicePrimaryCtxSetFlags
RGPU_CU CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return cuDevicePrimaryCtxRelease_v2(dev);
}
RGPU_CU CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return cuDevicePrimaryCtxReset_v2(dev); }
RGPU_CU CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

// ---- created contexts -------------------------------------------------------------------------

RGPU_CU CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return create(pctx, flags, dev);
}

RGPU_CU CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params, int numParams,
                                unsigned int flags, CUdevice dev) {
  if (numParams < 0 || (numParams > 0 && !params)) return CUDA_ERROR_INVALID_VALUE;
  if (numParams > 0)
    return static_cast<CUresult>(cuda_fe::unsupported("cuCtxCreate (execution affinity)"));
  return create(pctx, flags, dev);
}

RGPU_CU CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags,
                                CUdevice dev) {
  if (params && (params->numExecAffinityParams > 0 || params->cigParams))
    return static_cast<CUresult>(
        cuda_fe::unsupported("cuCtxCreate (execution affinity or CIG parameters)"));
  return create(pctx, flags, dev);
}

RGPU_CU CUresult cuCtxDestroy_v2(CUcontext ctx) {
  RGPU_INIT();
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  if (ctx_of(ctx)->primary) return CUDA_ERROR_INVALID_CONTEXT;  // primary: release it instead
  cuda_fe::context_ended(ctx);  // NVIDIA's runtime's per-context state, if it runs on us
  return to_driver(core().context_destroy(ctx_of(ctx)));
}

RGPU_CU CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  RGPU_INIT();
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().contexts().push(ctx_of(ctx)));
}

RGPU_CU CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  RGPU_INIT();
  client::Context* c = nullptr;
  CUresult r = to_driver(core().contexts().pop(&c));
  if (r == CUDA_SUCCESS && pctx) *pctx = cu(c);
  return r;
}

#undef cuCtxDestroy
#undef cuCtxPushCurrent
#undef cuCtxPopCurrent
RGPU_CU CUresult cuCtxDestroy(CUcontext ctx) { return cuCtxDestroy_v2(ctx); }
RGPU_CU CUresult cuCtxPushCurrent(CUcontext ctx) { return cuCtxPushCurrent_v2(ctx); }
RGPU_CU CUresult cuCtxPopCurrent(CUcontext* pctx) { return cuCtxPopCurrent_v2(pctx); }

RGPU_CU CUresult cuCtxSetCurrent(CUcontext ctx) {
  RGPU_INIT();
  return to_driver(core().contexts().set_current(ctx_of(ctx)));
}

RGPU_CU CUresult cuCtxGetCurrent(CUcontext* pctx) {
  RGPU_INIT();
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = cu(core().contexts().current());
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuCtxGetDevice(CUdevice* device) {
  RGPU_INIT();
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(cuda_fe::current_device(device));
}

RGPU_CU CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  RGPU_INIT();
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  client::Context* c = nullptr;
  if (CUresult r = context_arg(ctx, &c); r != CUDA_SUCCESS) return r;
  *device = c->device;
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuCtxSynchronize(void) {
  RGPU_INIT();
  int dev = 0;
  if (client::Error e = cuda_fe::current_device(&dev); e != err::Success) return to_driver(e);
  return to_driver(core().synchronize(dev));
}

RGPU_CU CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  RGPU_INIT();
  client::Context* c = nullptr;
  if (CUresult r = context_arg(ctx, &c); r != CUDA_SUCCESS) return r;
  return to_driver(core().synchronize(c->device));
}

RGPU_CU CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int* version) {
  RGPU_INIT();
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  client::Context* c = nullptr;
  if (CUresult r = context_arg(ctx, &c); r != CUDA_SUCCESS) return r;
  *version = 3020;  // every context since CUDA 3.2 reports the 3.2 interface
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuCtxGetFlags(unsigned int* flags) {
  RGPU_INIT();
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  client::Context* c = nullptr;
  if (CUresult r = context_arg(nullptr, &c); r != CUDA_SUCCESS) return r;
  *flags = c->flags.load();
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuCtxSetFlags(unsigned int flags) {
  RGPU_INIT();
  if (flags & ~client::kContextFlagsMask) return CUDA_ERROR_INVALID_VALUE;
  client::Context* c = nullptr;
  if (CUresult r = context_arg(nullptr, &c); r != CUDA_SUCCESS) return r;
  c->flags.store(flags);
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuCtxGetId(CUcontext ctx, unsigned long long* ctxId) {
  RGPU_INIT();
  if (!ctxId) return CUDA_ERROR_INVALID_VALUE;
  client::Context* c = nullptr;
  if (CUresult r = context_arg(ctx, &c); r != CUDA_SUCCESS) return r;
  // Unique for the process's lifetime, handed out at the first question.
  static std::mutex mu;
  static std::map<const client::Context*, unsigned long long>* ids =
      new std::map<const client::Context*, unsigned long long>;
  std::lock_guard<std::mutex> lock(mu);
  auto [it, fresh] = ids->emplace(c, ids->size() + 1);
  *ctxId = it->second;
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  uint64_t v = value;
  return limit_op(static_cast<uint32_t>(proto::DeviceConfigOp::SetLimit), limit, &v);
}

RGPU_CU CUresult cuCtxGetLimit(size_t* pvalue, CUlimit limit) {
  if (!pvalue) return CUDA_ERROR_INVALID_VALUE;
  uint64_t v = 0;
  CUresult r = limit_op(static_cast<uint32_t>(proto::DeviceConfigOp::GetLimit), limit, &v);
  if (r == CUDA_SUCCESS) *pvalue = v;
  return r;
}

RGPU_CU CUresult cuCtxGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  RGPU_INIT();
  int dev = 0;
  if (client::Error e = cuda_fe::current_device(&dev); e != err::Success) return to_driver(e);
  int least = 0, greatest = 0;
  CUresult r = to_driver(core().stream_priority_range(dev, &least, &greatest));
  if (r != CUDA_SUCCESS) return r;
  if (leastPriority) *leastPriority = least;
  if (greatestPriority) *greatestPriority = greatest;
  return CUDA_SUCCESS;
}
