// The executor interface: what a server session asks of a GPU backend.  `cuda` runs on real GPUs
// through the driver API; `host` keeps "device memory" in host memory (a test double for machines
// without a GPU).  An executor belongs to one session process; the session calls it from its
// dispatcher and its waiters (server/waiter.h) at once, so implementations are safe for concurrent
// calls.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/cuda_errors.h"
#include "fatbin/fatbin.h"

namespace rgpu::backend {

struct Status {
  CudaError code = err::Success;
  std::string message;
  bool ok() const { return code == err::Success; }
  static Status success() { return {}; }
  static Status fail(CudaError c, std::string m) { return {c, std::move(m)}; }
};

struct DeviceInfo {
  std::string name;
  uint8_t uuid[16] = {};
  uint64_t total_mem = 0;
  std::vector<std::pair<uint32_t, int32_t>> attrs;  // (cudaDeviceAttr number, value)
};

// A rectangle of bytes: `height` rows of `width` bytes, `pitch` bytes apart.  A 1-D copy is one
// row.
struct Rect {
  uint64_t width = 0;
  uint64_t height = 1;
};

struct LaunchDims {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t shared_mem = 0;
};

// A launch attribute in CUlaunchAttributeID numbering; values as in proto::LaunchAttr, with events
// already the backend's handles.
struct LaunchAttribute {
  uint32_t id = 0;
  uint64_t v[4] = {0, 0, 0, 0};
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const char* name() const = 0;
  virtual int device_count() const = 0;
  virtual int driver_version() const = 0;

  virtual Status device_info(int dev, DeviceInfo& out) = 0;
  virtual Status mem_info(int dev, uint64_t& free, uint64_t& total) = 0;

  // ---- device memory: the session places every allocation inside an address window the client
  // chose (server/device_heap.h); the backend reserves windows and maps memory into them ----
  // The granularity of mappings on `dev`: a power of two (2 MiB on current GPUs).
  virtual Status mem_granularity(int dev, uint64_t& granularity) = 0;
  // Reserves [base, base + size) of the GPU's address space at exactly `base` (granularity
  // multiples); an address that comes back different is an error naming both.
  virtual Status va_reserve(int dev, uint64_t base, uint64_t size) = 0;
  virtual Status va_release(int dev, uint64_t base, uint64_t size) = 0;
  // Backs [addr, addr + size), inside a reserved range, with new memory of `dev`, accessible from
  // `dev` and every other GPU of this server that can access it as a peer.
  virtual Status mem_map(int dev, uint64_t addr, uint64_t size) = 0;
  // Unmaps the range and frees its memory.  The caller has made sure the GPU is past every
  // earlier piece of work that may use it (the session synchronizes the device first, as cudaFree
  // does).
  virtual Status mem_unmap(int dev, uint64_t addr, uint64_t size) = 0;

  // Synchronous copies between server host memory and device memory, ordered like CUDA's
  // synchronous cudaMemcpy (after the legacy default stream's work); 2-D when rect.height > 1.
  virtual Status copy_to_device(int dev, uint64_t dst, uint64_t dpitch, const void* src,
                                uint64_t spitch, Rect rect) = 0;
  virtual Status copy_to_host(int dev, void* dst, uint64_t dpitch, uint64_t src, uint64_t spitch,
                              Rect rect) = 0;
  virtual Status synchronize(int dev) = 0;

  // ---- streams (handle 0: the GPU's legacy default stream) and events ----
  virtual Status stream_create(int dev, unsigned flags, int priority, uint64_t& stream) = 0;
  virtual Status stream_destroy(int dev, uint64_t stream) = 0;
  virtual Status stream_synchronize(int dev, uint64_t stream) = 0;
  virtual Status stream_query(int dev, uint64_t stream) = 0;  // NotReady while work is pending
  virtual Status stream_wait_event(int dev, uint64_t stream, uint64_t event) = 0;
  virtual Status stream_priority_range(int dev, int& least, int& greatest) = 0;
  virtual Status event_create(int dev, unsigned flags, uint64_t& event) = 0;
  virtual Status event_destroy(int dev, uint64_t event) = 0;
  virtual Status event_record(int dev, uint64_t event, uint64_t stream) = 0;
  virtual Status event_query(int dev, uint64_t event) = 0;
  virtual Status event_synchronize(int dev, uint64_t event) = 0;
  virtual Status event_elapsed(int dev, uint64_t start, uint64_t end, float& ms) = 0;
  // Runs fn(arg) on a backend thread once the stream's earlier work is done; the stream's later
  // work waits until it returns.  That thread may hold driver locks (as CUDA's does): fn must not
  // call the executor, take a lock that anyone holds across an executor call, or wait — it only
  // hands work to rgpud's own threads (server/host_work.h).
  virtual Status host_func(int dev, uint64_t stream, void (*fn)(void*), void* arg) = 0;

  // ---- gates: a stream held at a point until rgpud opens it (backend/gate.h) ----
  // A gate is a 32-bit word from alloc_gate_words (device-visible on a GPU).  The stream's later
  // work waits until (int32_t)(*word - value) >= 0.  open_gate() may be called from any thread: it
  // is a memory store and a wakeup, never a CUDA call, never a wait.  This is how a stream waits
  // for a client's host callback without a host function that blocks.
  virtual uint32_t* alloc_gate_words(size_t count) = 0;
  virtual void free_gate_words(uint32_t* words) = 0;
  virtual Status gate_wait(int dev, uint64_t stream, uint32_t* word, uint32_t value) = 0;
  // The stream opens a gate for `value` when it gets there (after its earlier work).  `word` is
  // alloc_gate_words' or host memory registered with host_register_mapped (which may be shared
  // with another process: waiters there wake too).
  virtual Status gate_signal(int dev, uint64_t stream, uint32_t* word, uint32_t value) = 0;

  // ---- work on a stream ----
  // From/to page-locked server memory (staging buffers) that stays valid until the copy is done.
  virtual Status copy_to_device_async(int dev, uint64_t dst, uint64_t dpitch, const void* src,
                                      uint64_t spitch, Rect rect, uint64_t stream) = 0;
  // An asynchronous 1-D copy whose source the backend has consumed when this returns (as CUDA
  // stages pageable memory): the caller may reuse `src` at once.  For small copies; it may wait
  // for the stream when staging space runs short, as the driver does.
  virtual Status copy_to_device_staged(int dev, uint64_t dst, const void* src, uint64_t size,
                                       uint64_t stream) = 0;
  virtual Status copy_to_host_async(int dev, void* dst, uint64_t dpitch, uint64_t src,
                                    uint64_t spitch, Rect rect, uint64_t stream) = 0;
  virtual Status copy_on_device(int dev, uint64_t dst, uint64_t dpitch, uint64_t src,
                                uint64_t spitch, Rect rect, uint64_t stream) = 0;
  virtual Status memset(int dev, uint64_t ptr, uint8_t value, uint64_t size, uint64_t stream) = 0;
  // Between two GPUs of this server, on a stream of either (`stream_dev`).
  virtual Status copy_peer(int dst_dev, uint64_t dst, int src_dev, uint64_t src, uint64_t size,
                           int stream_dev, uint64_t stream) = 0;
  virtual Status can_access_peer(int dev, int peer, int& can) = 0;
  virtual Status enable_peer_access(int dev, int peer) = 0;
  // Destroys the device's state after the session freed its allocations (cudaDeviceReset).
  virtual Status reset(int dev) = 0;

  // Modules: `image` is a fat binary, `info` what rgpu parsed from it.  Handles are opaque.
  virtual Status module_load(int dev, const uint8_t* image, size_t size,
                             const fatbin::ModuleInfo& info, uint64_t& module) = 0;
  virtual Status module_unload(int dev, uint64_t module) = 0;
  // Bytes of device memory the backend set aside for a loaded module's variables, when it can
  // tell; 0 when it cannot (the session then goes by what the image says).
  virtual uint64_t module_bytes(int /*dev*/, uint64_t /*module*/) { return 0; }
  // Finds a kernel; `driver_layout` is filled when the backend can tell the layout itself.
  virtual Status kernel_get(int dev, uint64_t module, const std::string& name, uint64_t& kernel,
                            std::optional<fatbin::KernelLayout>& driver_layout) = 0;
  virtual Status global_get(int dev, uint64_t module, const std::string& name, uint64_t& addr,
                            uint64_t& size) = 0;
  // `args` is the packed parameter buffer (`size` bytes, copied before this returns); `layout`
  // gives each parameter's place in it.
  virtual Status launch(int dev, uint64_t kernel, const LaunchDims& dims, const uint8_t* args,
                        size_t size, const fatbin::KernelLayout& layout, uint64_t stream) = 0;
  // CUfunction_attribute values 0..15.
  virtual Status func_attributes(int dev, uint64_t kernel, std::vector<int32_t>& values) = 0;
  virtual Status func_set_attribute(int dev, uint64_t kernel, int32_t attr, int32_t value) = 0;
  virtual Status func_set_cache_config(int dev, uint64_t kernel, int32_t config) = 0;
  virtual Status occupancy(int dev, uint64_t kernel, int32_t block_size, uint64_t dynamic_smem,
                           uint32_t flags, int32_t& blocks) = 0;

  // ---- launch: attributed launches and cluster occupancy ----
  // launch() with launch attributes (cooperative, cluster dimensions, programmatic serialization
  // and events, priority, access policy window, ...), as cuLaunchKernelEx takes them.
  virtual Status launch_ex(int dev, uint64_t kernel, const LaunchDims& dims, const uint8_t* args,
                           size_t size, const fatbin::KernelLayout& layout, uint64_t stream,
                           const std::vector<LaunchAttribute>& attrs) = 0;
  // cuOccupancyMaxActiveClusters (`query` 0) or cuOccupancyMaxPotentialClusterSize (1).
  virtual Status occupancy_cluster(int dev, uint64_t kernel, int query, const LaunchDims& dims,
                                   const std::vector<LaunchAttribute>& attrs, int32_t& value) = 0;
  virtual Status occupancy_dynamic_smem(int dev, uint64_t kernel, int32_t blocks,
                                        int32_t block_size, uint64_t& bytes) = 0;

  // Makes server host memory (a client's shared segment) page-locked for the GPU, and undoes it.
  virtual Status host_register(void* p, size_t size) = 0;
  virtual Status host_unregister(void* p) = 0;

  // ---- pools
  // Page-locks server host memory at `p` (a client's shared segment, mapped in the session at the
  // client's own address) and maps it for the GPUs so that kernels can use the pointer `p`
  // itself (mapped page-locked memory); an error when a GPU would need another address.
  virtual Status host_register_mapped(void* p, size_t size) = 0;

  // Page-locked host memory for staging copies (allocated once per session and reused).
  virtual void* alloc_staging(size_t bytes) = 0;
  virtual void free_staging(void* p) = 0;

  // ---- devmem
  // A setting of the GPU's context (cuCtxSetLimit/GetLimit, cache and shared-memory configuration,
  // the profiler, persisting L2, P2P attributes).  `key` and `value` as for DeviceConfigOp's
  // operation of the same number (proto/messages_devmem.h); a "get" writes `value`.
  enum class ConfigOp : uint32_t {
    SetLimit = 1,
    GetLimit = 2,
    SetCacheConfig = 3,
    GetCacheConfig = 4,
    SetSharedMemConfig = 5,
    GetSharedMemConfig = 6,
    ProfilerStart = 7,
    ProfilerStop = 8,
    ResetPersistingL2 = 9,
    P2PAttribute = 10,  // value: the peer GPU in, the attribute out
  };
  virtual Status device_config(int dev, ConfigOp op, uint32_t key, uint64_t& value) = 0;

  // ---- graphs3
  // A stream's attribute (cuStreamSetAttribute / cuStreamGetAttribute): `a.id` in
  // CUstreamAttrID numbering, its value encoded as a launch attribute's (LaunchAttribute).
  virtual Status stream_set_attribute(int dev, uint64_t stream, const LaunchAttribute& a) = 0;
  virtual Status stream_get_attribute(int dev, uint64_t stream, LaunchAttribute& a) = 0;

  // ---- native graphs (server/graphs_native.cc): a stream's work captured once and run again by
  // one launch.  capture_begin starts capturing `stream` (relaxed mode); capture_end stops it and
  // instantiates what was captured as `exec` (0 and the error when it could not be); a native
  // launch runs `exec` on `stream`; native_destroy lets it go.
  virtual Status capture_begin(int, uint64_t /*stream*/) {
    return Status::fail(err::NotSupported, "this backend cannot capture a stream");
  }
  virtual Status capture_end(int, uint64_t /*stream*/, uint64_t& exec) {
    exec = 0;
    return Status::fail(err::NotSupported, "this backend cannot capture a stream");
  }
  virtual Status native_launch(int, uint64_t /*exec*/, uint64_t /*stream*/) {
    return Status::fail(err::NotSupported, "this backend has no native graphs");
  }
  virtual void native_destroy(int, uint64_t /*exec*/) {}

  // ---- conditional graph nodes (server/graphs_cond.cc)
  // A conditional handle of native graph `graph` (an empty graph is made when it is 0), default
  // `value`, `flags` CU_GRAPH_COND_ASSIGN_DEFAULT or 0.  A backend without native graphs
  // (cond_emulated) numbers handles itself and keeps their values (cond_value).
  virtual Status cond_handle_create(int, uint64_t& /*graph*/, uint32_t /*value*/,
                                    uint32_t /*flags*/, uint64_t& /*handle*/) {
    return Status::fail(err::NotSupported, "this backend has no conditional graph nodes");
  }
  virtual void native_graph_destroy(int, uint64_t /*graph*/) {}
  // Native building: capture `stream` into `graph` (its nodes removed first: a graph is rebuilt
  // at each instantiation); a conditional node added after the capture's current dependencies,
  // then its only dependency, with its body graphs (capture_into them on other streams); the
  // capture ended, `graph` kept; `graph` instantiated.
  virtual Status capture_into(int, uint64_t /*stream*/, uint64_t /*graph*/, bool /*empty_first*/) {
    return Status::fail(err::NotSupported, "this backend cannot capture into a graph");
  }
  virtual Status capture_conditional(int, uint64_t /*stream*/, uint64_t /*handle*/,
                                     uint32_t /*type*/, uint32_t /*size*/,
                                     std::vector<uint64_t>& /*bodies*/) {
    return Status::fail(err::NotSupported, "this backend has no conditional graph nodes");
  }
  virtual Status capture_finish(int, uint64_t /*stream*/) {
    return Status::fail(err::NotSupported, "this backend cannot capture into a graph");
  }
  virtual Status native_instantiate(int, uint64_t /*graph*/, uint64_t& /*exec*/) {
    return Status::fail(err::NotSupported, "this backend has no native graphs");
  }
  // Emulated conditionals (the host backend): a handle's value read (set false) or written, and
  // whether this backend evaluates conditional nodes itself (else only natively).
  virtual bool cond_emulated() const { return false; }
  virtual Status cond_value(int, uint64_t /*handle*/, bool /*set*/, uint32_t& /*value*/) {
    return Status::fail(err::NotSupported, "this backend has no conditional graph nodes");
  }

  // ---- ipc
  // CUDA IPC (server/ipc.cc): the mapping that holds `ptr` on `dev` as a shareable descriptor (a
  // new one, the caller's to close), with the mapping's base and size and what kind of descriptor
  // it is; then, in another session, that descriptor's memory mapped at `addr` (reserved address
  // space of `dev`'s window, `span` bytes: the mapping's size; nothing mapped there) so that
  // [addr + offset, addr + offset + size) is the part of it that was exported, and unmapped again
  // (ipc_mem_close, with `span`).  A backend maps as little of the span as it can: the cuda
  // backend all of it (cuMemMap maps an allocation from its start), the host backend the pages
  // that hold the exported part.
  virtual Status ipc_mem_export(int, uint64_t /*ptr*/, int& /*fd*/, uint64_t& /*base*/,
                                uint64_t& /*size*/, uint32_t& /*kind*/) {
    return Status::fail(err::NotSupported,
                        "this backend cannot share memory with other sessions (CUDA IPC)");
  }
  virtual Status ipc_mem_import(int, int /*fd*/, uint32_t /*kind*/, uint64_t /*addr*/,
                                uint64_t /*span*/, uint64_t /*offset*/, uint64_t /*size*/) {
    return Status::fail(err::NotSupported, "this backend cannot map another session's memory");
  }
  virtual Status ipc_mem_close(int, uint64_t /*addr*/, uint64_t /*size*/) {
    return Status::fail(err::NotSupported, "this backend cannot map another session's memory");
  }

  // ---- vmm
  // The driver's virtual memory management calls for the program (server/vmm.cc): physical
  // allocations named by a backend handle, mapped into ranges of a window the session reserved
  // for them (nothing else mapped there).  Granularity of pinned device memory of `dev`.
  virtual Status vmm_granularity(int, bool /*recommended*/, uint64_t& /*granularity*/) {
    return Status::fail(err::NotSupported, "this backend has no virtual memory management");
  }
  // cuMemCreate: `size` bytes (a granularity multiple) of `dev`'s memory; `shareable` asks for a
  // POSIX file descriptor handle type.
  virtual Status vmm_create(int, uint64_t /*size*/, bool /*shareable*/, uint64_t& /*handle*/) {
    return Status::fail(err::NotSupported, "this backend has no virtual memory management");
  }
  // Frees the memory once no mapping uses it (the session calls it when its last reference goes).
  virtual Status vmm_release(int, uint64_t /*handle*/) {
    return Status::fail(err::NotSupported, "this backend has no virtual memory management");
  }
  // Maps [addr, addr + size) onto the handle's memory from `offset`, accessible to nobody yet.
  virtual Status vmm_map(int, uint64_t /*addr*/, uint64_t /*size*/, uint64_t /*offset*/,
                         uint64_t /*handle*/) {
    return Status::fail(err::NotSupported, "this backend has no virtual memory management");
  }
  virtual Status vmm_unmap(int, uint64_t /*addr*/, uint64_t /*size*/) {
    return Status::fail(err::NotSupported, "this backend has no virtual memory management");
  }
  // cuMemSetAccess for GPU `peer` over mapped [addr, addr + size); `flags`: CUmemAccess_flags.
  virtual Status vmm_set_access(int, uint64_t /*addr*/, uint64_t /*size*/, int /*peer*/,
                                uint32_t /*flags*/) {
    return Status::fail(err::NotSupported, "this backend has no virtual memory management");
  }

  // ---- arrays
  // CUDA arrays, texture and surface objects (backend/{cuda,host}/*_arrays.*).  Handles are the
  // backend's (a CUarray / CUmipmappedArray, a CUtexObject / CUsurfObject).
  struct ArraySpec {  // CUDA_ARRAY3D_DESCRIPTOR, and the levels of a mipmapped array (0: none)
    uint64_t width = 0, height = 0, depth = 0;
    uint32_t format = 0, channels = 0, flags = 0, levels = 0;
  };
  struct CopySide {  // `array` non-zero: an array (handle), else linear device memory at `ptr`
    uint64_t array = 0, ptr = 0, pitch = 0, slice_rows = 0, x = 0, y = 0, z = 0;
  };
  struct ArrayCopy {
    CopySide src, dst;
    uint64_t width = 0, height = 1, depth = 1;  // bytes, rows, slices
  };
  // CUDA_RESOURCE_DESC + CUDA_TEXTURE_DESC + CUDA_RESOURCE_VIEW_DESC, arrays as handles.
  struct TextureSpec {
    uint32_t res_type = 0;  // CUresourcetype
    uint64_t array = 0, ptr = 0;
    uint32_t format = 0, channels = 0;
    uint64_t width = 0, height = 0, pitch = 0;
    uint32_t address_mode[3] = {0, 0, 0}, filter_mode = 0, flags = 0, max_anisotropy = 0,
             mipmap_filter_mode = 0;
    float mipmap_bias = 0, min_lod = 0, max_lod = 0, border[4] = {0, 0, 0, 0};
    bool view = false;
    uint32_t view_format = 0;
    uint64_t view_width = 0, view_height = 0, view_depth = 0;
    uint32_t first_level = 0, last_level = 0, first_layer = 0, last_layer = 0;
  };
  static Status no_arrays() {
    return Status::fail(err::NotSupported, "this backend has no CUDA arrays or texture objects");
  }
  virtual Status array_create(int, const ArraySpec&, uint64_t& /*array*/) { return no_arrays(); }
  // Level `level` of a mipmapped array: owned by it, never destroyed on its own.
  virtual Status array_level(int, uint64_t /*mipmapped*/, uint32_t, uint64_t& /*array*/) {
    return no_arrays();
  }
  virtual Status array_destroy(int, uint64_t /*array*/, bool /*mipmapped*/) { return no_arrays(); }
  virtual Status array_copy(int, const ArrayCopy&, uint64_t /*stream*/) { return no_arrays(); }
  // cuArrayGetMemoryRequirements (op 1: size, alignment) or cuArrayGetSparseProperties (op 2:
  // tile width, height, depth, miptail first level, miptail size, flags), mipmapped or not.
  virtual Status array_query(int, uint64_t, bool /*mipmapped*/, uint32_t /*op*/,
                             std::vector<uint64_t>& /*values*/) {
    return no_arrays();
  }
  virtual Status texture_create(int, bool /*surface*/, const TextureSpec&, uint64_t& /*object*/) {
    return no_arrays();
  }
  virtual Status texture_destroy(int, bool /*surface*/, uint64_t /*object*/) { return no_arrays(); }
  // ---- misc
  // cudaDeviceDisablePeerAccess: `dev` stops mapping `peer`'s memory (cudaErrorPeerAccessNotEnabled
  // when it was not enabled).
  virtual Status disable_peer_access(int /*dev*/, int /*peer*/) {
    return Status::fail(err::NotSupported, "this backend cannot disable peer access");
  }
  // cuFlushGPUDirectRDMAWrites in `dev`'s context.
  virtual Status flush_rdma_writes(int /*dev*/, uint32_t /*target*/, uint32_t /*scope*/) {
    return Status::fail(err::NotSupported, "this backend cannot flush GPUDirect RDMA writes");
  }
  // The cudaAtomicOperationCapability bits of each operation in `ops` between `dev` and the host
  // (`peer` < 0) or GPU `peer`.
  virtual Status atomic_caps(int /*dev*/, int /*peer*/, const std::vector<uint32_t>& /*ops*/,
                             std::vector<uint32_t>& /*caps*/) {
    return Status::fail(err::NotSupported, "this backend cannot tell atomic capabilities");
  }
  // CUDA IPC of events (server/misc.cc): event `event` of `dev` (created with the interprocess and
  // disable-timing flags) as a shareable descriptor (new, the caller's to close) and its kind;
  // then, in another session, that descriptor opened as an event of this backend, which the event
  // calls (record, query, synchronize, stream waits, destroy) take like any other.
  virtual Status ipc_event_export(int /*dev*/, uint64_t /*event*/, int& /*fd*/,
                                  uint32_t& /*kind*/) {
    return Status::fail(err::NotSupported, "this backend cannot share events (CUDA IPC)");
  }
  virtual Status ipc_event_import(int /*dev*/, int /*fd*/, uint32_t /*kind*/, uint64_t& /*event*/) {
    return Status::fail(err::NotSupported, "this backend cannot open another session's event");
  }
  // ---- drvlibs
  // Tensor maps (cuTensorMapEncode*, cuTensorMapReplaceAddress): the driver encodes the 128-byte
  // descriptor of the request (proto::TensorMapEncodeReq: arguments as the program gave them).
  struct TensorMapArgs {
    uint32_t kind = 0;  // 0 tiled, 1 im2col, 2 im2col wide
    uint32_t data_type = 0, rank = 0;
    uint64_t address = 0;
    std::vector<uint64_t> dims, strides;
    std::vector<uint32_t> box, elem_strides;
    std::vector<int32_t> lower, upper;
    uint32_t channels = 0, pixels = 0, interleave = 0, swizzle = 0, l2_promotion = 0, oob_fill = 0,
             mode = 0;
  };
  virtual Status tensor_map_encode(int /*dev*/, const TensorMapArgs&, uint8_t (&/*map*/)[128]) {
    return Status::fail(err::NotSupported, "this backend cannot encode tensor maps");
  }
  virtual Status tensor_map_replace_address(int /*dev*/, uint8_t (&/*map*/)[128],
                                            uint64_t /*address*/) {
    return Status::fail(err::NotSupported, "this backend cannot encode tensor maps");
  }
  // cuOccupancyMaxPotentialBlockSizeWithFlags with one dynamic shared memory size for every block
  // size (no callback).
  // By default the search over occupancy() (occupancy_search below).
  virtual Status occupancy_block_size(int dev, uint64_t kernel, uint64_t dynamic_smem,
                                      int32_t limit, uint32_t flags, int32_t& min_grid,
                                      int32_t& block_size);
  // Stream memory operations in order on `stream` (op: CUstreamBatchMemOpType's number).  The
  // session checked every address (4 or 8 bytes of memory the GPU may use).
  struct MemOp {
    uint32_t op = 0, flags = 0;
    uint64_t address = 0, value = 0;
  };
  virtual Status stream_mem_ops(int /*dev*/, uint64_t /*stream*/, const std::vector<MemOp>&) {
    return Status::fail(err::NotSupported, "this backend has no stream memory operations");
  }
  // The session ends: stream waits that can never be satisfied now give up, so its teardown does
  // not wait for them for ever (where the backend can; a GPU's cannot).
  virtual void cancel_stream_waits() {}
  // cuLink* (a link state per handle; inputs by CUjitInputType; the linked image is copied out).
  virtual Status link_create(int /*dev*/, uint64_t& /*link*/) {
    return Status::fail(err::NotSupported, "this backend cannot link device code");
  }
  virtual Status link_add(int /*dev*/, uint64_t /*link*/, uint32_t /*type*/,
                          const std::string& /*name*/, const uint8_t* /*data*/, size_t /*size*/) {
    return Status::fail(err::NotSupported, "this backend cannot link device code");
  }
  virtual Status link_complete(int /*dev*/, uint64_t /*link*/, std::vector<uint8_t>& /*image*/) {
    return Status::fail(err::NotSupported, "this backend cannot link device code");
  }
  virtual Status link_destroy(int /*dev*/, uint64_t /*link*/) { return Status::success(); }
  // ---- notify: asynchronous notifications of GPU `dev` (cuDeviceRegisterAsyncNotification).
  // `fn(type, value)` (CUasyncNotificationType; for OVER_BUDGET the bytes over budget) runs on
  // whatever thread the driver chooses and must not block; an empty `fn` stops them: no call of
  // the earlier one starts or is still running after this returns.
  using Notify = std::function<void(uint32_t type, uint64_t value)>;
  virtual Status set_async_notify(int /*dev*/, Notify /*fn*/) {
    return Status::fail(err::NotSupported, "this backend has no asynchronous notifications");
  }
};

// ---- drvlibs (backend/occupancy_search.cc)
// The potential block size search as CUDA documents it (cudaOccupancyMaxPotentialBlockSize): the
// candidates are the largest block size the device, the function and `limit` (0: none) allow,
// then every smaller multiple of the warp size; each gets `smem_of(block size)` bytes of dynamic
// shared memory (false: that size is not known, and `need` names it) and the executor's
// occupancy(); the most resident threads per SM wins, the larger block on a tie.  `min_grid` is
// that block count times the SM count.
Status occupancy_search(Executor& e, int dev, uint64_t kernel, int32_t limit, uint32_t flags,
                        const std::function<bool(int32_t, uint64_t&)>& smem_of, int32_t& min_grid,
                        int32_t& block_size, int32_t& need);

}  // namespace rgpu::backend
