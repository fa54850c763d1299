// Streams, events, host functions and stream callbacks on the client core's objects (a CUstream
// is the client::Stream* the runtime front-end's cudaStream_t also is).
#include "frontend/cuda/api.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::event_of;
using rgpu::cuda_fe::to_driver;

namespace {

CUresult with_stream(CUstream st, bool pt, client::Stream* s) {
  RGPU_INIT();
  return to_driver(cuda_fe::stream_of(st, pt, s));
}
CUresult query(client::Error e) { return e == err::NotReady ? CUDA_ERROR_NOT_READY : to_driver(e); }

CUresult stream_sync(CUstream st, bool pt) {
  client::Stream s;
  if (CUresult r = with_stream(st, pt, &s); r != CUDA_SUCCESS) return r;
  return to_driver(core().stream_synchronize(s));
}
CUresult stream_query(CUstream st, bool pt) {
  client::Stream s;
  if (CUresult r = with_stream(st, pt, &s); r != CUDA_SUCCESS) return r;
  return query(core().stream_query(s));
}
CUresult stream_wait(CUstream st, CUevent ev, unsigned flags, bool pt) {
  if (flags & ~1u) return CUDA_ERROR_INVALID_VALUE;
  client::Stream s;
  if (CUresult r = with_stream(st, pt, &s); r != CUDA_SUCCESS) return r;
  return to_driver(core().stream_wait_event(s, event_of(ev)));
}
CUresult stream_flags(CUstream st, unsigned* flags, int* priority, bool pt) {
  RGPU_INIT();
  if (!flags && !priority) return CUDA_ERROR_INVALID_VALUE;
  if (!core().stream_flags(cuda_fe::stream_ref(st, pt), flags, priority))
    return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}
CUresult stream_ctx(CUstream st, CUcontext* pctx, bool pt) {
  client::Stream s;
  if (CUresult r = with_stream(st, pt, &s); r != CUDA_SUCCESS) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  client::Context* c = s.ctx ? s.ctx : core().contexts().current();
  if (!c) c = core().contexts().primary(s.device);
  *pctx = cuda_fe::cu(c);
  return CUDA_SUCCESS;
}
CUresult stream_id(CUstream st, unsigned long long* id, bool pt) {
  client::Stream s;
  if (CUresult r = with_stream(st, pt, &s); r != CUDA_SUCCESS) return r;
  if (!id) return CUDA_ERROR_INVALID_VALUE;
  *id = s.id;
  return CUDA_SUCCESS;
}
CUresult event_record(CUevent ev, CUstream st, unsigned flags, bool pt) {
  if (flags & ~1u) return CUDA_ERROR_INVALID_VALUE;  // CU_EVENT_RECORD_EXTERNAL (graphs only)
  client::Stream s;
  if (CUresult r = with_stream(st, pt, &s); r != CUDA_SUCCESS) return r;
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  return to_driver(core().event_record(event_of(ev), s));
}
CUresult host_func(CUstream st, CUhostFn fn, void* data, bool pt) {
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  client::Stream s;
  if (CUresult r = with_stream(st, pt, &s); r != CUDA_SUCCESS) return r;
  return to_driver(core().host_func(s, [fn, data] { fn(data); }));
}
CUresult callback(CUstream st, CUstreamCallback cb, void* data, unsigned flags, bool pt) {
  if (!cb || flags) return CUDA_ERROR_INVALID_VALUE;
  client::Stream s;
  if (CUresult r = with_stream(st, pt, &s); r != CUDA_SUCCESS) return r;
  return to_driver(core().host_func(s, [cb, st, data] { cb(st, CUDA_SUCCESS, data); }));
}

}  // namespace

// ---- streams ----------------------------------------------------------------------------------

RGPU_CU CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) {
  RGPU_INIT();
  if (!phStream || (flags & ~CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  int dev = 0;
  if (client::Error e = cuda_fe::current_device(&dev); e != err::Success) return to_driver(e);
  client::Stream* s = nullptr;
  CUresult r = to_driver(core().stream_create(flags, priority, &s));
  if (r == CUDA_SUCCESS) *phStream = reinterpret_cast<CUstream>(s);
  return r;
}
RGPU_CU CUresult cuStreamCreate(CUstream* phStream, unsigned int flags) {
  return cuStreamCreateWithPriority(phStream, flags, 0);
}
RGPU_CU CUresult cuStreamDestroy_v2(CUstream st) {
  RGPU_INIT();
  if (!st || st == CU_STREAM_LEGACY || st == CU_STREAM_PER_THREAD) return CUDA_ERROR_INVALID_HANDLE;
  return to_driver(core().stream_destroy(reinterpret_cast<client::Stream*>(st)));
}
#undef cuStreamDestroy
RGPU_CU CUresult cuStreamDestroy(CUstream st) { return cuStreamDestroy_v2(st); }

RGPU_CU CUresult cuStreamSynchronize(CUstream st) { return stream_sync(st, false); }
RGPU_CU CUresult cuStreamSynchronize_ptsz(CUstream st) { return stream_sync(st, true); }
RGPU_CU CUresult cuStreamQuery(CUstream st) { return stream_query(st, false); }
RGPU_CU CUresult cuStreamQuery_ptsz(CUstream st) { return stream_query(st, true); }
RGPU_CU CUresult cuStreamWaitEvent(CUstream st, CUevent ev, unsigned int flags) {
  return stream_wait(st, ev, flags, false);
}
RGPU_CU CUresult cuStreamWaitEvent_ptsz(CUstream st, CUevent ev, unsigned int flags) {
  return stream_wait(st, ev, flags, true);
}
RGPU_CU CUresult cuStreamGetFlags(CUstream st, unsigned int* flags) {
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  return stream_flags(st, flags, nullptr, false);
}
RGPU_CU CUresult cuStreamGetFlags_ptsz(CUstream st, unsigned int* flags) {
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  return stream_flags(st, flags, nullptr, true);
}
RGPU_CU CUresult cuStreamGetPriority(CUstream st, int* priority) {
  if (!priority) return CUDA_ERROR_INVALID_VALUE;
  return stream_flags(st, nullptr, priority, false);
}
RGPU_CU CUresult cuStreamGetPriority_ptsz(CUstream st, int* priority) {
  if (!priority) return CUDA_ERROR_INVALID_VALUE;
  return stream_flags(st, nullptr, priority, true);
}
RGPU_CU CUresult cuStreamGetCtx(CUstream st, CUcontext* pctx) {
  return stream_ctx(st, pctx, false);
}
RGPU_CU CUresult cuStreamGetCtx_ptsz(CUstream st, CUcontext* pctx) {
  return stream_ctx(st, pctx, true);
}
RGPU_CU CUresult cuStreamGetId(CUstream st, unsigned long long* id) {
  return stream_id(st, id, false);
}
RGPU_CU CUresult cuStreamGetId_ptsz(CUstream st, unsigned long long* id) {
  return stream_id(st, id, true);
}
RGPU_CU CUresult cuStreamGetDevice(CUstream st, CUdevice* dev) {
  client::Stream s;
  if (CUresult r = with_stream(st, false, &s); r != CUDA_SUCCESS) return r;
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  *dev = s.device;
  return CUDA_SUCCESS;
}
RGPU_CU CUresult cuStreamGetDevice_ptsz(CUstream st, CUdevice* dev) {
  client::Stream s;
  if (CUresult r = with_stream(st, true, &s); r != CUDA_SUCCESS) return r;
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  *dev = s.device;
  return CUDA_SUCCESS;
}
RGPU_CU CUresult cuLaunchHostFunc(CUstream st, CUhostFn fn, void* data) {
  return host_func(st, fn, data, false);
}
RGPU_CU CUresult cuLaunchHostFunc_ptsz(CUstream st, CUhostFn fn, void* data) {
  return host_func(st, fn, data, true);
}
RGPU_CU CUresult cuStreamAddCallback(CUstream st, CUstreamCallback cb, void* data,
                                     unsigned int flags) {
  return callback(st, cb, data, flags, false);
}
RGPU_CU CUresult cuStreamAddCallback_ptsz(CUstream st, CUstreamCallback cb, void* data,
                                          unsigned int flags) {
  return callback(st, cb, data, flags, true);
}

// ---- events -----------------------------------------------------------------------------------

RGPU_CU CUresult cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  RGPU_INIT();
  constexpr unsigned kKnown =
      CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (!phEvent || (Flags & ~kKnown)) return CUDA_ERROR_INVALID_VALUE;
  int dev = 0;
  if (client::Error e = cuda_fe::current_device(&dev); e != err::Success) return to_driver(e);
  client::Event* ev = nullptr;
  CUresult r = to_driver(core().event_create(Flags, &ev));
  if (r == CUDA_SUCCESS) *phEvent = reinterpret_cast<CUevent>(ev);
  return r;
}
RGPU_CU CUresult cuEventDestroy_v2(CUevent ev) {
  RGPU_INIT();
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  return to_driver(core().event_destroy(event_of(ev)));
}
#undef cuEventDestroy
RGPU_CU CUresult cuEventDestroy(CUevent ev) { return cuEventDestroy_v2(ev); }
RGPU_CU CUresult cuEventRecord(CUevent ev, CUstream st) { return event_record(ev, st, 0, false); }
RGPU_CU CUresult cuEventRecord_ptsz(CUevent ev, CUstream st) {
  return event_record(ev, st, 0, true);
}
RGPU_CU CUresult cuEventRecordWithFlags(CUevent ev, CUstream st, unsigned int flags) {
  return event_record(ev, st, flags, false);
}
RGPU_CU CUresult cuEventRecordWithFlags_ptsz(CUevent ev, CUstream st, unsigned int flags) {
  return event_record(ev, st, flags, true);
}
RGPU_CU CUresult cuEventQuery(CUevent ev) {
  RGPU_INIT();
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  return query(core().event_query(event_of(ev)));
}
RGPU_CU CUresult cuEventSynchronize(CUevent ev) {
  RGPU_INIT();
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  return to_driver(core().event_synchronize(event_of(ev)));
}
RGPU_CU CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  RGPU_INIT();
  if (!ms) return CUDA_ERROR_INVALID_VALUE;
  if (!start || !end) return CUDA_ERROR_INVALID_HANDLE;
  return to_driver(core().event_elapsed(ms, event_of(start), event_of(end)));
}
#undef cuEventElapsedTime
RGPU_CU CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  return cuEventElapsedTime_v2(ms, start, end);
}
