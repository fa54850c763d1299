#include "client/client.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "client/logs.h"
#include "client/notify.h"
#include "common/log.h"
#include "transport/memory.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {

uint64_t u64(const void* p) { return reinterpret_cast<uint64_t>(p); }

}  // namespace

Client& Client::get() {
  static Client* c = locate_client();  // never destroyed: CUDA calls may come from atexit handlers
  return *c;
}

Client* Client::make(bool configured) { return new Client(configured); }

bool Client::first_time(const std::string& what) {
  std::lock_guard<std::mutex> lock(once_mu_);
  return logged_once_.insert(what).second;
}

Client::Client(bool configured)
    : logs_(new Logs),  // never destroyed: used by late log lines and the callback thread
      notify_(new Notifications(*this)),
      managed_(new_managed_state()),
      per_thread_streams_(&this_thread_streams) {
  // The logs API keeps error and warning lines from now on (client/logs.h).
  bind_library(this);
  Config cfg;
  if (configured) cfg = load_config();
  eager_bytes_ = cfg.eager_bytes;
  small_ = std::make_unique<SmallAllocations>(cfg.small_alloc_max);
  local_sync_ = cfg.local_sync;
  std::map<std::pair<std::string, uint16_t>, ServerLink*> by_address;
  for (const DeviceSpec& d : cfg.devices) {
    Virtual v;
    v.spec = d;
    auto key = std::make_pair(d.host, d.port);
    auto it = by_address.find(key);
    if (it == by_address.end()) {
      links_.push_back(std::make_unique<ServerLink>(d.host, d.port, cfg.token, cfg.timeout_s));
      ServerLink* l = links_.back().get();
      l->set_failure_hook([this, l](const std::string& why) { event_link_lost(l, why); });
      it = by_address.emplace(key, links_.back().get()).first;
    }
    v.link = it->second;
    std::string why;
    v.window_reserved = map_.reserve_window(d.window_base, d.window_size, &why);
    if (!v.window_reserved)
      LOG_ERROR(
          "device %zu ('%s'): %s; its allocations will fail (set RGPU_VA_BASE to a free range)",
          devices_.size(), d.text.c_str(), why.c_str());
    devices_.push_back(std::move(v));
  }
  contexts_.set_devices(device_count());
  runtime_retained_ = std::make_unique<std::atomic<bool>[]>(devices_.size());
}

CudaError Client::name_window(int dev, ServerLink* l) {
  std::lock_guard<std::mutex> lock(window_mu_);
  Virtual& v = devices_[dev];
  if (v.window_named) return err::Success;
  if (!v.window_reserved) return err::MemoryAllocation;
  CudaError e = l->call<AddressWindowMsg>(
      AddressWindowReq{v.spec.gpu, v.spec.window_base, v.spec.window_size});
  if (e == err::Success) v.window_named = true;
  return e;
}

CudaError Client::check_device(int dev) const {
  return dev >= 0 && dev < device_count() ? err::Success : err::InvalidDevice;
}

int Client::current_device() const {
  const Context* c = contexts_.current();
  return c ? c->device : 0;
}

CudaError Client::set_current_device(int dev) {
  if (CudaError e = check_device(dev); e != err::Success) return e;
  // The runtime holds one reference to each primary context it has used (as NVIDIA's does).
  if (!runtime_retained_[dev].load(std::memory_order_relaxed) &&
      !runtime_retained_[dev].exchange(true)) {
    Context* ctx = nullptr;
    contexts_.primary_retain(dev, &ctx);
  }
  contexts_.set_current_primary(dev);
  return err::Success;
}

ServerLink* Client::link(int dev, CudaError* e) {
  // An earlier copy to another server may still be reading this device's memory.
  if (peer_owed_devices_.load(std::memory_order_acquire) != 0) settle_owed(dev);
  return link_only(dev, e);
}

ServerLink* Client::link_only(int dev, CudaError* e) {
  *e = check_device(dev);
  if (*e != err::Success) return nullptr;
  Virtual& v = devices_[dev];
  *e = v.link->ensure_connected();
  if (*e != err::Success) return nullptr;
  if (v.spec.gpu >= v.link->hello().gpu_count) {
    if (first_time("gpu_count"))
      LOG_ERROR("RGPU_SERVERS entry '%s': the server has %u GPU(s)", v.spec.text.c_str(),
                v.link->hello().gpu_count);
    *e = err::InvalidDevice;
    return nullptr;
  }
  return v.link;
}

CudaError Client::device_info(int dev, const DeviceInfo** out) {
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  std::lock_guard<std::mutex> lock(info_mu_);
  Virtual& v = devices_[dev];
  if (!v.info) {
    GetDeviceInfoRep rep;
    e = l->call<GetDeviceInfoMsg>(DeviceReq{v.spec.gpu}, &rep);
    if (e != err::Success) return e;
    auto info = std::make_unique<DeviceInfo>();
    info->name = rep.name;
    std::memcpy(info->uuid, rep.uuid.data(), 16);
    info->total_mem = rep.total_mem;
    for (auto& a : rep.attrs) info->attrs[a.id] = a.value;
    // Managed memory is emulated (client/managed.cc): host and device never touch it at once.
    info->attrs[83] = 1;   // cudaDevAttrManagedMemory
    info->attrs[88] = 0;   // cudaDevAttrPageableMemoryAccess
    info->attrs[89] = 0;   // cudaDevAttrConcurrentManagedAccess
    info->attrs[100] = 0;  // cudaDevAttrPageableMemoryAccessUsesHostPageTables
    info->attrs[101] = 0;  // cudaDevAttrDirectManagedMemAccessFromHost
    // Virtual memory management (client/vmm.cc): device memory, no fabric handles.
    info->attrs[128] = 0;  // CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED
    info->attrs[141] = 0;  // CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
    v.info = std::move(info);
  }
  *out = v.info.get();
  return err::Success;
}

CudaError Client::driver_version(int dev, int* version) {
  CudaError e;
  ServerLink* l = link(dev, &e);
  *version = l ? l->hello().driver_version : 0;
  return e;
}

CudaError Client::synchronize(int dev) {
  const uint64_t owed = owed_mark();
  CudaError e = forward<DeviceSynchronizeMsg>(dev, {});
  CudaError le;
  if (e == err::Success)
    if (ServerLink* l = link_only(dev, &le))
      l->note_idle(devices_[dev].spec.gpu, ServerLink::kAllStreams);
  if (e == err::Success) managed_synchronized(dev);
  if (e == err::Success) owed_settled_by(dev, owed);  // copies to `dev` between servers are over
  return e;
}

CudaError Client::reset(int dev) {
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  // The server frees everything of the GPU, in every window: what the client knows of each
  // virtual device naming it goes too.
  std::vector<int> gone;
  for (size_t d = 0; d < devices_.size(); ++d)
    if (devices_[d].link == l && devices_[d].spec.gpu == devices_[dev].spec.gpu)
      gone.push_back(static_cast<int>(d));
  for (int d : gone) {
    forget_pools(d);
    managed_forget_device(d);
    vmm_forget_device(d);
    for (const DeviceRange& r : map_.device_allocations(d)) map_.remove_device(r.base);
    modules_.forget_device(d);
    small_->forget_device(d);
  }
  e = l->call<DeviceResetMsg>(DeviceReq{devices_[dev].spec.gpu});
  if (e == err::Success) l->clear_sticky();  // the server's session is clean again
  // Again once the server has reset: a resolution another thread had in flight may have been
  // answered before the reset and kept since (client/module_loading.cc drops it on the epoch).
  for (int d : gone) modules_.forget_device(d);
  return e;
}

CudaError Client::mem_get_info(int dev, size_t* free, size_t* total) {
  MemGetInfoRep rep;
  CudaError e = forward<MemGetInfoMsg>(dev, {}, &rep);
  if (e == err::Success) {
    if (free) *free = rep.free;
    if (total) *total = rep.total;
  }
  return e;
}

CudaError Client::malloc(int dev, size_t size, void** ptr) {
  if (!ptr) return err::InvalidValue;
  if (size == 0) {
    *ptr = nullptr;
    return err::Success;
  }
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  if (e = name_window(dev, l); e != err::Success) return e;
  if (small_->serves(size) && small_chunk(dev, l, size, ptr, &e)) return e;
  const DeviceSpec& spec = devices_[dev].spec;
  MallocRep rep;
  e = l->call<MallocMsg>(MallocReq{spec.gpu, size, spec.window_base}, &rep);
  if (e != err::Success) {
    if (rep.ptr) l->call<FreeMsg>(FreeReq{spec.gpu, rep.ptr});  // (an earlier failure came back)
    return e;
  }
  if (small_->overlaps(rep.ptr, size) || !adopt_allocation(dev, rep.ptr, size, "an allocation")) {
    l->call<FreeMsg>(FreeReq{spec.gpu, rep.ptr});
    return err::MemoryAllocation;
  }
  *ptr = reinterpret_cast<void*>(rep.ptr);
  return err::Success;
}

bool Client::small_chunk(int dev, ServerLink* l, size_t size, void** ptr, CudaError* e) {
  if (!l->knows(MsgId::SmallReclaim)) return false;  // an older server: no reclaims
  // An error the link holds goes to the program through the server's own allocation (as CUDA's
  // cudaMalloc returns a sticky error).
  if (!l->clean()) return false;
  const DeviceSpec& spec = devices_[dev].spec;
  bool reclaimable = false;
  uint64_t p = small_->take(dev, size, &reclaimable);
  if (!p && reclaimable) {  // chunks wait for the GPU to be past the work before their frees
    SmallReclaimRep rep;
    const uint64_t epoch = small_->begin_reclaim(dev);
    *e = l->call<SmallReclaimMsg>(SmallReclaimReq{spec.gpu, spec.window_base, epoch}, &rep);
    if (*e != err::Success) return true;  // (an earlier failure, reported here as CUDA would)
    small_->finish_reclaim(dev, rep.complete);
    p = small_->take(dev, size, nullptr);
  }
  if (!p) {  // none is free now: a new slab (never a wait for the GPU)
    if (small_->slabs_refused(dev)) return false;  // the server's own allocation may still fit
    const uint64_t slab = SmallAllocations::kSlabBytes;
    MallocRep rep;
    const CudaError me = l->call<MallocMsg>(MallocReq{spec.gpu, slab, spec.window_base}, &rep);
    const bool inside = rep.ptr >= spec.window_base &&
                        rep.ptr - spec.window_base < spec.window_size &&
                        slab <= spec.window_size - (rep.ptr - spec.window_base);
    const bool known = map_.overlaps_known(rep.ptr, slab) || small_->overlaps(rep.ptr, slab);
    if (me != err::Success || !inside || known) {
      if (rep.ptr) {  // allocated (an earlier failure came with the reply) or misplaced
        if (me == err::Success)
          LOG_ERROR(
              "device %d ('%s'): the server placed a slab at 0x%llx, outside the device's "
              "address window or over memory this process knows; refused",
              dev, spec.text.c_str(), static_cast<unsigned long long>(rep.ptr));
        l->call<FreeMsg>(FreeReq{spec.gpu, rep.ptr});
      } else if (me == err::MemoryAllocation) {  // (a limit, or the GPU is full): until memory
        small_->refuse_slabs(dev);  // is freed, allocations ask the server (a round trip each)
        return false;
      }
      *e = me != err::Success ? me : err::MemoryAllocation;
      return true;
    }
    p = small_->add_slab(dev, rep.ptr, size);
    if (!p) {  // (another thread added a slab there meanwhile)
      l->call<FreeMsg>(FreeReq{spec.gpu, rep.ptr});
      *e = err::MemoryAllocation;
      return true;
    }
  }
  if (!adopt_allocation(dev, p, size, "a small allocation")) {
    uint64_t slab = 0;
    small_->mark_exported(p);  // retires the slab: that chunk is never handed out again
    small_->release(p, &slab);
    if (slab) l->call<FreeMsg>(FreeReq{spec.gpu, slab});
    *e = err::MemoryAllocation;
    return true;
  }
  *ptr = reinterpret_cast<void*>(p);
  *e = err::Success;
  return true;
}

bool Client::adopt_allocation(int dev, uint64_t ptr, size_t size, const char* what) {
  // Nothing from a server is trusted: the allocation must lie in the device's window, clear of
  // every range this process knows.
  const DeviceSpec& spec = devices_[dev].spec;
  const bool inside = ptr >= spec.window_base && ptr - spec.window_base < spec.window_size &&
                      size <= spec.window_size - (ptr - spec.window_base);
  if (inside && map_.add_device(DeviceRange{ptr, size, dev})) return true;
  LOG_ERROR("device %d ('%s'): the server placed %s of %zu bytes at 0x%llx, %s; refused", dev,
            spec.text.c_str(), what, size, static_cast<unsigned long long>(ptr),
            inside ? "overlapping memory this process already knows"
                   : "outside the device's address window");
  return false;
}

CudaError Client::free(void* ptr) {
  if (!ptr) return err::Success;
  if (CudaError e; pool_import_release(ptr, &e)) return e;  // cudaMemPoolImportPointer's
  if (CudaError ge; graph_mem_free(ptr, &ge)) return ge;    // graph memory (client/graphs4.cc)
  auto r = map_.find_device(u64(ptr));
  if (!r || r->base != u64(ptr) || !r->freeable) return err::InvalidValue;
  // Copies between servers through this GPU's memory end first; one that failed makes the free
  // return its error (as CUDA's free returns earlier asynchronous errors), once it is done.
  const CudaError settled = settle_peer_copies(r->device);
  if (is_pool_allocation(r->base)) {  // cudaFree of stream-ordered memory: synchronizes
    const Stream legacy{r->device, 0};
    CudaError e = free_async(ptr, legacy);
    if (e == err::Success) e = synchronize(r->device);
    return e == err::Success ? settled : e;
  }
  managed_forget(r->base);
  map_.remove_device(r->base);
  CudaError e;
  ServerLink* l = link(r->device, &e);
  if (!l) return e;
  uint64_t free_ptr = r->base, slab = 0;
  bool exported = false;
  if (small_->release(r->base, &slab, &exported)) {  // a chunk: no message unless...
    const uint32_t gpu = devices_[r->device].spec.gpu;
    if (exported) l->call<IpcRevokeRangeMsg>(IpcRevokeRangeReq{gpu, r->base});  // its handle
    if (!slab) {
      // As CUDA's cudaFree returns an earlier asynchronous or a sticky error.
      const CudaError held = l->clean() ? err::Success : l->error_to_report();
      return held != err::Success ? held : settled;
    }
    free_ptr = slab;  // ... its slab goes back
  } else if (small_->slab_of(r->base, &slab)) {
    return err::InvalidValue;  // inside a slab but no chunk in use (never the whole slab)
  }
  small_->allow_slabs(r->device);  // memory goes back: a slab may fit again
  e = l->call<FreeMsg>(FreeReq{devices_[r->device].spec.gpu, free_ptr});
  return e == err::Success ? settled : e;
}

CudaError Client::resolve_kind(const void* dst, const void* src, CopyKind& kind) const {
  if (kind != CopyKind::Default) return err::Success;
  bool d = map_.find_device(u64(dst)).has_value();
  bool s = map_.find_device(u64(src)).has_value();
  kind = d ? (s ? CopyKind::DeviceToDevice : CopyKind::HostToDevice)
           : (s ? CopyKind::DeviceToHost : CopyKind::HostToHost);
  return err::Success;
}

CudaError Client::plan_copy(const void* dst, size_t dpitch, const void* src, size_t spitch,
                            size_t width, size_t height, CopyKind kind, CopyPlan* plan) const {
  if (static_cast<int>(kind) < 0 || static_cast<int>(kind) > 4) return err::InvalidMemcpyDirection;
  if (height > 1 && (width > dpitch || width > spitch)) return err::InvalidPitchValue;
  plan->empty = width == 0 || height == 0;
  if (plan->empty) return err::Success;
  if (!dst || !src) return err::InvalidValue;
  resolve_kind(dst, src, kind);
  // Page-locked host memory named as device memory is host memory, as CUDA treats it: under
  // unified addressing its device address is its host address (XLA reads a scalar it allocated
  // with cuMemHostAlloc through cuMemcpyDtoHAsync).
  const uint64_t dext = (height - 1) * dpitch + width, sext = (height - 1) * spitch + width;
  bool d_device = kind == CopyKind::DeviceToDevice || kind == CopyKind::HostToDevice;
  bool s_device = kind == CopyKind::DeviceToDevice || kind == CopyKind::DeviceToHost;
  if (d_device && !map_.find_device(u64(dst)) && page_locked_range(u64(dst), dext))
    d_device = false;
  if (s_device && !map_.find_device(u64(src)) && page_locked_range(u64(src), sext))
    s_device = false;
  kind = d_device ? (s_device ? CopyKind::DeviceToDevice : CopyKind::HostToDevice)
                  : (s_device ? CopyKind::DeviceToHost : CopyKind::HostToHost);
  plan->kind = kind;
  plan->d_ok = map_.device_range_ok(u64(dst), dext, &plan->ddev);
  plan->s_ok = map_.device_range_ok(u64(src), sext, &plan->sdev);
  plan->d_dev = map_.find_device(u64(dst)).has_value();
  plan->s_dev = map_.find_device(u64(src)).has_value();
  return err::Success;
}

bool Client::copy_shared(const void* host, uint64_t device_ptr, size_t n, bool to_device, int dev,
                         const Stream* stream, CudaError* result) {
  auto r = map_.find_host(u64(host));
  if (!r || !r->segment || u64(host) + n > r->base + r->size) return false;
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l || r->link != l) return false;
  MemcpyShmReq q{devices_[dev].spec.gpu, device_ptr, r->segment, u64(host) - r->base, n, to_device,
                 stream ? stream->id : 0};
  *result = stream ? l->call<MemcpyShmAsyncMsg>(q) : l->call<MemcpyShmMsg>(q);
  return true;
}

namespace {
constexpr size_t kBounceHalf = 8u << 20;
constexpr size_t kBounceMin = 4u << 20;

// One thread's memcpy does not keep up with the GPU's DMA: split large copies over a few threads.
void parallel_copy(char* dst, const char* src, size_t len) {
  static const unsigned n = std::max(1u, std::min(4u, std::thread::hardware_concurrency() / 2));
  if (n == 1 || len < (1u << 20)) {
    std::memcpy(dst, src, len);
    return;
  }
  std::thread helpers[4];
  size_t part = (len + n - 1) / n;
  for (unsigned i = 1; i < n; ++i) {
    size_t off = i * part;
    if (off < len)
      helpers[i] =
          std::thread([=] { std::memcpy(dst + off, src + off, std::min(part, len - off)); });
  }
  std::memcpy(dst, src, std::min(part, len));
  for (unsigned i = 1; i < n; ++i)
    if (helpers[i].joinable()) helpers[i].join();
}
}  // namespace

bool Client::copy_through_bounce(void* dst, uint64_t src, size_t n, int dev, CudaError* result) {
  if (n < kBounceMin) return false;
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l || !l->shared_memory()) return false;
  Bounce* b;
  {
    std::lock_guard<std::mutex> lock(bounces_mu_);
    auto& slot = bounces_[l];
    if (!slot) {
      auto nb = std::make_unique<Bounce>();
      transport::MemoryRegion r;
      uint64_t key = 0;
      try {
        r = transport::allocate_region("rgpu-bounce", 2 * kBounceHalf);
      } catch (const transport::TransportError& ex) {
        LOG_INFO("no bounce segment: %s", ex.what());
        return false;
      }
      if (l->register_memory(devices_[dev].spec.gpu, r, key) != err::Success) {
        transport::free_region(r);
        return false;
      }
      close(r.fd);
      nb->base = static_cast<char*>(r.base);
      nb->segment = key;
      slot = std::move(nb);
    }
    b = slot.get();
  }
  std::lock_guard<std::mutex> lock(b->mu);
  const uint32_t gpu = devices_[dev].spec.gpu;
  auto dma = [&](size_t chunk) {  // device -> half (chunk % 2) of the bounce segment
    size_t off = chunk * kBounceHalf, len = std::min(kBounceHalf, n - off);
    return l->call<MemcpyShmMsg>(
        MemcpyShmReq{gpu, src + off, b->segment, (chunk % 2) * kBounceHalf, len, false, 0});
  };
  const size_t chunks = (n + kBounceHalf - 1) / kBounceHalf;
  *result = dma(0);
  for (size_t c = 0; c < chunks && *result == err::Success; ++c) {
    CudaError next = err::Success;
    std::thread ahead;
    if (c + 1 < chunks) ahead = std::thread([&] { next = dma(c + 1); });
    size_t off = c * kBounceHalf, len = std::min(kBounceHalf, n - off);
    parallel_copy(static_cast<char*>(dst) + off, b->base + (c % 2) * kBounceHalf, len);
    if (ahead.joinable()) ahead.join();
    *result = next;
  }
  return true;
}

CudaError Client::memcpy(void* dst, const void* src, size_t n, CopyKind kind) {
  return memcpy2d(dst, n, src, n, n, 1, kind);
}

void copy_rows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
               size_t height) {
  for (size_t row = 0; row < height; ++row)
    memmove(static_cast<char*>(dst) + row * dpitch, static_cast<const char*>(src) + row * spitch,
            width);
}

CudaError Client::memcpy2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                           size_t height, CopyKind kind) {
  CopyPlan plan;
  managed_copy_kind(dst, src, &kind);
  if (CudaError e = plan_copy(dst, dpitch, src, spitch, width, height, kind, &plan);
      e != err::Success || plan.empty)
    return e;
  if (CudaError e =
          managed_copy(dst, (height - 1) * dpitch + width, src, (height - 1) * spitch + width);
      e != err::Success)
    return e;
  kind = plan.kind;
  const bool d_ok = plan.d_ok, s_ok = plan.s_ok, d_dev = plan.d_dev, s_dev = plan.s_dev;
  const int ddev = plan.ddev, sdev = plan.sdev;

  switch (kind) {
    case CopyKind::HostToHost: {
      if (d_dev || s_dev) return err::InvalidValue;
      // Page-locked memory the GPU may write (a kernel through unified addressing, a copy still
      // on its way to this process): after the legacy stream's earlier work, as CUDA's copy.
      // (Not on a callback thread, where CUDA calls are not allowed: as before, at once.)
      if (!on_callback_thread() && (page_locked_range(u64(dst), (height - 1) * dpitch + width) ||
                                    page_locked_range(u64(src), (height - 1) * spitch + width)))
        if (CudaError e = stream_synchronize(Stream{current_device(), 0, 0, 0}); e != err::Success)
          return e;
      copy_rows(dst, dpitch, src, spitch, width, height);
      return err::Success;
    }
    case CopyKind::HostToDevice: {
      if (!d_ok || s_dev) return err::InvalidValue;
      CudaError shared;
      if (height == 1 && copy_shared(src, u64(dst), width, true, ddev, nullptr, &shared))
        return shared;
      CudaError e;
      ServerLink* l = link(ddev, &e);
      if (!l) return e;
      const uint32_t gpu = devices_[ddev].spec.gpu;
      if (height == 1 && width <= eager_bytes_) {
        // Eager: on the legacy stream, no reply to wait for (errors come at the next sync).
        iovec v{const_cast<void*>(src), width};
        return l->call<MemcpyHtoDAsyncMsg>(MemcpyHtoDAsyncReq{gpu, u64(dst), width, width, 1, 0},
                                           nullptr, &v, 1);
      }
      if (height == 1) {
        iovec v{const_cast<void*>(src), width};
        return l->call<MemcpyHtoDMsg>(MemcpyHtoDReq{gpu, u64(dst), width}, nullptr, &v, 1);
      }
      std::vector<iovec> rows(height);
      for (size_t i = 0; i < height; ++i)
        rows[i] = {const_cast<char*>(static_cast<const char*>(src)) + i * spitch, width};
      return l->call<Memcpy2DHtoDMsg>(Memcpy2DHtoDReq{gpu, u64(dst), dpitch, width, height},
                                      nullptr, rows.data(), static_cast<int>(height));
    }
    case CopyKind::DeviceToHost: {
      if (!s_ok || d_dev) return err::InvalidValue;
      CudaError shared;
      if (height == 1 && copy_shared(dst, u64(src), width, false, sdev, nullptr, &shared))
        return shared;
      if (height == 1 && copy_through_bounce(dst, u64(src), width, sdev, &shared)) return shared;
      CudaError e;
      ServerLink* l = link(sdev, &e);
      if (!l) return e;
      const uint32_t gpu = devices_[sdev].spec.gpu;
      if (height == 1) {
        iovec v{dst, width};
        CudaError ce =
            l->call<MemcpyDtoHMsg>(MemcpyDtoHReq{gpu, u64(src), width}, nullptr, nullptr, 0, &v, 1);
        if (ce == err::Success) l->note_idle(gpu, 0);  // after the legacy stream's work
        return ce;
      }
      std::vector<iovec> rows(height);
      for (size_t i = 0; i < height; ++i) rows[i] = {static_cast<char*>(dst) + i * dpitch, width};
      return l->call<Memcpy2DDtoHMsg>(Memcpy2DDtoHReq{gpu, u64(src), spitch, width, height},
                                      nullptr, nullptr, 0, rows.data(), static_cast<int>(height));
    }
    case CopyKind::DeviceToDevice: {
      if (!d_ok || !s_ok) return err::InvalidValue;
      if (ddev != sdev) {
        if (height > 1 && devices_[ddev].link != devices_[sdev].link)
          return memcpy_across(dst, ddev, dpitch, src, sdev, spitch, width, height, nullptr);
        if (height > 1) return err::NotSupported;
        // Between two GPUs: on the destination's legacy stream, synchronously like cudaMemcpy.
        return memcpy_peer(dst, ddev, src, sdev, width, nullptr);
      }
      CudaError e;
      ServerLink* l = link(ddev, &e);
      if (!l) return e;
      const uint32_t gpu = devices_[ddev].spec.gpu;
      if (height == 1) return l->call<MemcpyDtoDMsg>(MemcpyDtoDReq{gpu, u64(dst), u64(src), width});
      return l->call<Memcpy2DDtoDMsg>(
          Memcpy2DDtoDReq{gpu, u64(dst), dpitch, u64(src), spitch, width, height});
    }
    case CopyKind::Default:
      break;
  }
  return err::InvalidMemcpyDirection;
}

CudaError Client::memset(void* ptr, int value, size_t n) {
  if (n == 0) return err::Success;
  int dev = -1;
  if (!map_.device_range_ok(u64(ptr), n, &dev)) {
    if (page_locked_range(u64(ptr), n)) {
      const uint8_t byte = static_cast<uint8_t>(value);
      return fill_host(u64(ptr), n, n, &byte, 1, n, 1, 1, nullptr);
    }
    return refuse_memset(u64(ptr), n, -1);
  }
  if (CudaError m = managed_before_access(u64(ptr), n, true); m != err::Success) return m;
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  return l->call<MemsetMsg>(
      MemsetReq{devices_[dev].spec.gpu, u64(ptr), static_cast<uint8_t>(value), n});
}

CudaError Client::host_alloc(void** ptr, size_t size, unsigned flags) {
  if (!ptr) return err::InvalidValue;
  if (size == 0) {
    *ptr = nullptr;
    return err::Success;
  }
  // With a co-located server the memory is a segment both map, page-locked for the GPU by the
  // server: copies to and from it are one DMA.  Otherwise it is ordinary memory of this process.
  const int dev = current_device();
  CudaError e;
  ServerLink* l = check_device(dev) == err::Success ? link(dev, &e) : nullptr;
  if (l && l->shared_memory()) {
    try {  // a sealed segment: the server refuses one that could shrink under it
      transport::MemoryRegion r = transport::allocate_region("rgpu-pinned", size);
      uint64_t key = 0;
      if (l->register_memory(devices_[dev].spec.gpu, r, key) == err::Success) {
        close(r.fd);
        bool mapped = false;  // kernels may use the pointer (client/pools.cc)
        CudaError m = map_shared_segment(l, dev, key, &r.base, r.size, &mapped);
        if (m == err::Success && (mapped || !(flags & 0x02))) {
          map_.add_host(HostRange{u64(r.base), size, flags, false, dev, key, l, mapped});
          *ptr = r.base;
          return err::Success;
        }
        l->call<HostShmUnregisterMsg>(HostShmUnregisterReq{key});
        munmap(r.base, r.size);
        if (m != err::Success) return m;
        // cudaHostAllocMapped that the session could map nowhere: the stand-in TCP uses.
        LOG_WARN(
            "cudaHostAlloc(cudaHostAllocMapped): the rgpud session could not map the shared "
            "memory for its GPU; managed memory stands in, as over TCP");
        return host_alloc_emulated(dev, size, flags, ptr);
      }
      transport::free_region(r);
    } catch (const transport::TransportError& ex) {
      LOG_INFO("page-locked memory is not shared: %s", ex.what());
    }
  }
  // cudaHostAllocMapped: a remote GPU cannot reach this process's memory; managed memory stands in.
  if (flags & 0x02) return host_alloc_emulated(dev, size, flags, ptr);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return err::MemoryAllocation;
  map_.add_host(HostRange{u64(p), size, flags, false, dev});
  *ptr = p;
  return err::Success;
}

CudaError Client::host_free(void* ptr) {
  if (!ptr) return err::Success;
  uint64_t base = 0;
  if (emulated_mapped(ptr, &base, nullptr)) {
    if (base != u64(ptr)) return err::InvalidValue;
    {
      std::lock_guard<std::mutex> lock(emulated_mu_);
      emulated_mapped_.erase(base);
    }
    return free(ptr);
  }
  auto r = map_.remove_host(u64(ptr));
  if (!r) return err::InvalidValue;
  if (r->registered) {
    map_.add_host(*r);
    return err::InvalidValue;
  }
  if (r->segment) {
    auto* l = static_cast<ServerLink*>(const_cast<void*>(r->link));
    l->call<HostShmUnregisterMsg>(HostShmUnregisterReq{r->segment});
  }
  // An asynchronous copy into it whose bytes are still on their way (over TCP) is written first,
  // as CUDA's cudaFreeHost waits for the work before it: the devices of a link with such a copy
  // are synchronized (the server keeps the link alive meanwhile, and its reply comes after the
  // bytes), then the last bytes are waited for.  Not on a callback thread (a stream runs it).
  if (!on_callback_thread())
    for (size_t i = 0; i < links_.size(); ++i) {
      ServerLink* l = links_[i].get();
      if (!l->async_data_into(r->base, r->size)) continue;
      for (size_t d = 0; d < devices_.size(); ++d)
        if (devices_[d].link == l) synchronize(static_cast<int>(d));
      l->wait_async_data_outside(r->base, r->size);
    }
  munmap(ptr, r->size);
  return err::Success;
}

CudaError Client::host_register(void* ptr, size_t size, unsigned flags) {
  if (!ptr || size == 0) return err::InvalidValue;
  if (map_.find_device(u64(ptr))) return err::InvalidValue;
  if (flags & 0x02) {  // cudaHostRegisterMapped
    LOG_ERROR(
        "cudaHostRegister(cudaHostRegisterMapped): a remote GPU cannot map this process's "
        "ordinary memory; allocate it with cudaHostAlloc(cudaHostAllocMapped) instead");
    return err::NotSupported;
  }
  if (!map_.add_host(HostRange{u64(ptr), size, flags, true, current_device()}))
    return err::HostMemoryAlreadyRegistered;
  return err::Success;
}

CudaError Client::host_unregister(void* ptr) {
  auto r = map_.find_host(u64(ptr));
  if (!r || !r->registered || r->base != u64(ptr)) return err::HostMemoryNotRegistered;
  map_.remove_host(r->base);
  return err::Success;
}

PointerInfo Client::pointer_info(const void* p) const {
  if (uint64_t base = 0; emulated_mapped(p, &base, nullptr)) {  // host memory, as natively
    auto d = map_.find_device(base);
    if (d) return {MemoryType::Host, d->device, base, true, d->size, d->id};
  }
  if (auto d = map_.find_device(u64(p)))
    return {is_managed(d->base) ? MemoryType::Managed : MemoryType::Device,
            d->device,
            d->base,
            false,
            d->size,
            d->id};
  if (auto h = map_.find_host(u64(p)))
    return {MemoryType::Host, h->device, h->base, h->mapped, h->size, h->id};
  return {};
}

}  // namespace rgpu::client
