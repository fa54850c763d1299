// Stream-ordered allocation (memory pools, server/mem_pools.h) and mapped page-locked memory: the
// handlers of the pools group.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/log.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {

Status invalid(std::string what) { return Status::fail(err::InvalidValue, std::move(what)); }

std::string hex(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

MemPools& Session::pools() {
  if (pools_) return *pools_;
  PoolOps ops;
  // What pools hold from the heap (cached blocks too) counts against --client-mem-limit; a
  // refused charge is an allocation failure, after which the pools give back cached blocks.
  // heap_mu_: a waiter may be freeing (drain_frees) meanwhile.
  ops.heap_alloc = [this](uint32_t dev, uint64_t window, uint64_t size, uint64_t& ptr) {
    if (Status s = quota_.charge(Hold::Pool, dev, size,
                                 "a memory pool taking " + std::to_string(size) + " bytes");
        !s.ok())
      return s;
    Status s;
    {
      std::lock_guard<std::timed_mutex> lock(heap_mu_);
      s = windows_.alloc(dev, window, size, ptr);
    }
    if (!s.ok()) quota_.release(Hold::Pool, dev, size);
    return s;
  };
  ops.heap_free = [this](uint32_t dev, uint64_t ptr, uint64_t size) {
    quota_.release(Hold::Pool, dev, size);
    Status s;
    {
      std::lock_guard<std::timed_mutex> lock(heap_mu_);
      s = windows_.free(dev, ptr);
    }
    if (!s.ok())
      LOG_WARN("returning pool memory at %s to the heap failed: %s", hex(ptr).c_str(),
               s.message.c_str());
  };
  // A block in a mapping shared through CUDA IPC is not handed out again (DeviceHeap::share).
  ops.reusable = [this](uint32_t dev, uint64_t ptr) {
    std::lock_guard<std::timed_mutex> lock(heap_mu_);
    return !windows_.shared(dev, ptr);
  };
  ops.record = [this](uint32_t dev, uint64_t stream, uint64_t& event) {
    const int d = static_cast<int>(dev);
    if (Status s = acquire_event(d, event); !s.ok()) return s;
    Status s = exec_.event_record(d, event, stream);
    if (!s.ok()) release_event(d, event);
    return s;
  };
  ops.done = [this](uint32_t dev, uint64_t event) {
    return exec_.event_query(static_cast<int>(dev), event).code != err::NotReady;
  };
  ops.release = [this](uint32_t dev, uint64_t event) {
    release_event(static_cast<int>(dev), event);
  };
  ops.wait = [this](uint32_t dev, uint64_t stream, uint64_t event) {
    return exec_.stream_wait_event(static_cast<int>(dev), stream, event);
  };
  pools_ = std::make_unique<MemPools>(std::move(ops));
  return *pools_;
}

Status Session::on(MallocAsyncMsg, const MallocAsyncReq& q, MallocAsyncRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  uint64_t stream = 0;
  if (Status s = stream_of(q.device, q.stream, stream); !s.ok()) return s;
  if (q.size == 0) return invalid("zero-byte stream-ordered allocation");
  if (!quota_.fits(q.size))  // every GPU's cached blocks count: they go back first
    for (size_t d = 0; d < allocs_.size(); ++d) pools().release_cached(static_cast<uint32_t>(d));
  Status s = pools().alloc(q.device, q.pool, q.window, stream, q.size, rep.ptr);
  // In the table (so copies and launches may name it) but not freeable by cudaFree's request.
  if (s.ok()) allocs_[q.device].add(rep.ptr, q.size, false);
  return s;
}

Status Session::on(FreeAsyncMsg, const FreeAsyncReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  uint64_t stream = 0;
  if (Status s = stream_of(q.device, q.stream, stream); !s.ok()) return s;
  uint64_t size = 0;
  Status s = pools().free(q.device, q.ptr, stream, size);
  if (s.ok()) {
    allocs_[q.device].remove(q.ptr);
    revoke_ipc_export(q.device, q.ptr);  // cudaMemPoolExportPointer's handle opens nothing now
  }
  return s;
}

Status Session::on(MemPoolCreateMsg, const MemPoolCreateReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  return pools().create(q.device, q.pool, q.window, q.max_size);
}

Status Session::on(MemPoolDestroyMsg, const MemPoolReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  return pools().destroy(q.device, q.pool);
}

Status Session::on(MemPoolSetAttributeMsg, const MemPoolAttrReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  return pools().set_attr(q.device, q.pool, q.attr, q.value);
}

Status Session::on(MemPoolGetAttributeMsg, const MemPoolAttrReq& q, MemPoolGetAttributeRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  return pools().get_attr(q.device, q.pool, q.attr, rep.value);
}

Status Session::on(MemPoolTrimToMsg, const MemPoolTrimToReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  return pools().trim(q.device, q.pool, q.keep);
}

// ---- mapped page-locked memory

Status Session::on(HostShmMapMsg, const HostShmMapReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  auto it = shared_.find(q.id);
  if (it == shared_.end()) return invalid("no such shared page-locked segment");
  SharedSegment& seg = it->second;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (q.addr == 0 || q.addr % page || q.addr >= AddressWindows::kUserTop ||
      seg.size > AddressWindows::kUserTop - q.addr)
    return invalid("mapped page-locked memory at " + hex(q.addr) +
                   ": not a page-aligned user address");
  if (reinterpret_cast<uint64_t>(seg.base) == q.addr) return Status::success();  // already there
  // Claim the client's address here without replacing anything of this process.
  void* hold = mmap(reinterpret_cast<void*>(q.addr), seg.size, PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (hold != reinterpret_cast<void*>(q.addr)) {
    int e = errno;
    if (hold != MAP_FAILED) munmap(hold, seg.size);  // a kernel without MAP_FIXED_NOREPLACE
    return Status::fail(err::NotSupported,
                        "cannot map page-locked memory for the GPU at the program's address " +
                            hex(q.addr) + " in the rgpud session: the range is taken there (" +
                            strerror(hold == MAP_FAILED ? e : EEXIST) + ")");
  }
  // No copy uses the segment yet: the client maps it before it hands the pointer out.
  exec_.host_unregister(seg.base);
  void* moved = mremap(seg.base, seg.size, seg.size, MREMAP_MAYMOVE | MREMAP_FIXED, hold);
  if (moved == MAP_FAILED) {
    int e = errno;
    munmap(hold, seg.size);
    exec_.host_register(seg.base, seg.size);
    return Status::fail(err::NotSupported, "moving the page-locked segment to " + hex(q.addr) +
                                               " in the rgpud session failed: " + strerror(e));
  }
  seg.base = static_cast<char*>(moved);
  if (Status s = exec_.host_register_mapped(moved, seg.size); !s.ok()) {
    exec_.host_register(moved, seg.size);  // copies still work; kernels may not use it
    return s;
  }
  return Status::success();
}

}  // namespace rgpu::server
