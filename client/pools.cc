// Stream-ordered allocation (memory pools live on the server: server/mem_pools.h) and mapped
// page-locked memory (shared segments mapped in the session at this process's addresses).
#include <sys/mman.h>

#include <algorithm>

#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {

uint64_t u64(const void* p) { return reinterpret_cast<uint64_t>(p); }

constexpr unsigned kHostAllocMapped = 0x02;  // cudaHostAllocMapped / cudaHostRegisterMapped

}  // namespace

Client::MemPool* Client::live_pool(MemPool* pool) {
  std::lock_guard<std::mutex> lock(pools_mu_);
  if (pools_.count(pool)) return pool;
  for (auto& d : default_pools_)
    if (d.get() == pool) return pool;
  return nullptr;
}

bool Client::is_pool_allocation(uint64_t ptr) {
  std::lock_guard<std::mutex> lock(pools_mu_);
  return pool_ptrs_.count(ptr) > 0;
}

CudaError Client::pool_on_server(int dev, uint64_t max_size, std::unique_ptr<MemPool>* out) {
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  if (e = name_window(dev, l); e != err::Success) return e;
  const DeviceSpec& spec = devices_[dev].spec;
  auto pool = std::make_unique<MemPool>(MemPool{dev, l->new_id()});
  e = l->call<MemPoolCreateMsg>(MemPoolCreateReq{spec.gpu, pool->id, spec.window_base, max_size});
  if (e == err::Success) *out = std::move(pool);
  return e;
}

// A virtual device's default pool is a pool of its own on the server (two virtual devices naming
// one GPU have two windows, hence two default pools), made at its first use.
CudaError Client::mem_pool_default(int dev, MemPool** out) {
  if (!out) return err::InvalidValue;
  if (check_device(dev) != err::Success) return err::InvalidDevice;
  std::lock_guard<std::mutex> once(default_pool_mu_);  // one creation per device
  {
    std::lock_guard<std::mutex> lock(pools_mu_);
    if (default_pools_.empty()) default_pools_.resize(devices_.size());
    if (auto& p = default_pools_[static_cast<size_t>(dev)]) {
      *out = p.get();
      return err::Success;
    }
  }
  std::unique_ptr<MemPool> p;
  if (CudaError e = pool_on_server(dev, 0, &p); e != err::Success) return e;
  std::lock_guard<std::mutex> lock(pools_mu_);
  *out = p.get();
  default_pools_[static_cast<size_t>(dev)] = std::move(p);
  return err::Success;
}

void Client::forget_pools(int dev) {
  std::lock_guard<std::mutex> lock(pools_mu_);
  for (const DeviceRange& r : map_.device_allocations(dev)) pool_ptrs_.erase(r.base);
  current_pool_.erase(dev);
  if (static_cast<size_t>(dev) < default_pools_.size()) default_pools_[dev].reset();
  for (auto it = pools_.begin(); it != pools_.end();) {
    if ((*it)->device != dev) {
      ++it;
      continue;
    }
    pool_access_.erase(*it);
    delete *it;
    it = pools_.erase(it);
  }
}

CudaError Client::mem_pool_current(int dev, MemPool** out) {
  if (!out) return err::InvalidValue;
  if (check_device(dev) != err::Success) return err::InvalidDevice;
  {
    std::lock_guard<std::mutex> lock(pools_mu_);
    auto it = current_pool_.find(dev);
    if (it != current_pool_.end()) {
      *out = it->second;
      return err::Success;
    }
  }
  return mem_pool_default(dev, out);
}

CudaError Client::mem_pool_set_current(int dev, MemPool* pool) {
  if (check_device(dev) != err::Success) return err::InvalidDevice;
  if (!live_pool(pool) || pool->imported) return err::InvalidValue;  // imported: no allocations
  if (pool->device != dev) {
    LOG_ERROR("cudaDeviceSetMemPool: the pool belongs to device %d, not device %d", pool->device,
              dev);
    return err::InvalidDevice;
  }
  std::lock_guard<std::mutex> lock(pools_mu_);
  current_pool_[dev] = pool;
  return err::Success;
}

CudaError Client::mem_pool_create(int dev, uint64_t max_size, MemPool** out) {
  if (!out) return err::InvalidValue;
  if (check_device(dev) != err::Success) return err::InvalidDevice;
  std::unique_ptr<MemPool> pool;
  if (CudaError e = pool_on_server(dev, max_size, &pool); e != err::Success) return e;
  std::lock_guard<std::mutex> lock(pools_mu_);
  *out = pool.release();
  pools_.insert(*out);
  return err::Success;
}

CudaError Client::mem_pool_destroy(MemPool* pool) {
  {
    std::lock_guard<std::mutex> lock(pools_mu_);
    if (!pools_.count(pool)) {
      for (auto& d : default_pools_)
        if (d.get() == pool) {
          LOG_ERROR("cudaMemPoolDestroy: a device's default memory pool cannot be destroyed");
          return err::InvalidValue;
        }
      return err::InvalidValue;
    }
    pools_.erase(pool);
    pool_access_.erase(pool);
    for (auto it = current_pool_.begin(); it != current_pool_.end();)
      it = it->second == pool ? current_pool_.erase(it) : std::next(it);
  }
  std::unique_ptr<MemPool> gone(pool);
  CudaError e;
  ServerLink* l = link(pool->device, &e);
  if (!l) return e;
  return l->call<MemPoolDestroyMsg>(MemPoolReq{devices_[pool->device].spec.gpu, pool->id});
}

CudaError Client::mem_pool_set_attr(MemPool* pool, uint32_t attr, uint64_t value) {
  if (!live_pool(pool)) return err::InvalidValue;
  CudaError e;
  ServerLink* l = link(pool->device, &e);
  if (!l) return e;
  return l->call<MemPoolSetAttributeMsg>(
      MemPoolAttrReq{devices_[pool->device].spec.gpu, pool->id, attr, value});
}

CudaError Client::mem_pool_get_attr(MemPool* pool, uint32_t attr, uint64_t* value) {
  if (!live_pool(pool) || !value) return err::InvalidValue;
  CudaError e;
  ServerLink* l = link(pool->device, &e);
  if (!l) return e;
  MemPoolGetAttributeRep rep;
  e = l->call<MemPoolGetAttributeMsg>(
      MemPoolAttrReq{devices_[pool->device].spec.gpu, pool->id, attr, 0}, &rep);
  if (e == err::Success) *value = rep.value;
  return e;
}

CudaError Client::mem_pool_trim(MemPool* pool, uint64_t keep) {
  if (!live_pool(pool)) return err::InvalidValue;
  CudaError e;
  ServerLink* l = link(pool->device, &e);
  if (!l) return e;
  return l->call<MemPoolTrimToMsg>(
      MemPoolTrimToReq{devices_[pool->device].spec.gpu, pool->id, keep});
}

CudaError Client::mem_pool_set_access(MemPool* pool, int dev, bool read_write) {
  if (!live_pool(pool)) return err::InvalidValue;
  if (check_device(dev) != err::Success) return err::InvalidDevice;
  if (dev == pool->device) {
    if (read_write) return err::Success;
    LOG_ERROR("cudaMemPoolSetAccess: a pool's own device (%d) cannot lose access to it", dev);
    return err::InvalidValue;
  }
  if (read_write) {
    // Another virtual device may use the memory where it names a GPU of the same server that
    // can reach the pool's GPU as a peer (pool memory is mapped for every such GPU).
    int can = 0;
    CudaError e;
    if (link(dev, &e) != link(pool->device, &e) ||
        can_access_peer(&can, dev, pool->device) != err::Success || !can) {
      LOG_ERROR("cudaMemPoolSetAccess: device %d cannot reach device %d's memory", dev,
                pool->device);
      return err::InvalidDevice;
    }
  }
  std::lock_guard<std::mutex> lock(pools_mu_);
  if (read_write)
    pool_access_[pool].insert(dev);
  else
    pool_access_[pool].erase(dev);
  return err::Success;
}

CudaError Client::mem_pool_get_access(MemPool* pool, int dev, bool* read_write) {
  if (!live_pool(pool) || !read_write) return err::InvalidValue;
  if (check_device(dev) != err::Success) return err::InvalidDevice;
  std::lock_guard<std::mutex> lock(pools_mu_);
  auto it = pool_access_.find(pool);
  *read_write = dev == pool->device || (it != pool_access_.end() && it->second.count(dev));
  return err::Success;
}

CudaError Client::malloc_async(void** ptr, size_t size, MemPool* pool, const Stream& s) {
  if (!ptr) return err::InvalidValue;
  if (pool && live_pool(pool) && pool->imported) {
    LOG_ERROR("cudaMallocFromPoolAsync: an imported pool makes no allocations");
    return err::InvalidValue;
  }
  if (size == 0) {
    *ptr = nullptr;
    return err::Success;
  }
  if (CudaError ge; graph_capture_alloc(ptr, size, s, &ge)) return ge;  // client/graphs4.cc
  if (!pool) {
    if (CudaError e = mem_pool_current(s.device, &pool); e != err::Success) return e;
  } else if (!live_pool(pool)) {
    return err::InvalidValue;
  }
  if (pool->device != s.device) {
    LOG_ERROR("cudaMallocFromPoolAsync: the pool belongs to device %d, the stream to device %d",
              pool->device, s.device);
    return err::InvalidValue;
  }
  const int dev = pool->device;
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  if (e = name_window(dev, l); e != err::Success) return e;
  const DeviceSpec& spec = devices_[dev].spec;
  MallocAsyncRep rep;
  e = l->call<MallocAsyncMsg>(MallocAsyncReq{spec.gpu, pool->id, spec.window_base, s.id, size},
                              &rep);
  if (e != err::Success) return e;
  if (!adopt_allocation(dev, rep.ptr, size, "a stream-ordered allocation")) {
    l->call<FreeAsyncMsg>(FreeAsyncReq{spec.gpu, rep.ptr, s.id});
    return err::MemoryAllocation;
  }
  {
    std::lock_guard<std::mutex> lock(pools_mu_);
    pool_ptrs_.insert(rep.ptr);
  }
  *ptr = reinterpret_cast<void*>(rep.ptr);
  return err::Success;
}

CudaError Client::free_async(void* ptr, const Stream& s) {
  if (!ptr) return err::InvalidValue;  // as CUDA: freeing null asynchronously is an error
  if (is_pool_import(ptr)) {  // cudaMemPoolImportPointer's: unmapped once the stream got there
    if (CudaError e = stream_synchronize(s); e != err::Success) return e;
    CudaError e = err::Success;
    pool_import_release(ptr, &e);
    return e;
  }
  if (CudaError ge; graph_capture_free(ptr, s, &ge)) return ge;  // client/graphs4.cc
  if (CudaError ge; graph_mem_free(ptr, &ge)) return ge;         // graph memory
  auto r = map_.find_device(u64(ptr));
  if (!r || r->base != u64(ptr)) return err::InvalidValue;
  if (!is_pool_allocation(r->base)) {
    // cudaFreeAsync of cudaMalloc memory: CUDA frees it in stream order; the server frees
    // synchronously once the stream got there.
    if (CudaError e = stream_synchronize(s); e != err::Success) return e;
    return free(ptr);
  }
  if (r->device != s.device) {
    LOG_ERROR("cudaFreeAsync: the memory belongs to device %d, the stream to device %d", r->device,
              s.device);
    return err::InvalidValue;
  }
  {
    std::lock_guard<std::mutex> lock(pools_mu_);
    pool_ptrs_.erase(r->base);
  }
  map_.remove_device(r->base);
  CudaError e;
  ServerLink* l = link(r->device, &e);
  if (!l) return e;
  return l->call<FreeAsyncMsg>(FreeAsyncReq{devices_[r->device].spec.gpu, r->base, s.id});
}

// ---- mapped page-locked memory

namespace {

// An address range of `size` bytes free in this process, away from the usual places of mmap, the
// program and the address windows (0x5000'0000'0000 up), so most likely free in the session too.
// A PROT_NONE reservation of it; null when none was found.
void* reserve_elsewhere(size_t size, uint64_t seed) {
  constexpr uint64_t kLow = 0x100000000000ull, kHigh = 0x400000000000ull, kAlign = 2ull << 20;
  if (size == 0 || size > (kHigh - kLow) / 2) return nullptr;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  x ^= x >> 29;
  const uint64_t slots = (kHigh - kLow - size) / kAlign;
  void* want = reinterpret_cast<void*>(kLow + (x % slots) * kAlign);
  void* p = mmap(want, size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (p != want) {  // a kernel without MAP_FIXED_NOREPLACE put it elsewhere
    munmap(p, size);
    return nullptr;
  }
  return p;
}

}  // namespace

CudaError Client::map_shared_segment(ServerLink* l, int dev, uint64_t key, void** base, size_t size,
                                     bool* mapped) {
  *mapped = false;
  constexpr int kTries = 8;  // after the first: other addresses, free here, asked for there
  CudaError e = err::Success;
  for (int attempt = 0; attempt <= kTries; ++attempt) {
    if (attempt > 0) {
      // The session has this address taken (its libraries, thread stacks or driver mappings sit
      // where this process's do): move the segment here to a range free in this process, and ask
      // again.  No copy uses it yet: the pointer is not handed out.
      void* hold = reserve_elsewhere(size, u64(*base) ^ (key << 8) ^ attempt);
      if (!hold) continue;
      void* moved = mremap(*base, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, hold);
      if (moved == MAP_FAILED) {
        munmap(hold, size);
        continue;
      }
      *base = moved;
    }
    e = l->call<HostShmMapMsg>(HostShmMapReq{devices_[dev].spec.gpu, key, u64(*base)});
    if (e == err::Success) {
      *mapped = true;
      if (attempt > 0)
        LOG_INFO("mapped page-locked memory: moved to %p, free in this process and the session",
                 *base);
      return e;
    }
    if (e != err::NotSupported) break;  // not an address clash (see rgpud's log)
  }
  if (first_time("shared segment not mapped"))
    LOG_WARN(
        "mapped page-locked memory: the session could not map the segment for its GPU at any "
        "address tried (error %d); kernels cannot use such memory (said once)",
        e);
  return err::Success;  // the caller decides: a stand-in for cudaHostAllocMapped, or copies only
}

CudaError Client::host_alloc_emulated(int dev, size_t size, unsigned flags, void** ptr) {
  if (first_time("emulated mapped page-locked memory"))
    LOG_WARN(
        "cudaHostAlloc(cudaHostAllocMapped): device %d is reached over the network, so its "
        "kernels cannot reach this process's memory; managed memory stands in (one address on "
        "both sides, pages moved at kernel launches and synchronizations: a kernel and the host "
        "cannot use it at the same time, as they can with a local GPU or over shm)",
        dev);
  if (CudaError e = malloc_managed(dev, size, kAttachGlobal, ptr); e != err::Success) return e;
  std::lock_guard<std::mutex> lock(emulated_mu_);
  emulated_mapped_[reinterpret_cast<uint64_t>(*ptr)] = {size, flags};
  return err::Success;
}

bool Client::emulated_mapped(const void* p, uint64_t* base, unsigned* flags) const {
  const uint64_t a = reinterpret_cast<uint64_t>(p);
  std::lock_guard<std::mutex> lock(emulated_mu_);
  auto it = emulated_mapped_.upper_bound(a);
  if (it == emulated_mapped_.begin()) return false;
  --it;
  if (a - it->first >= it->second.first) return false;
  if (base) *base = it->first;
  if (flags) *flags = it->second.second;
  return true;
}

CudaError Client::host_device_pointer(void* host, void** device_ptr) {
  if (!device_ptr || !host) return err::InvalidValue;
  if (emulated_mapped(host, nullptr, nullptr)) {
    *device_ptr = host;  // managed memory: the same address on both sides
    return err::Success;
  }
  auto r = map_.find_host(u64(host));
  if (!r) return err::InvalidValue;
  if (!r->mapped) {
    LOG_ERROR("cudaHostGetDevicePointer(%p): %s", host,
              r->registered ? "memory registered with cudaHostRegister cannot be mapped into a "
                              "remote GPU; allocate it with cudaHostAlloc(cudaHostAllocMapped)"
                            : "this page-locked memory is not mapped for the GPU (mapped "
                              "page-locked memory needs a server on this machine, over shm)");
    return err::NotSupported;
  }
  *device_ptr = host;  // the session maps it at the same address (unified addressing)
  return err::Success;
}

CudaError Client::host_flags(void* host, unsigned* flags) {
  if (!flags || !host) return err::InvalidValue;
  if (unsigned f = 0; emulated_mapped(host, nullptr, &f)) {
    *flags = f | kHostAllocMapped;
    return err::Success;
  }
  auto r = map_.find_host(u64(host));
  if (!r) return err::InvalidValue;
  *flags = r->flags | (r->mapped ? kHostAllocMapped : 0);
  return err::Success;
}

}  // namespace rgpu::client
