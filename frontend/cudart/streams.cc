// Streams, events, asynchronous copies and memsets, host callbacks, and copies between GPUs.
#include "frontend/cudart/api.h"

using namespace rgpu;
using rgpu::cudart::core;
using rgpu::cudart::ret;
using rgpu::cudart::ret_query;
using rgpu::cudart::stream_arg;

#define RGPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using rgpu::cudart::event_of;
client::CopyKind kind_of(cudaMemcpyKind k) { return static_cast<client::CopyKind>(k); }

cudaError_t stream_sync(cudaStream_t stream, bool pt) {
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  return ret(core().stream_synchronize(s));
}
cudaError_t stream_query(cudaStream_t stream, bool pt) {
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  return ret_query(core().stream_query(s));
}
cudaError_t stream_wait(cudaStream_t stream, cudaEvent_t event, unsigned flags, bool pt) {
  if (flags & ~1u) return ret(err::InvalidValue);
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  return ret(core().stream_wait_event(s, event_of(event)));
}
cudaError_t stream_flags(cudaStream_t stream, unsigned* flags, int* priority, bool pt) {
  if ((flags == nullptr) == (priority == nullptr) && !flags) return ret(err::InvalidValue);
  if (!core().stream_flags(rgpu::cudart::stream_ref(stream, pt), flags, priority))
    return ret(client::errc::InvalidResourceHandle);
  return cudaSuccess;
}
cudaError_t event_record(cudaEvent_t event, cudaStream_t stream, bool pt) {
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  return ret(core().event_record(event_of(event), s));
}
cudaError_t copy2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                         size_t height, cudaMemcpyKind kind, cudaStream_t stream, bool pt) {
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  return ret(core().memcpy2d_async(dst, dpitch, src, spitch, width, height, kind_of(kind), s));
}
cudaError_t memset_async(void* p, int value, size_t n, cudaStream_t stream, bool pt) {
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  return ret(core().memset_async(p, value, n, s));
}
cudaError_t host_func(cudaStream_t stream, cudaHostFn_t fn, void* data, bool pt) {
  if (!fn) return ret(err::InvalidValue);
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  return ret(core().host_func(s, [fn, data] { fn(data); }));
}
cudaError_t stream_callback(cudaStream_t stream, cudaStreamCallback_t cb, void* data,
                            unsigned flags, bool pt) {
  if (!cb || flags) return ret(err::InvalidValue);
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  return ret(core().host_func(s, [cb, stream, data] { cb(stream, cudaSuccess, data); }));
}

}  // namespace

extern "C" {

// ---- streams
// --------------------------------------------------------------------------------------

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags, int priority) {
  if (!pStream) return ret(err::InvalidValue);
  client::Stream* s = nullptr;
  CudaError e = core().stream_create(flags, priority, &s);
  if (e == err::Success) *pStream = reinterpret_cast<cudaStream_t>(s);
  return ret(e);
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  return cudaStreamCreateWithPriority(pStream, flags, 0);
}
cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
  return cudaStreamCreateWithPriority(pStream, cudaStreamDefault, 0);
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  return ret(core().stream_destroy(reinterpret_cast<client::Stream*>(stream)));
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return stream_sync(stream, false); }
cudaError_t cudaStreamQuery(cudaStream_t stream) { return stream_query(stream, false); }
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  return stream_wait(stream, event, flags, false);
}
cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int* flags) {
  if (!flags) return ret(err::InvalidValue);
  return stream_flags(hStream, flags, nullptr, false);
}
cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int* priority) {
  if (!priority) return ret(err::InvalidValue);
  return stream_flags(hStream, nullptr, priority, false);
}
namespace {
cudaError_t stream_device(cudaStream_t stream, int* device, bool pt) {
  if (!device) return ret(err::InvalidValue);
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  *device = s.device;
  return cudaSuccess;
}
}  // namespace
cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* device) {
  return stream_device(stream, device, false);
}
RGPU_EXPORT cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t stream, int* device) {
  return stream_device(stream, device, true);
}
cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  return ret(
      core().stream_priority_range(core().current_device(), leastPriority, greatestPriority));
}

// ---- events
// ---------------------------------------------------------------------------------------

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (!event) return ret(err::InvalidValue);
  client::Event* e = nullptr;
  CudaError r = core().event_create(flags, &e);
  if (r == err::Success) *event = reinterpret_cast<cudaEvent_t>(e);
  return ret(r);
}
cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return ret(core().event_destroy(event_of(event)));
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  return event_record(event, stream, false);
}
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  if (flags & ~1u) return ret(err::InvalidValue);  // cudaEventRecordExternal: recorded the same way
  return event_record(event, stream, false);
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
  return ret_query(core().event_query(event_of(event)));
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return ret(core().event_synchronize(event_of(event)));
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  return ret_query(core().event_elapsed(ms, event_of(start), event_of(end)));
}

// ---- asynchronous copies and memsets
// -----------------------------------------------------------------

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return copy2d_async(dst, count, src, count, count, 1, kind, stream, false);
}
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream) {
  return copy2d_async(dst, dpitch, src, spitch, width, height, kind, stream, false);
}
cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  return memset_async(devPtr, value, count, stream, false);
}

// ---- host callbacks
// -------------------------------------------------------------------------------

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
  return host_func(stream, fn, userData, false);
}
cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                  void* userData, unsigned int flags) {
  return stream_callback(stream, callback, userData, flags, false);
}

// ---- several GPUs
// ---------------------------------------------------------------------------------

cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice) {
  return ret(core().can_access_peer(canAccessPeer, device, peerDevice));
}
cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
  if (flags) return ret(err::InvalidValue);
  return ret(core().enable_peer_access(peerDevice));
}
cudaError_t cudaMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice, size_t count) {
  // On the legacy stream of the destination; Client::memcpy_peer waits for it on one server and
  // returns once it is queued between two (CUDA's is asynchronous to the host).
  return ret(core().memcpy_peer(dst, dstDevice, src, srcDevice, count, nullptr));
}
cudaError_t cudaMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice,
                                size_t count, cudaStream_t stream) {
  client::Stream s;
  if (CudaError e = stream_arg(stream, false, &s); e != err::Success) return ret(e);
  if (s.device != dstDevice && s.device != srcDevice)
    return ret(client::errc::InvalidResourceHandle);
  return ret(core().memcpy_peer(dst, dstDevice, src, srcDevice, count, &s));
}

}  // extern "C"

// Per-thread default stream entry points (--default-stream per-thread).
RGPU_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s) { return stream_sync(s, true); }
RGPU_EXPORT cudaError_t cudaStreamQuery_ptsz(cudaStream_t s) { return stream_query(s, true); }
RGPU_EXPORT cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned f) {
  return stream_wait(s, e, f, true);
}
RGPU_EXPORT cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t s, unsigned* flags) {
  if (!flags) return ret(err::InvalidValue);
  return stream_flags(s, flags, nullptr, true);
}
RGPU_EXPORT cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t s, int* priority) {
  if (!priority) return ret(err::InvalidValue);
  return stream_flags(s, nullptr, priority, true);
}
RGPU_EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s) {
  return event_record(e, s, true);
}
RGPU_EXPORT cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t s, unsigned f) {
  if (f & ~1u) return ret(err::InvalidValue);
  return event_record(e, s, true);
}
RGPU_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t count,
                                             cudaMemcpyKind kind, cudaStream_t s) {
  return copy2d_async(dst, count, src, count, count, 1, kind, s, true);
}
RGPU_EXPORT cudaError_t cudaMemcpy2DAsync_ptsz(void* dst, size_t dpitch, const void* src,
                                               size_t spitch, size_t width, size_t height,
                                               cudaMemcpyKind kind, cudaStream_t s) {
  return copy2d_async(dst, dpitch, src, spitch, width, height, kind, s, true);
}
RGPU_EXPORT cudaError_t cudaMemsetAsync_ptsz(void* p, int value, size_t n, cudaStream_t s) {
  return memset_async(p, value, n, s, true);
}
RGPU_EXPORT cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void* data) {
  return host_func(s, fn, data, true);
}
RGPU_EXPORT cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t s, cudaStreamCallback_t cb,
                                                   void* data, unsigned flags) {
  return stream_callback(s, cb, data, flags, true);
}
// cudaStreamIsCapturing(_ptsz): frontend/cudart/graphs.cc
