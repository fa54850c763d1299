#include "backend/cuda/cuda_executor.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/cuda_arrays.h"
#include "backend/cuda/cuda_devmem.h"
#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/cuda_drvlibs.h"
#include "backend/cuda/cuda_graphs3.h"
#include "backend/cuda/cuda_graphs_cond.h"
#include "backend/cuda/cuda_ipc.h"
#include "backend/cuda/cuda_launch.h"
#include "backend/cuda/cuda_misc.h"
#include "backend/cuda/cuda_notify.h"
#include "backend/cuda/cuda_pools.h"
#include "backend/cuda/cuda_vmm.h"
#include "backend/gate.h"
#include "common/log.h"

namespace rgpu::backend {
namespace {

constexpr uint32_t kMaxAttr = 200;

// One end of a 2-D copy: server host memory or device memory.
struct Side {
  const void* host_ptr = nullptr;
  CUdeviceptr dev_ptr = 0;
  bool is_host = false;
  static Side host(const void* p) { return {p, 0, true}; }
  static Side device(uint64_t p) { return {nullptr, p, false}; }
};

CUDA_MEMCPY2D rect_copy(Side dst, uint64_t dpitch, Side src, uint64_t spitch, Rect r) {
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = src.is_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  c.srcHost = src.host_ptr;
  c.srcDevice = src.dev_ptr;
  c.srcPitch = spitch;
  c.dstMemoryType = dst.is_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  c.dstHost = const_cast<void*>(dst.host_ptr);
  c.dstDevice = dst.dev_ptr;
  c.dstPitch = dpitch;
  c.WidthInBytes = r.width;
  c.Height = r.height;
  return c;
}

class CudaExecutor final : public Executor {
 public:
  CudaExecutor(CudaDriver drv, int count) : drv_(drv), ctx_(count, nullptr), dev_(count, 0) {
    drv_.cuDriverGetVersion(&version_);
    for (int i = 0; i < count; ++i) drv_.cuDeviceGet(&dev_[i], i);
  }
  ~CudaExecutor() override {
    for (size_t i = 0; i < ctx_.size(); ++i)
      if (ctx_[i]) drv_.cuDevicePrimaryCtxRelease_v2(dev_[i]);
  }

  const char* name() const override { return "cuda"; }
  int device_count() const override { return static_cast<int>(ctx_.size()); }
  int driver_version() const override { return version_; }

  Status device_info(int dev, DeviceInfo& out) override {
    char name[256] = {};
    if (Status s = check(drv_.cuDeviceGetName(name, sizeof name - 1, dev_[dev])); !s.ok()) return s;
    out.name = name;
    CUuuid uuid;
    if (Status s = check(drv_.cuDeviceGetUuid_v2(&uuid, dev_[dev])); !s.ok()) return s;
    memcpy(out.uuid, uuid.bytes, 16);
    size_t total = 0;
    if (Status s = check(drv_.cuDeviceTotalMem_v2(&total, dev_[dev])); !s.ok()) return s;
    out.total_mem = total;
    for (uint32_t a = 1; a < kMaxAttr; ++a) {
      int v = 0;
      if (drv_.cuDeviceGetAttribute(&v, static_cast<CUdevice_attribute>(a), dev_[dev]) ==
          CUDA_SUCCESS)
        out.attrs.push_back({a, v});
    }
    return Status::success();
  }

  // ---- device memory through the virtual memory management API ----
  Status mem_granularity(int dev, uint64_t& granularity) override {
    CUmemAllocationProp prop = alloc_prop(dev, false);
    size_t g = 0;
    if (Status s =
            check(drv_.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        !s.ok())
      return s;
    granularity = g && (g & (g - 1)) == 0 ? g : 2ull << 20;
    return Status::success();
  }
  Status va_reserve(int dev, uint64_t base, uint64_t size) override {
    if (Status s = use(dev); !s.ok()) return s;
    CUdeviceptr p = 0;
    if (Status s = check(drv_.cuMemAddressReserve(&p, size, 0, base, 0)); !s.ok()) {
      s.message = "cannot reserve the address window at " + hex(base) + " (" +
                  std::to_string(size >> 20) + " MiB): " + s.message;
      return s;
    }
    if (p != base) {
      drv_.cuMemAddressFree(p, size);
      return Status::fail(err::MemoryAllocation,
                          "the driver reserved the address window asked at " + hex(base) + " at " +
                              hex(p) + " instead (is the range in use?)");
    }
    return Status::success();
  }
  Status va_release(int dev, uint64_t base, uint64_t size) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuMemAddressFree(base, size));
  }
  Status mem_map(int dev, uint64_t addr, uint64_t size) override {
    if (Status s = use(dev); !s.ok()) return s;
    // Ask for a shareable handle (so the memory can be exported later); a driver or system that
    // refuses it gets the plain kind from then on.
    CUmemGenericAllocationHandle h = 0;
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    if (!no_fd_handles_.load(std::memory_order_relaxed)) {
      CUmemAllocationProp prop = alloc_prop(dev, true);
      r = drv_.cuMemCreate(&h, size, &prop, 0);
      if (r != CUDA_SUCCESS && r != CUDA_ERROR_OUT_OF_MEMORY) {
        LOG_INFO(
            "cuMemCreate with a POSIX file descriptor handle refused (%s); without from now on",
            drv_.describe(r).c_str());
        no_fd_handles_.store(true, std::memory_order_relaxed);
      }
    }
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_OUT_OF_MEMORY) {
      CUmemAllocationProp prop = alloc_prop(dev, false);
      r = drv_.cuMemCreate(&h, size, &prop, 0);
    }
    if (Status s = check(r); !s.ok()) return s;
    if (Status s = check(drv_.cuMemMap(addr, size, 0, h, 0)); !s.ok()) {
      drv_.cuMemRelease(h);
      return s;
    }
    // The mapping keeps the memory alive; it is freed when the range is unmapped.
    drv_.cuMemRelease(h);
    std::vector<CUmemAccessDesc> access;
    for (int d = 0; d < device_count(); ++d) {
      int can = d == dev;
      if (d != dev && drv_.cuDeviceCanAccessPeer(&can, dev_[d], dev_[dev]) != CUDA_SUCCESS) can = 0;
      if (!can) continue;
      CUmemAccessDesc a{};
      a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      a.location.id = dev_[d];
      a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      access.push_back(a);
    }
    if (Status s = check(drv_.cuMemSetAccess(addr, size, access.data(), access.size())); !s.ok()) {
      drv_.cuMemUnmap(addr, size);
      return s;
    }
    return Status::success();
  }
  Status mem_unmap(int dev, uint64_t addr, uint64_t size) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuMemUnmap(addr, size));
  }
  // ---- graphs3 (cuda_graphs3.h)
  Status stream_set_attribute(int dev, uint64_t stream, const LaunchAttribute& a) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_stream_set_attribute(drv_, cu(stream), a);
  }
  Status stream_get_attribute(int dev, uint64_t stream, LaunchAttribute& a) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_stream_get_attribute(drv_, cu(stream), a);
  }
  // ---- ipc (cuda_ipc.h)
  Status ipc_mem_export(int dev, uint64_t ptr, int& fd, uint64_t& base, uint64_t& size,
                        uint32_t& kind) override {
    if (Status s = use(dev); !s.ok()) return s;
    kind = kCudaIpcKind;
    return cuda_ipc_export(drv_, ptr, fd, base, size);
  }
  Status ipc_mem_import(int dev, int fd, uint32_t kind, uint64_t addr, uint64_t span, uint64_t,
                        uint64_t) override {
    if (kind != kCudaIpcKind)
      return Status::fail(err::InvalidValue,
                          "the IPC handle's memory comes from another kind of backend");
    if (Status s = use(dev); !s.ok()) return s;
    // cuMemMap maps a cuMemCreate allocation from offset 0: the whole span.
    return cuda_ipc_import(drv_, dev_[dev], fd, addr, span);
  }
  Status ipc_mem_close(int dev, uint64_t addr, uint64_t size) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuMemUnmap(addr, size));
  }
  // ---- notify (cuda_notify.h)
  Status set_async_notify(int dev, Notify fn) override {
    return notify_.set(drv_, dev_[dev], dev, std::move(fn));
  }
  // ---- vmm (cuda_vmm.h)
  Status vmm_granularity(int dev, bool recommended, uint64_t& g) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_vmm_granularity(drv_, dev_[dev], recommended, g);
  }
  Status vmm_create(int dev, uint64_t size, bool shareable, uint64_t& handle) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_vmm_create(drv_, dev_[dev], size, shareable, handle);
  }
  Status vmm_release(int dev, uint64_t handle) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_vmm_release(drv_, handle);
  }
  Status vmm_map(int dev, uint64_t addr, uint64_t size, uint64_t offset, uint64_t handle) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_vmm_map(drv_, addr, size, offset, handle);
  }
  Status vmm_unmap(int dev, uint64_t addr, uint64_t size) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_vmm_unmap(drv_, addr, size);
  }
  Status vmm_set_access(int dev, uint64_t addr, uint64_t size, int peer, uint32_t flags) override {
    if (peer < 0 || peer >= device_count())
      return Status::fail(err::InvalidDevice, "cuMemSetAccess for a GPU this server lacks");
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_vmm_set_access(drv_, addr, size, dev_[peer], flags);
  }
  // ---- misc (cuda_misc.h)
  Status disable_peer_access(int dev, int peer) override {
    if (Status s = use(peer); !s.ok()) return s;
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuCtxDisablePeerAccess(ctx_[peer]));
  }
  Status flush_rdma_writes(int dev, uint32_t target, uint32_t scope) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(
        drv_.cuFlushGPUDirectRDMAWrites(static_cast<CUflushGPUDirectRDMAWritesTarget>(target),
                                        static_cast<CUflushGPUDirectRDMAWritesScope>(scope)));
  }
  Status atomic_caps(int dev, int peer, const std::vector<uint32_t>& ops,
                     std::vector<uint32_t>& caps) override {
    return cuda_atomic_caps(drv_, dev_[dev], peer < 0 ? 0 : dev_[peer], peer < 0, ops, caps);
  }
  Status ipc_event_export(int dev, uint64_t event, int& fd, uint32_t& kind) override {
    if (Status s = use(dev); !s.ok()) return s;
    kind = kCudaIpcEventKind;
    return cuda_ipc_event_export(drv_, reinterpret_cast<CUevent>(event), fd);
  }
  Status ipc_event_import(int dev, int fd, uint32_t kind, uint64_t& event) override {
    if (kind != kCudaIpcEventKind)
      return Status::fail(400, "the IPC event handle comes from another kind of backend");
    if (Status s = use(dev); !s.ok()) return s;
    CUevent e = nullptr;
    Status s = cuda_ipc_event_import(drv_, fd, e);
    event = reinterpret_cast<uint64_t>(e);
    return s;
  }
  Status mem_info(int dev, uint64_t& free, uint64_t& total) override {
    if (Status s = use(dev); !s.ok()) return s;
    size_t f = 0, t = 0;
    Status s = check(drv_.cuMemGetInfo_v2(&f, &t));
    free = f;
    total = t;
    return s;
  }

  Status copy_to_device(int dev, uint64_t dst, uint64_t dpitch, const void* src, uint64_t spitch,
                        Rect r) override {
    if (Status s = use(dev); !s.ok()) return s;
    if (r.height == 1) return check(drv_.cuMemcpyHtoD_v2(dst, src, r.width));
    CUDA_MEMCPY2D c = rect_copy(Side::device(dst), dpitch, Side::host(src), spitch, r);
    return check(drv_.cuMemcpy2D_v2(&c));
  }
  Status copy_to_host(int dev, void* dst, uint64_t dpitch, uint64_t src, uint64_t spitch,
                      Rect r) override {
    if (Status s = use(dev); !s.ok()) return s;
    if (r.height == 1) return check(drv_.cuMemcpyDtoH_v2(dst, src, r.width));
    CUDA_MEMCPY2D c = rect_copy(Side::host(dst), dpitch, Side::device(src), spitch, r);
    return check(drv_.cuMemcpy2D_v2(&c));
  }
  Status copy_on_device(int dev, uint64_t dst, uint64_t dpitch, uint64_t src, uint64_t spitch,
                        Rect r, uint64_t stream) override {
    if (Status s = use(dev); !s.ok()) return s;
    if (r.height == 1) return check(drv_.cuMemcpyDtoDAsync_v2(dst, src, r.width, cu(stream)));
    CUDA_MEMCPY2D c = rect_copy(Side::device(dst), dpitch, Side::device(src), spitch, r);
    return check(drv_.cuMemcpy2DAsync_v2(&c, cu(stream)));
  }
  Status memset(int dev, uint64_t ptr, uint8_t value, uint64_t size, uint64_t stream) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuMemsetD8Async(ptr, value, size, cu(stream)));
  }
  Status copy_to_device_async(int dev, uint64_t dst, uint64_t dpitch, const void* src,
                              uint64_t spitch, Rect r, uint64_t stream) override {
    if (Status s = use(dev); !s.ok()) return s;
    if (r.height == 1) return check(drv_.cuMemcpyHtoDAsync_v2(dst, src, r.width, cu(stream)));
    CUDA_MEMCPY2D c = rect_copy(Side::device(dst), dpitch, Side::host(src), spitch, r);
    return check(drv_.cuMemcpy2DAsync_v2(&c, cu(stream)));
  }
  Status copy_to_device_staged(int dev, uint64_t dst, const void* src, uint64_t size,
                               uint64_t stream) override {
    if (Status s = use(dev); !s.ok()) return s;
    // From pageable memory the driver copies the bytes into its own staging before it returns;
    // the source may be page-locked (a payload buffer), so it goes through a pageable scratch.
    thread_local std::vector<char> scratch;
    if (scratch.size() < size) scratch.resize(size);
    memcpy(scratch.data(), src, size);
    return check(drv_.cuMemcpyHtoDAsync_v2(dst, scratch.data(), size, cu(stream)));
  }
  Status copy_to_host_async(int dev, void* dst, uint64_t dpitch, uint64_t src, uint64_t spitch,
                            Rect r, uint64_t stream) override {
    if (Status s = use(dev); !s.ok()) return s;
    if (r.height == 1) return check(drv_.cuMemcpyDtoHAsync_v2(dst, src, r.width, cu(stream)));
    CUDA_MEMCPY2D c = rect_copy(Side::host(dst), dpitch, Side::device(src), spitch, r);
    return check(drv_.cuMemcpy2DAsync_v2(&c, cu(stream)));
  }
  Status copy_peer(int dst_dev, uint64_t dst, int src_dev, uint64_t src, uint64_t size,
                   int stream_dev, uint64_t stream) override {
    if (Status s = use(src_dev); !s.ok()) return s;
    if (Status s = use(dst_dev); !s.ok()) return s;
    if (Status s = use(stream_dev); !s.ok()) return s;
    return check(drv_.cuMemcpyPeerAsync(dst, ctx_[dst_dev], src, ctx_[src_dev], size, cu(stream)));
  }
  Status can_access_peer(int dev, int peer, int& can) override {
    return check(drv_.cuDeviceCanAccessPeer(&can, dev_[dev], dev_[peer]));
  }
  Status enable_peer_access(int dev, int peer) override {
    if (Status s = use(peer); !s.ok()) return s;
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuCtxEnablePeerAccess(ctx_[peer], 0));
  }

  Status stream_create(int dev, unsigned flags, int priority, uint64_t& stream) override {
    if (Status s = use(dev); !s.ok()) return s;
    CUstream st = nullptr;
    Status s = check(drv_.cuStreamCreateWithPriority(&st, flags, priority));
    stream = reinterpret_cast<uint64_t>(st);
    return s;
  }
  Status stream_destroy(int dev, uint64_t stream) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuStreamDestroy_v2(cu(stream)));
  }
  Status stream_synchronize(int dev, uint64_t stream) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuStreamSynchronize(cu(stream)));
  }
  Status stream_query(int dev, uint64_t stream) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuStreamQuery(cu(stream)));
  }
  Status stream_wait_event(int dev, uint64_t stream, uint64_t event) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuStreamWaitEvent(cu(stream), reinterpret_cast<CUevent>(event), 0));
  }
  Status stream_priority_range(int dev, int& least, int& greatest) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuCtxGetStreamPriorityRange(&least, &greatest));
  }
  Status event_create(int dev, unsigned flags, uint64_t& event) override {
    if (Status s = use(dev); !s.ok()) return s;
    CUevent e = nullptr;
    Status s = check(drv_.cuEventCreate(&e, flags));
    event = reinterpret_cast<uint64_t>(e);
    return s;
  }
  Status event_destroy(int dev, uint64_t event) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuEventDestroy_v2(reinterpret_cast<CUevent>(event)));
  }
  Status event_record(int dev, uint64_t event, uint64_t stream) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuEventRecord(reinterpret_cast<CUevent>(event), cu(stream)));
  }
  Status event_query(int dev, uint64_t event) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuEventQuery(reinterpret_cast<CUevent>(event)));
  }
  Status event_synchronize(int dev, uint64_t event) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuEventSynchronize(reinterpret_cast<CUevent>(event)));
  }
  Status event_elapsed(int dev, uint64_t start, uint64_t end, float& ms) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuEventElapsedTime_v2(&ms, reinterpret_cast<CUevent>(start),
                                            reinterpret_cast<CUevent>(end)));
  }
  Status host_func(int dev, uint64_t stream, void (*fn)(void*), void* arg) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuLaunchHostFunc(cu(stream), fn, arg));
  }

  // Gate words: mapped page-locked memory the GPU polls (cuStreamWaitValue32), so the stream waits
  // on the device and no host function blocks.  A driver without stream memory operations gets a
  // host function that waits on the CPU instead (nothing in rgpud needs that driver thread).
  uint32_t* alloc_gate_words(size_t count) override {
    if (!use(0).ok()) return nullptr;
    void* p = nullptr;
    if (drv_.cuMemHostAlloc(&p, count * sizeof(uint32_t),
                            CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS)
      return nullptr;
    ::memset(p, 0, count * sizeof(uint32_t));
    return static_cast<uint32_t*>(p);
  }
  void free_gate_words(uint32_t* words) override {
    if (words) drv_.cuMemFreeHost(words);
  }
  Status gate_wait(int dev, uint64_t stream, uint32_t* word, uint32_t value) override {
    if (Status s = use(dev); !s.ok()) return s;
    if (!cpu_gates_.load(std::memory_order_relaxed)) {
      CUdeviceptr d = 0;
      CUresult r = drv_.cuMemHostGetDevicePointer_v2(&d, word, 0);
      if (r == CUDA_SUCCESS)
        r = drv_.cuStreamWaitValue32_v2(cu(stream), d, value, CU_STREAM_WAIT_VALUE_GEQ);
      if (r == CUDA_SUCCESS) return Status::success();
      if (r != CUDA_ERROR_NOT_SUPPORTED) return check(r);
      LOG_NOTICE(
          "this driver has no stream memory operations: streams held for host callbacks "
          "wait in a host function");
      cpu_gates_.store(true, std::memory_order_relaxed);
    }
    auto* g = new std::pair<uint32_t*, uint32_t>(word, value);
    return check(drv_.cuLaunchHostFunc(
        cu(stream),
        [](void* a) {
          auto* g = static_cast<std::pair<uint32_t*, uint32_t>*>(a);
          wait_gate(g->first, g->second);
          delete g;
        },
        g));
  }
  Status gate_signal(int dev, uint64_t stream, uint32_t* word, uint32_t value) override {
    if (Status s = use(dev); !s.ok()) return s;
    if (!cpu_gates_.load(std::memory_order_relaxed)) {
      CUdeviceptr d = 0;
      if (CUresult r = drv_.cuMemHostGetDevicePointer_v2(&d, word, 0); r != CUDA_SUCCESS)
        return check(r);
      return cuda_stream_mem_ops(drv_, cu(stream),
                                 {MemOp{CU_STREAM_MEM_OP_WRITE_VALUE_32, 0, d, value}});
    }
    // No stream memory operations: a host function stores it (a store and a wakeup: no wait).
    auto* g = new std::pair<uint32_t*, uint32_t>(word, value);
    return check(drv_.cuLaunchHostFunc(
        cu(stream),
        [](void* a) {
          auto* g = static_cast<std::pair<uint32_t*, uint32_t>*>(a);
          open_gate(g->first, g->second);
          delete g;
        },
        g));
  }

  // ---- native graphs: capture, instantiate, launch (server/graphs_native.cc)
  Status capture_begin(int dev, uint64_t stream) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuStreamBeginCapture_v2(cu(stream), CU_STREAM_CAPTURE_MODE_RELAXED));
  }
  Status capture_end(int dev, uint64_t stream, uint64_t& exec) override {
    exec = 0;
    if (Status s = use(dev); !s.ok()) return s;
    CUgraph g = nullptr;
    if (Status s = check(drv_.cuStreamEndCapture(cu(stream), &g)); !s.ok()) return s;
    CUgraphExec x = nullptr;
    Status s = check(drv_.cuGraphInstantiateWithFlags(&x, g, 0));
    drv_.cuGraphDestroy(g);  // the executable graph keeps what it needs
    if (s.ok()) exec = reinterpret_cast<uint64_t>(x);
    return s;
  }
  Status native_launch(int dev, uint64_t exec, uint64_t stream) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuGraphLaunch(reinterpret_cast<CUgraphExec>(exec), cu(stream)));
  }
  void native_destroy(int dev, uint64_t exec) override {
    if (use(dev).ok()) drv_.cuGraphExecDestroy(reinterpret_cast<CUgraphExec>(exec));
  }
  Status cond_handle_create(int dev, uint64_t& graph, uint32_t value, uint32_t flags,
                            uint64_t& handle) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_cond_handle_create(drv_, current(dev), graph, value, flags, handle);
  }
  void native_graph_destroy(int dev, uint64_t graph) override {
    if (use(dev).ok()) drv_.cuGraphDestroy(reinterpret_cast<CUgraph>(graph));
  }
  Status capture_into(int dev, uint64_t stream, uint64_t graph, bool empty_first) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_capture_into(drv_, cu(stream), graph, empty_first);
  }
  Status capture_conditional(int dev, uint64_t stream, uint64_t handle, uint32_t type,
                             uint32_t size, std::vector<uint64_t>& bodies) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_capture_conditional(drv_, current(dev), cu(stream), handle, type, size, bodies);
  }
  Status capture_finish(int dev, uint64_t stream) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_capture_finish(drv_, cu(stream));
  }
  Status native_instantiate(int dev, uint64_t graph, uint64_t& exec) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_native_instantiate(drv_, graph, exec);
  }

  Status synchronize(int dev) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuCtxSynchronize());
  }
  Status reset(int dev) override {
    {
      std::lock_guard<std::mutex> lock(ctx_mu_);
      if (!ctx_[dev]) return Status::success();
      ctx_[dev] = nullptr;
    }
    drv_.cuDevicePrimaryCtxRelease_v2(dev_[dev]);
    return check(drv_.cuDevicePrimaryCtxReset_v2(dev_[dev]));
  }

  Status module_load(int dev, const uint8_t* image, size_t, const fatbin::ModuleInfo&,
                     uint64_t& module) override {
    if (Status s = use(dev); !s.ok()) return s;
    CUlibrary lib = nullptr;
    Status s = check(drv_.cuLibraryLoadData(&lib, image, nullptr, nullptr, 0, nullptr, nullptr, 0));
    module = reinterpret_cast<uint64_t>(lib);
    return s;
  }
  Status module_unload(int dev, uint64_t module) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuLibraryUnload(reinterpret_cast<CUlibrary>(module)));
  }
  Status kernel_get(int dev, uint64_t module, const std::string& name, uint64_t& kernel,
                    std::optional<fatbin::KernelLayout>& driver_layout) override {
    if (Status s = use(dev); !s.ok()) return s;
    CUkernel k = nullptr;
    if (Status s =
            check(drv_.cuLibraryGetKernel(&k, reinterpret_cast<CUlibrary>(module), name.c_str()));
        !s.ok())
      return s;
    kernel = reinterpret_cast<uint64_t>(k);
    // The driver's own layout: iterate until the index is out of range.
    fatbin::KernelLayout layout;
    for (size_t i = 0;; ++i) {
      size_t off = 0, size = 0;
      if (drv_.cuKernelGetParamInfo(k, i, &off, &size) != CUDA_SUCCESS) break;
      layout.params.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(size)});
    }
    driver_layout = std::move(layout);
    return Status::success();
  }
  Status global_get(int dev, uint64_t module, const std::string& name, uint64_t& addr,
                    uint64_t& size) override {
    if (Status s = use(dev); !s.ok()) return s;
    CUdeviceptr p = 0;
    size_t bytes = 0;
    Status s = check(
        drv_.cuLibraryGetGlobal(&p, &bytes, reinterpret_cast<CUlibrary>(module), name.c_str()));
    addr = p;
    size = bytes;
    return s;
  }
  Status launch(int dev, uint64_t kernel, const LaunchDims& d, const uint8_t* args, size_t,
                const fatbin::KernelLayout& layout, uint64_t stream) override {
    if (Status s = use(dev); !s.ok()) return s;
    // cuLaunchKernel copies the parameters before it returns.
    std::vector<void*> params(layout.params.size());
    for (size_t i = 0; i < params.size(); ++i)
      params[i] = const_cast<uint8_t*>(args) + layout.params[i].offset;
    // A CUkernel may stand for a CUfunction of the current context (cuda.h says so).
    return check(drv_.cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), d.grid[0], d.grid[1],
                                     d.grid[2], d.block[0], d.block[1], d.block[2], d.shared_mem,
                                     cu(stream), params.data(), nullptr));
  }
  Status func_attributes(int dev, uint64_t kernel, std::vector<int32_t>& values) override {
    if (Status s = use(dev); !s.ok()) return s;
    values.assign(16, 0);
    for (int a = 0; a < 16; ++a) {
      int v = 0;
      if (drv_.cuKernelGetAttribute(&v, static_cast<CUfunction_attribute>(a),
                                    reinterpret_cast<CUkernel>(kernel), dev_[dev]) == CUDA_SUCCESS)
        values[a] = v;
    }
    return Status::success();
  }
  Status func_set_attribute(int dev, uint64_t kernel, int32_t attr, int32_t value) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuKernelSetAttribute(static_cast<CUfunction_attribute>(attr), value,
                                           reinterpret_cast<CUkernel>(kernel), dev_[dev]));
  }
  Status func_set_cache_config(int dev, uint64_t kernel, int32_t config) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuKernelSetCacheConfig(reinterpret_cast<CUkernel>(kernel),
                                             static_cast<CUfunc_cache>(config), dev_[dev]));
  }
  Status occupancy(int dev, uint64_t kernel, int32_t block_size, uint64_t dynamic_smem,
                   uint32_t flags, int32_t& blocks) override {
    if (Status s = use(dev); !s.ok()) return s;
    CUfunction f = nullptr;
    if (Status s = check(drv_.cuKernelGetFunction(&f, reinterpret_cast<CUkernel>(kernel))); !s.ok())
      return s;
    int n = 0;
    Status s = check(drv_.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
        &n, f, block_size, dynamic_smem, flags));
    blocks = n;
    return s;
  }

  // ---- drvlibs (cuda_drvlibs.h)
  Status tensor_map_encode(int dev, const TensorMapArgs& a, uint8_t (&map)[128]) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_tensor_map_encode(drv_, a, map);
  }
  Status tensor_map_replace_address(int dev, uint8_t (&map)[128], uint64_t address) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_tensor_map_replace_address(drv_, map, address);
  }
  Status occupancy_block_size(int dev, uint64_t kernel, uint64_t smem, int32_t limit,
                              uint32_t flags, int32_t& min_grid, int32_t& block) override {
    if (Status s = use(dev); !s.ok()) return s;
    CUfunction f = nullptr;
    if (Status s = check(drv_.cuKernelGetFunction(&f, reinterpret_cast<CUkernel>(kernel))); !s.ok())
      return s;
    return cuda_occupancy_block_size(drv_, f, smem, limit, flags, min_grid, block);
  }
  Status stream_mem_ops(int dev, uint64_t stream, const std::vector<MemOp>& ops) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_stream_mem_ops(drv_, cu(stream), ops);
  }
  Status link_create(int dev, uint64_t& link) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_link_create(drv_, link);
  }
  Status link_add(int dev, uint64_t link, uint32_t type, const std::string& name,
                  const uint8_t* data, size_t size) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_link_add(drv_, link, type, name, data, size);
  }
  Status link_complete(int dev, uint64_t link, std::vector<uint8_t>& image) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_link_complete(drv_, link, image);
  }
  Status link_destroy(int dev, uint64_t link) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_link_destroy(drv_, link);
  }

  // ---- launch (backend/cuda/cuda_launch.cc) ----
  Status launch_ex(int dev, uint64_t kernel, const LaunchDims& d, const uint8_t* args, size_t,
                   const fatbin::KernelLayout& layout, uint64_t stream,
                   const std::vector<LaunchAttribute>& attrs) override {
    if (Status s = use(dev); !s.ok()) return s;
    std::vector<CUlaunchAttribute> cu_attrs;
    std::string error;
    if (!to_cu_attributes(attrs, cu_attrs, error)) return Status::fail(err::InvalidValue, error);
    std::vector<void*> params(layout.params.size());
    for (size_t i = 0; i < params.size(); ++i)
      params[i] = const_cast<uint8_t*>(args) + layout.params[i].offset;
    CUlaunchConfig c = launch_config(d, cu(stream), cu_attrs);
    return check(
        drv_.cuLaunchKernelEx(&c, reinterpret_cast<CUfunction>(kernel), params.data(), nullptr));
  }
  Status occupancy_cluster(int dev, uint64_t kernel, int query, const LaunchDims& d,
                           const std::vector<LaunchAttribute>& attrs, int32_t& value) override {
    if (Status s = use(dev); !s.ok()) return s;
    CUfunction f = nullptr;
    if (Status s = check(drv_.cuKernelGetFunction(&f, reinterpret_cast<CUkernel>(kernel))); !s.ok())
      return s;
    std::vector<CUlaunchAttribute> cu_attrs;
    std::string error;
    if (!to_cu_attributes(attrs, cu_attrs, error)) return Status::fail(err::InvalidValue, error);
    CUlaunchConfig c = launch_config(d, nullptr, cu_attrs);
    int n = 0;
    Status s = check(query == 0 ? drv_.cuOccupancyMaxActiveClusters(&n, f, &c)
                                : drv_.cuOccupancyMaxPotentialClusterSize(&n, f, &c));
    value = n;
    return s;
  }
  Status occupancy_dynamic_smem(int dev, uint64_t kernel, int32_t blocks, int32_t block_size,
                                uint64_t& bytes) override {
    if (Status s = use(dev); !s.ok()) return s;
    CUfunction f = nullptr;
    if (Status s = check(drv_.cuKernelGetFunction(&f, reinterpret_cast<CUkernel>(kernel))); !s.ok())
      return s;
    size_t n = 0;
    Status s = check(drv_.cuOccupancyAvailableDynamicSMemPerBlock(&n, f, blocks, block_size));
    bytes = n;
    return s;
  }

  Status host_register(void* p, size_t size) override {
    if (Status s = use(0); !s.ok()) return s;
    return check(drv_.cuMemHostRegister_v2(p, size, CU_MEMHOSTREGISTER_PORTABLE));
  }
  Status host_unregister(void* p) override {
    if (Status s = use(0); !s.ok()) return s;
    return check(drv_.cuMemHostUnregister(p));
  }
  Status host_register_mapped(void* p, size_t size) override {
    if (Status s = use(0); !s.ok()) return s;
    return cuda_host_register_mapped(drv_, p, size);
  }

  void* alloc_staging(size_t bytes) override {
    if (!use(0).ok()) return nullptr;
    void* p = nullptr;
    // Portable: usable for copies to every GPU of this session.
    if (drv_.cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) return nullptr;
    return p;
  }
  void free_staging(void* p) override {
    if (p) drv_.cuMemFreeHost(p);
  }

  // ---- devmem
  Status device_config(int dev, ConfigOp op, uint32_t key, uint64_t& value) override {
    if (Status s = use(dev); !s.ok()) return s;
    CUdevice peer = 0;
    if (op == ConfigOp::P2PAttribute) {
      if (value >= dev_.size()) return Status::fail(err::InvalidDevice, "no such peer GPU");
      peer = dev_[value];
    }
    return cuda_device_config(drv_, dev_[dev], peer, op, key, value);
  }

  // ---- arrays (cuda_arrays.h)
  Status array_create(int dev, const ArraySpec& spec, uint64_t& array) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_array_create(drv_, spec, array);
  }
  Status array_level(int dev, uint64_t mipmapped, uint32_t level, uint64_t& array) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_array_level(drv_, mipmapped, level, array);
  }
  Status array_destroy(int dev, uint64_t array, bool mipmapped) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_array_destroy(drv_, array, mipmapped);
  }
  Status array_copy(int dev, const ArrayCopy& c, uint64_t stream) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_array_copy(drv_, c, cu(stream));
  }
  Status array_query(int dev, uint64_t array, bool mipmapped, uint32_t op,
                     std::vector<uint64_t>& values) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_array_query(drv_, dev_[dev], array, mipmapped, op, values);
  }
  Status texture_create(int dev, bool surface, const TextureSpec& t, uint64_t& object) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_texture_create(drv_, surface, t, object);
  }
  Status texture_destroy(int dev, bool surface, uint64_t object) override {
    if (Status s = use(dev); !s.ok()) return s;
    return cuda_texture_destroy(drv_, surface, object);
  }

 private:
  // Makes the GPU's primary context current on the calling thread (sessions call from several).
  CUmemAllocationProp alloc_prop(int dev, bool fd_handle) const {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev_[dev];
    prop.requestedHandleTypes =
        fd_handle ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    return prop;
  }
  static std::string hex(uint64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
  }
  Status use(int dev) {
    // No lock is held across a driver call: a racing thread's extra retain is released.
    CUcontext c;
    {
      std::lock_guard<std::mutex> lock(ctx_mu_);
      c = ctx_[dev];
    }
    if (!c) {
      CUcontext n = nullptr;
      if (Status s = check(drv_.cuDevicePrimaryCtxRetain(&n, dev_[dev])); !s.ok()) return s;
      bool extra;
      {
        std::lock_guard<std::mutex> lock(ctx_mu_);
        extra = ctx_[dev] != nullptr;
        if (!extra) ctx_[dev] = n;
        c = ctx_[dev];
      }
      if (extra) drv_.cuDevicePrimaryCtxRelease_v2(dev_[dev]);
    }
    return check(drv_.cuCtxSetCurrent(c));
  }
  CUcontext current(int dev) {
    std::lock_guard<std::mutex> lock(ctx_mu_);
    return ctx_[dev];
  }
  // Stream 0 is the legacy default stream, with its implicit synchronization.
  static CUstream cu(uint64_t stream) {
    return stream ? reinterpret_cast<CUstream>(stream) : CU_STREAM_LEGACY;
  }

  Status check(CUresult r) const {
    if (r == CUDA_SUCCESS) return Status::success();
    // CUresult and cudaError_t share their numbers for every code these calls return.
    return Status::fail(static_cast<CudaError>(r), drv_.describe(r));
  }

  CudaDriver drv_;
  std::atomic<bool> no_fd_handles_{false};  // cuMemCreate refused shareable handles
  std::atomic<bool> cpu_gates_{false};      // no stream memory operations: gates wait on the CPU
  std::mutex ctx_mu_;
  int version_ = 0;
  std::vector<CUcontext> ctx_;
  std::vector<CUdevice> dev_;
  CudaNotify notify_;  // notify (cuda_notify.h)
};

}  // namespace

std::unique_ptr<Executor> make_cuda_executor(std::string& error) {
  CudaDriver drv;
  if (!drv.load(error)) return nullptr;
  int count = 0;
  CUresult r = drv.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count == 0) {
    error = "the NVIDIA driver reports no GPU (" + drv.describe(r) + ")";
    return nullptr;
  }
  return std::make_unique<CudaExecutor>(drv, count);
}

}  // namespace rgpu::backend
