// CUDA IPC between client processes of one server (issue 11, item 8): the 64-byte handle and the
// calls that export, open and close memory through the server (server/ipc.cc).
#include <atomic>
#include <cstring>

#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {

uint64_t u64(const void* p) { return reinterpret_cast<uint64_t>(p); }

// The handle: a tag, the server's token (its identity and the export id) and an offset in the
// exported allocation (0 from current servers: a handle names the allocation, and opening it
// gives the allocation's start, as with CUDA); the rest is zero.
constexpr char kTag[8] = {'r', 'g', 'p', 'u', 'I', 'P', 'C', '1'};
constexpr size_t kTokenAt = 8, kOffsetAt = 40;
static_assert(kOffsetAt + 8 <= Client::kIpcHandleBytes);

}  // namespace

CudaError Client::ipc_get_mem_handle(void* ptr, uint8_t* handle) {
  if (!ptr || !handle) return err::InvalidValue;
  auto r = map_.find_device(u64(ptr));
  if (!r || !r->freeable) {
    LOG_ERROR("cudaIpcGetMemHandle: %p is not memory from cudaMalloc", ptr);
    return err::InvalidValue;
  }
  CudaError e;
  ServerLink* l = link(r->device, &e);
  if (!l) return e;
  IpcGetMemHandleRep rep;
  const uint32_t gpu = devices_[r->device].spec.gpu;
  // A small allocation lies in a slab (client/small_allocs.h): the handle names it alone, its
  // slab hands out nothing more, and its free withdraws the handle.
  uint64_t slab = 0;
  if (small_->slab_of(r->base, &slab)) {
    if (!l->knows(MsgId::IpcGetRangeHandle)) {
      LOG_ERROR(
          "cudaIpcGetMemHandle of %p: the server is too old to export a small allocation "
          "(RGPU_SMALL_ALLOC=0 makes every allocation the server's own)",
          ptr);
      return err::NotSupported;
    }
    bool fresh = false;
    if (!small_->mark_exported(r->base, &fresh)) return err::InvalidValue;  // freed meanwhile
    e = l->call<IpcGetRangeHandleMsg>(IpcGetRangeHandleReq{gpu, r->base, r->size}, &rep);
    if (e != err::Success && fresh) small_->unmark_exported(r->base);
  } else {
    e = l->call<IpcGetMemHandleMsg>(IpcGetMemHandleReq{gpu, u64(ptr)}, &rep);
  }
  if (e != err::Success) {
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true))
      LOG_ERROR(
          "cudaIpcGetMemHandle of %p failed with error %d (RGPU_LOG=info shows the server's "
          "reason, naming the limit when one refused it); later failures are not logged",
          ptr, e);
    return e;
  }
  std::memset(handle, 0, kIpcHandleBytes);
  std::memcpy(handle, kTag, sizeof kTag);
  std::memcpy(handle + kTokenAt, rep.token.data(), rep.token.size());
  std::memcpy(handle + kOffsetAt, &rep.offset, sizeof rep.offset);
  return err::Success;
}

CudaError Client::ipc_open_mem_handle(const uint8_t* handle, int dev, void** ptr) {
  if (!handle || !ptr) return err::InvalidValue;
  if (memcmp(handle, kTag, sizeof kTag) != 0) {
    LOG_ERROR("cudaIpcOpenMemHandle: the handle was not made by rgpu's cudaIpcGetMemHandle");
    return err::InvalidValue;
  }
  CudaError e = check_device(dev);
  if (e != err::Success) return e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  if (e = name_window(dev, l); e != err::Success) return e;
  const DeviceSpec& spec = devices_[dev].spec;
  IpcOpenMemHandleReq q{spec.gpu, spec.window_base, {}, 0};
  std::memcpy(q.token.data(), handle + kTokenAt, q.token.size());
  std::memcpy(&q.offset, handle + kOffsetAt, sizeof q.offset);
  IpcOpenMemHandleRep rep;
  if (e = l->call<IpcOpenMemHandleMsg>(q, &rep); e != err::Success) {
    LOG_ERROR(
        "cudaIpcOpenMemHandle on device %d ('%s') failed with error %d (RGPU_LOG=info shows "
        "the server's reason)",
        dev, spec.text.c_str(), e);
    return e;
  }
  const bool inside = rep.size > 0 && rep.base >= spec.window_base &&
                      rep.base - spec.window_base < spec.window_size &&
                      rep.size <= spec.window_size - (rep.base - spec.window_base) &&
                      rep.ptr >= rep.base && rep.ptr - rep.base < rep.size;
  // Not freeable: cudaFree of opened memory is an error, as with CUDA.
  if (!inside || !map_.add_device(DeviceRange{rep.base, rep.size, dev, false})) {
    LOG_ERROR("device %d ('%s'): the server mapped IPC memory of %llu bytes at 0x%llx, %s; refused",
              dev, spec.text.c_str(), static_cast<unsigned long long>(rep.size),
              static_cast<unsigned long long>(rep.base),
              inside ? "overlapping memory this process already knows"
                     : "outside the device's address window");
    l->call<IpcCloseMemHandleMsg>(IpcCloseMemHandleReq{spec.gpu, rep.base});
    return err::Unknown;
  }
  {
    std::lock_guard<std::mutex> lock(ipc_mu_);
    ipc_imports_.insert(rep.base);
  }
  *ptr = reinterpret_cast<void*>(rep.ptr);
  return err::Success;
}

CudaError Client::ipc_close_mem_handle(void* ptr) {
  auto r = ptr ? map_.find_device(u64(ptr)) : std::nullopt;
  {
    std::lock_guard<std::mutex> lock(ipc_mu_);
    if (!r || !ipc_imports_.erase(r->base)) {
      LOG_ERROR("cudaIpcCloseMemHandle: %p is not memory from cudaIpcOpenMemHandle", ptr);
      return err::InvalidValue;
    }
  }
  map_.remove_device(r->base);
  CudaError e;
  ServerLink* l = link(r->device, &e);
  if (!l) return e;
  return l->call<IpcCloseMemHandleMsg>(IpcCloseMemHandleReq{devices_[r->device].spec.gpu, r->base});
}

}  // namespace rgpu::client
