// The client core: virtual devices (RGPU_SERVERS entries), their server links, the address map,
// contexts, the module store, and the CUDA operations in API-neutral form.  Front-ends (libcudart,
// later libcuda) are thin translations onto this: they map their handles (special stream values,
// host stubs) to the core's objects and its neutral Error to their own codes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/address_map.h"
#include "client/config.h"
#include "client/context.h"
#include "client/core_table.h"
#include "client/errors.h"
#include "client/graphs.h"
#include "client/managed_pages.h"
#include "client/modules.h"
#include "client/server_link.h"
#include "client/small_allocs.h"
#include "common/cuda_errors.h"

namespace rgpu::transport {
class TlsContext;
}

namespace rgpu::client {

class Logs;
class Notifications;
struct ManagedState;

enum class CopyKind {
  HostToHost = 0,
  HostToDevice = 1,
  DeviceToHost = 2,
  DeviceToDevice = 3,
  Default = 4
};

struct DeviceInfo {
  std::string name;
  uint8_t uuid[16] = {};
  uint64_t total_mem = 0;
  std::map<uint32_t, int32_t> attrs;
  int attr(uint32_t id, int fallback = 0) const {
    auto it = attrs.find(id);
    return it == attrs.end() ? fallback : it->second;
  }
};

// A stream or event the application created; its id is the server's name for it.
struct Stream {
  int device = 0;
  uint64_t id = 0;  // 0: the device's legacy default stream
  unsigned flags = 0;
  int priority = 0;
  Context* ctx = nullptr;  // what it belongs to
};
struct Event {
  int device = 0;
  uint64_t id = 0;
  unsigned flags = 0;
  Context* ctx = nullptr;
};

// A stream as a front-end names it, in neutral terms: the current context's legacy default
// stream, the calling thread's per-thread default stream, or a stream object.  Front-ends decode
// their own special handle values into this (frontend/cudart/handles.h).
struct StreamRef {
  enum class Kind : uint8_t { Legacy, PerThread, Object };
  Kind kind = Kind::Legacy;
  Stream* object = nullptr;
  static StreamRef legacy() { return {}; }
  static StreamRef per_thread() { return {Kind::PerThread, nullptr}; }
  static StreamRef of(Stream* s) { return {Kind::Object, s}; }
};

enum class MemoryType { Unregistered = 0, Host = 1, Device = 2, Managed = 3 };
// Managed memory counters (RGPU_STATS=1 prints them at exit).
struct ManagedStats {
  uint64_t sent_bytes = 0, sent_runs = 0, fetched_bytes = 0, fetched_runs = 0, write_faults = 0;
};
// The advice and prefetch state of a managed range (cudaMemRangeGetAttribute); devices are
// ordinals, -1 the CPU, -2 none.
struct ManagedRange {
  bool read_mostly = false;
  int preferred = -2;
  std::vector<int> accessed_by;
  int last_prefetch = -2;
};
// Writes attribute `attr` of `r` into `data` (`size` bytes) as cudaMemRangeGetAttribute and
// cuMemRangeGetAttribute do (their attribute and location-type numbers are the same: 1 read mostly,
// 2 preferred location, 3 accessed by, 4 last prefetch location, 5-8 their location types and ids).
CudaError write_range_attribute(void* data, size_t size, int attr, const ManagedRange& r);

struct PointerInfo {
  MemoryType type = MemoryType::Unregistered;
  int device = -2;
  uint64_t base = 0;
  bool mapped = false;  // page-locked memory the GPU reaches at the same address
  uint64_t size = 0;    // of the allocation or page-locked range at `base`
  uint64_t id = 0;      // the range's number, unique in the process (AddressMap)
};

// `height` rows of `width` bytes between host buffers (memmove: they may overlap).
void copy_rows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
               size_t height);

// Process state reached through the one Client, made by the library that makes it.
ManagedState* new_managed_state();              // client/managed.cc
std::map<int, Stream*>& this_thread_streams();  // client/streams.cc: the calling thread's

class Client {
 public:
  // The process's one Client (client/core_table.h: libcudart.so.13 uses libcuda.so.1's).
  static Client& get();
  // A new Client (locate_client's business): from the configuration (RGPU_SERVERS), or without
  // devices (`configured` false: a library that cannot reach the process's core).  Never freed.
  static Client* make(bool configured);
  Logs& logs() { return *logs_; }
  ManagedState& managed_state() { return *managed_; }  // client/managed.cc
  // True the first time `what` is asked about in this process: for messages logged once.
  bool first_time(const std::string& what);
  // cudaErrorInvalidValue for a memset of [p, p+n) outside one allocation (of `stream_device`
  // when >= 0), logged once per kind with what rgpu knows of the address.
  CudaError refuse_memset(uint64_t p, uint64_t n, int stream_device);
  // [p, p+n) lies in one page-locked host range (cudaMallocHost, cudaHostRegister...).
  bool page_locked_range(uint64_t p, uint64_t n) const;
  // A memset of page-locked host memory (CUDA reaches it through unified addressing): `depth`
  // slices `slice` bytes apart of `height` rows `pitch` apart of `width` elements of `elem` (1, 2
  // or 4) bytes of `pattern`, filled here after the earlier work of `s` (of the current device's
  // legacy stream when null), before returning; a host node while `s` is captured
  // (client/devmem.cc).
  CudaError fill_host(uint64_t p, size_t pitch, size_t slice, const uint8_t* pattern, unsigned elem,
                      size_t width, size_t height, size_t depth, const Stream* s);
  // The process's TLS client context, made at the first TLS link (client/tls_link.cc); throws
  // transport::TlsError when RGPU_TLS_* name unusable files.
  const transport::TlsContext& tls_context();

  int device_count() const { return static_cast<int>(devices_.size()); }
  CudaError check_device(int dev) const;
  // The calling thread's current device.
  int current_device() const;
  CudaError set_current_device(int dev);

  CudaError device_info(int dev, const DeviceInfo** out);
  CudaError driver_version(int dev, int* version);
  CudaError synchronize(int dev);
  CudaError reset(int dev);
  CudaError mem_get_info(int dev, size_t* free, size_t* total);

  CudaError malloc(int dev, size_t size, void** ptr);
  CudaError free(void* ptr);
  CudaError memcpy(void* dst, const void* src, size_t n, CopyKind kind);
  CudaError memcpy2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                     size_t height, CopyKind kind);
  CudaError memset(void* ptr, int value, size_t n);

  CudaError host_alloc(void** ptr, size_t size, unsigned flags);
  CudaError host_free(void* ptr);
  CudaError host_register(void* ptr, size_t size, unsigned flags);
  CudaError host_unregister(void* ptr);
  PointerInfo pointer_info(const void* p) const;

  // The link to virtual device `dev`'s server, for work on that device: host-asynchronous copies
  // between servers that read this device's memory end first (settle_owed).
  ServerLink* link(int dev, CudaError* e);
  // The same without that wait: for the next copy between servers from the same device.
  ServerLink* link_only(int dev, CudaError* e);
  // The GPU index on its server of virtual device `dev` (checked).
  uint32_t server_gpu(int dev) const { return devices_[dev].spec.gpu; }
  // Asynchronous notifications (client/notify.h).
  Notifications& notifications() { return *notify_; }
  // Forwards request M to virtual device `dev`'s server: connects, fills in the server's GPU index
  // (the request's `device` field) and calls.  A forwarded call with nothing to do on the client
  // is this one line (docs/architecture.md, "How to add a call").
  template <class M>
  Error forward(int dev, typename M::Req req, typename M::Rep* rep = nullptr) {
    Error e;
    ServerLink* l = link(dev, &e);
    if (!l) return e;
    req.device = devices_[dev].spec.gpu;
    return l->template call<M>(req, rep);
  }

  // Contexts (client/context.cc, client/context_ops.cc).  The runtime's current device is the
  // current context's device; set_current_device makes the device's primary context current.
  ContextTable& contexts() { return contexts_; }
  // The calling thread's current context, else device 0's primary one.
  Error current_context(Context** out) const { return contexts_.current_or_default(out); }
  Error context_create(int dev, unsigned flags, Context** out);
  // Releases what belonged to the context: streams and events destroyed, modules unloaded.
  Error context_destroy(Context* ctx);
  Error primary_release(int dev);
  Error primary_reset(int dev);  // also what cudaDeviceReset does to the context
  Error context_synchronize();   // the current context's device

  // Kernels and modules (client/kernels.cc).
  ModuleStore& modules() { return modules_; }
  // Loads a raw image (cubin, fat binary, PTX) into the current context.
  Error module_load(const void* image, size_t size, Module** out);
  Error module_unload(Module* m);
  struct Dim3 {
    uint32_t x = 1, y = 1, z = 1;
  };
  // Lazy modules (client/module_loading.cc).  Resolves on virtual device `dev` every function and
  // global of `m` asked for since its last resolution there, in one round trip, loading the
  // module there first (its image sent to each server once, and only when the server holds no
  // image of that hash): what the first use of a function or global does.
  CudaError module_on(Module* m, int dev);
  // What the server answered for `f` on `dev` (the module's id there and the kernel), resolved at
  // the first ask; `*out` stays valid.
  CudaError resolved_kernel(const Function* f, int dev, uint32_t* module, const KernelInfo** out);
  CudaError resolved_global(const Variable* v, int dev, GlobalInfo* out);
  // Whether `f` is resolved and found on `dev` (asks nothing).
  bool kernel_resolved(const Function* f, int dev);
  CudaError launch(const Function* f, Dim3 grid, Dim3 block, void** args, size_t shared_mem,
                   const Stream& stream);
  CudaError func_attributes(const Function* f, std::vector<int32_t>& values);
  CudaError func_set_attribute(const Function* f, int attr, int value);
  CudaError func_set_cache_config(const Function* f, int config);
  CudaError occupancy(const Function* f, int block_size, size_t dynamic_smem, unsigned flags,
                      int* blocks);
  // Address of a __device__/__constant__ variable on the current device.
  CudaError symbol_address(const Variable* v, uint64_t* addr);

  // ---- launch: attributed launches, cluster occupancy, kernel and library queries
  // (client/launch.cc).
  // A launch attribute in the driver's numbering (CUlaunchAttributeID, the runtime's too); values
  // as proto::LaunchAttr's; the event attributes (7, 12) name `event` instead of v[0].
  struct LaunchAttribute {
    uint32_t id = 0;
    uint64_t v[4] = {0, 0, 0, 0};
    Event* event = nullptr;
  };
  // A launch with attributes: one LaunchEx message (a plain Launch when `attrs` is empty).
  CudaError launch_ex(const Function* f, Dim3 grid, Dim3 block, void** args, size_t shared_mem,
                      const Stream& stream, const std::vector<LaunchAttribute>& attrs);
  // Cluster occupancy: max active clusters (query 0) or max potential cluster size (1).
  CudaError occupancy_cluster(const Function* f, int query, Dim3 grid, Dim3 block,
                              size_t shared_mem, const std::vector<LaunchAttribute>& attrs,
                              int* value);
  CudaError occupancy_dynamic_smem(const Function* f, int blocks, int block_size, size_t* bytes);
  // Parameter `index` of a kernel (its layout on the current device).
  CudaError param_info(const Function* f, size_t index, size_t* offset, size_t* size);
  // A global's address and size on the current device.
  CudaError global_info(const Variable* v, uint64_t* addr, uint64_t* size);
  CudaError func_set_attribute_on(const Function* f, int dev, int attr, int value);
  // The kernels a module's image holds (parsed here once, in image order of names).
  CudaError module_kernels(Module* m, std::shared_ptr<const KernelNames>* out);
  CudaError module_kernel_names(Module* m, std::vector<std::string>& names);
  // Packs a launch (kernels.cc): checks the configuration as the driver would, loads the module.
  CudaError prepare_launch(const Function* f, Dim3 grid, Dim3 block, void** args, size_t shared_mem,
                           const Stream& stream, ServerLink** link, proto::LaunchReq* req);
  // cudaErrorNotSupported (logged once per kernel) when a pointer argument of `f` points into
  // page-locked host memory of this process that the GPU cannot reach (kernels.cc).
  CudaError unreachable_host_argument(const Function* f, const KernelInfo& k,
                                      const std::vector<uint8_t>& args);

  // Streams, events, asynchronous copies and host callbacks (client/streams.cc).
  CudaError resolve_stream(StreamRef ref, Stream* out);
  CudaError stream_create(unsigned flags, int priority, Stream** out);
  CudaError stream_destroy(Stream* s);
  CudaError stream_synchronize(const Stream& s);
  CudaError stream_query(const Stream& s);
  CudaError stream_wait_event(const Stream& s, Event* event);
  CudaError stream_priority_range(int dev, int* least, int* greatest);
  bool stream_flags(StreamRef ref, unsigned* flags, int* priority);
  CudaError event_create(unsigned flags, Event** out);
  CudaError event_destroy(Event* event);
  CudaError event_record(Event* event, const Stream& s);
  CudaError event_query(Event* event);
  CudaError event_synchronize(Event* event);
  CudaError event_elapsed(float* ms, Event* start, Event* end);
  CudaError memcpy2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                           size_t height, CopyKind kind, const Stream& s);
  CudaError memset_async(void* ptr, int value, size_t n, const Stream& s);
  CudaError host_func(const Stream& s, std::function<void()> fn);
  // Without a stream: on the destination's legacy stream, then waited for unless `wait` is false
  // (a caller that copies several pieces waits once); between servers, host-asynchronous as
  // CUDA's (memcpy_across).
  CudaError memcpy_peer(void* dst, int dst_dev, const void* src, int src_dev, size_t n,
                        const Stream* s, bool wait = true);
  // Between GPUs of two servers (client/peer_copy.cc): rows of `width` bytes, server to server,
  // on `s` (its device is one of the two), or without a stream on the destination's legacy
  // stream, host-asynchronously (peer_owed_).  Ranges are checked by the caller.
  CudaError memcpy_across(void* dst, int dst_dev, size_t dpitch, const void* src, int src_dev,
                          size_t spitch, size_t width, size_t height, const Stream* s);
  CudaError can_access_peer(int* can, int dev, int peer);
  CudaError enable_peer_access(int peer);

  // ---- devmem (client/devmem.cc)
  // A setting of the device's context on its server (proto::DeviceConfigOp: limits, cache and
  // shared-memory configuration, profiler, persisting L2); a "get" fills *value.
  CudaError device_config(int dev, uint32_t op, uint32_t key, uint64_t* value);
  // cudaDeviceP2PAttr `attr` between two virtual devices: the server's answer for two GPUs of
  // one server, 0 (no link) for devices of different servers or two names of one GPU.
  CudaError p2p_attribute(int dev, int peer, uint32_t attr, int* value);
  // Pitched allocation: `width` rounded up to the device's pitch alignment, `height` rows.
  CudaError malloc_pitch(int dev, size_t width, size_t height, void** ptr, size_t* pitch);
  // A 3-D copy between linear memory operands: `depth` slices of `height` rows of `width` bytes;
  // rows `pitch` apart, slices `pitch * slice_rows` apart.  Sent as rows of 2-D copies (one
  // request when both operands' slices follow each other, else one per slice).  Synchronous
  // without a stream.
  struct Copy3D {
    void* dst = nullptr;
    size_t dpitch = 0, dslice_rows = 0;
    const void* src = nullptr;
    size_t spitch = 0, sslice_rows = 0;
    size_t width = 0, height = 0, depth = 0;
    CopyKind kind = CopyKind::Default;
  };
  CudaError memcpy3d(const Copy3D& c, const Stream* s);
  // Between device memory of two virtual devices (cudaMemcpy3DPeer).
  CudaError memcpy3d_peer(const Copy3D& c, int dst_dev, int src_dev, const Stream* s);
  // cudaMemset3D: the rows of the box, as few 1-D memsets as the layout allows.
  CudaError memset3d(void* ptr, size_t pitch, size_t slice_rows, int value, size_t width,
                     size_t height, size_t depth, const Stream* s);
  // ---- graphs (client/graphs.cc)
  CudaError graph_create(Graph** out);
  CudaError graph_destroy(Graph* g);
  // The graph, its child graphs (which their nodes own) and their server copies.
  CudaError graph_destroy_tree(Graph* g);
  // Adds a node recording request `type` (0: an empty node) with `body`, and `payload` bytes for
  // a host-to-device copy.
  CudaError graph_add(Graph* g, const std::vector<GraphNode*>& deps, uint16_t type,
                      std::vector<uint8_t> body, const void* payload, size_t payload_bytes,
                      GraphNode** out);
  // Each graph_add_* records a new node, or with t.node replaces that node's parameters
  // (cudaGraph*NodeSetParams; in t.exec: cudaGraphExec*NodeSetParams).
  // With `attrs` (kernel node attributes; no events), the node records a LaunchEx.
  CudaError graph_add_kernel(const NodeTarget& t, const Function* f, Dim3 grid, Dim3 block,
                             void** args, size_t shared_mem, GraphNode** out,
                             const std::vector<LaunchAttribute>& attrs = {});
  CudaError graph_add_memcpy(const NodeTarget& t, void* dst, size_t dpitch, const void* src,
                             size_t spitch, size_t width, size_t height, CopyKind kind,
                             GraphNode** out);
  CudaError graph_add_memset(const NodeTarget& t, void* ptr, int value, size_t n, GraphNode** out);
  CudaError graph_add_host(const NodeTarget& t, std::function<void()> fn, GraphNode** out);
  CudaError graph_add_event(const NodeTarget& t, Event* event, bool wait, GraphNode** out);
  // `move`: the node takes `child` itself (cudaGraphChildGraphOwnershipMove) instead of a clone.
  CudaError graph_add_child(Graph* g, const std::vector<GraphNode*>& deps, Graph* child,
                            GraphNode** out, bool move = false);
  CudaError graph_edges(Graph* g, const std::vector<GraphNode*>& from,
                        const std::vector<GraphNode*>& to, bool remove);
  CudaError graph_clone(Graph* g, Graph** out);
  CudaError graph_instantiate(Graph* g, GraphExec** out);
  CudaError graph_exec_update(GraphExec* e, Graph* g);
  CudaError graph_exec_destroy(GraphExec* e);
  CudaError graph_launch(GraphExec* e, const Stream& s);
  CudaError capture_begin(const Stream& s, unsigned mode);
  // `out` null: allowed for a capture into an existing graph (cudaStreamBeginCaptureToGraph), as
  // CUDA programs do; a fresh capture's graph is then destroyed and the call fails.
  CudaError capture_end(const Stream& s, Graph** out);
  // status: 0 none, 1 active, 2 invalidated.
  CudaError capture_info(const Stream& s, unsigned* status, unsigned long long* sequence,
                         Graph** graph, std::vector<GraphNode*>* deps = nullptr);
  // ---- graphs3 (client/graphs3.cc): stream attributes, node removal and enabling, child graphs
  // Stream attribute `a.id` (cudaStreamAttrID): set it (op 0), read it into `a` (op 1), or copy
  // every attribute of `src` onto `s` (op 2).  Values encoded as launch attributes'.
  CudaError stream_attribute(const Stream& s, unsigned op, LaunchAttribute& a, const Stream* src);
  CudaError graph_destroy_node(GraphNode* n);
  CudaError graph_node_enable(GraphExec* x, GraphNode* n, bool enable);
  // The copies of the child graph that child-graph node `n` flattened into `x` take `child`'s
  // nodes (same shape).
  CudaError graph_exec_child(GraphExec* x, GraphNode* n, Graph* child);
  // Capture on `s` into the existing graph `g`, after `deps` (cudaStreamBeginCaptureToGraph);
  // capture_end then returns `g` with the captured nodes added.
  CudaError capture_to(const Stream& s, Graph* g, const std::vector<GraphNode*>& deps,
                       unsigned mode);
  // The nodes the capturing stream's next node depends on: `deps` (set) or also `deps`.
  CudaError capture_deps(const Stream& s, const std::vector<GraphNode*>& deps, bool set);
  // ---- conditional nodes (client/graphs_cond.cc)
  // A conditional handle of `g` (its value the server's), default `value`, `flags` 0 or
  // cudaGraphCondAssignDefault.
  CudaError graph_cond_handle(Graph* g, unsigned value, unsigned flags, uint64_t* out);
  // A conditional node (type 0 if, 1 while, 2 switch) of `g` after `deps`, with `size` new empty
  // body graphs ((*out)->bodies, owned by the node).
  CudaError graph_add_conditional(Graph* g, const std::vector<GraphNode*>& deps, uint64_t handle,
                                  unsigned type, unsigned size, GraphNode** out);
  // ---- graphs4 (client/graphs4.cc): graph memory nodes
  // An allocation node of `bytes` on the graph's device after `deps`: its memory (in the
  // device's window) is backed now and named by (*out)->alloc.
  CudaError graph_add_mem_alloc(Graph* g, const std::vector<GraphNode*>& deps, size_t bytes,
                                GraphNode** out);
  // A free node of `ptr`, a graph allocation's address.
  CudaError graph_add_mem_free(Graph* g, const std::vector<GraphNode*>& deps, void* ptr,
                               GraphNode** out);
  // cudaFree / cudaFreeAsync of `ptr`: true when it is a graph allocation (then *e says how the
  // free went: an allocation not outstanding from a launch is an invalid value).
  bool graph_mem_free(void* ptr, CudaError* e);
  // cudaGraphMemAttributeType `attr` of device `dev` (used/reserved, current/high): read, or
  // reset (a high mark, to 0 only); trim.
  CudaError graph_mem_attribute(int dev, int attr, uint64_t* value);
  CudaError graph_mem_reset(int dev, int attr, uint64_t value);
  CudaError graph_mem_trim(int dev);
  // A memset node of `height` rows of `width` elements of `elem` bytes (1, 2, 4), `pitch` apart.
  CudaError graph_add_memset2d(const NodeTarget& t, void* ptr, size_t pitch, unsigned value,
                               unsigned elem, size_t width, size_t height, GraphNode** out);
  // Capture modes across threads: a capture begun on `s` by this thread in `mode`
  // (cudaStreamCaptureMode), or ended; and a potentially unsafe call (cudaMalloc...) on a thread
  // whose own mode is `thread_mode`: 900 (cudaErrorStreamCaptureUnsupported) when a capture
  // prohibits it, which is then invalidated, as natively.
  void capture_started(const Stream& s, unsigned mode);
  void capture_stopped(const Stream& s);
  CudaError unsafe_call(unsigned thread_mode);
  // cudaMallocAsync / cudaFreeAsync on `s`: true when `s` is capturing (then the call became a
  // memory node of the capture, and *e says how that went).
  bool graph_capture_alloc(void** ptr, size_t size, const Stream& s, CudaError* e);
  bool capture_running();  // a capture of this process is on (any stream, any server)
  bool capture_running_on(const ServerLink* l);  // ... on a stream of that server
  bool graph_capture_free(void* ptr, const Stream& s, CudaError* e);
  // ---- pools (client/pools.cc): stream-ordered allocation and mapped page-locked memory
  // A memory pool of a virtual device: the server's pool `id` (0: the device's default pool).
  struct MemPool {
    int device = 0;
    uint64_t id = 0;
    unsigned handle_types = 0;  // cudaMemAllocationHandleType bits it may be exported as
    bool imported = false;      // made by cudaMemPoolImportFromShareableHandle
  };
  CudaError mem_pool_default(int dev, MemPool** out);
  CudaError mem_pool_current(int dev, MemPool** out);
  CudaError mem_pool_set_current(int dev, MemPool* pool);
  CudaError mem_pool_create(int dev, uint64_t max_size, MemPool** out);
  CudaError mem_pool_destroy(MemPool* pool);
  // attr: cudaMemPoolAttr numbers.
  CudaError mem_pool_set_attr(MemPool* pool, uint32_t attr, uint64_t value);
  CudaError mem_pool_get_attr(MemPool* pool, uint32_t attr, uint64_t* value);
  CudaError mem_pool_trim(MemPool* pool, uint64_t keep);
  // Whether virtual device `dev` may use the pool's memory (its own device always may).
  CudaError mem_pool_set_access(MemPool* pool, int dev, bool read_write);
  CudaError mem_pool_get_access(MemPool* pool, int dev, bool* read_write);
  // `pool` null: the stream's device's current pool.
  CudaError malloc_async(void** ptr, size_t size, MemPool* pool, const Stream& s);
  CudaError free_async(void* ptr, const Stream& s);
  // Mapped page-locked memory: the device pointer of page-locked host memory, and its flags.
  CudaError host_device_pointer(void* host, void** device_ptr);
  CudaError host_flags(void* host, unsigned* flags);
  // cudaHostAllocMapped where the server is across the network (client/pools.cc): managed memory
  // stands in, one address on both sides, its pages moved at launches and synchronizations.
  CudaError host_alloc_emulated(int dev, size_t size, unsigned flags, void** ptr);
  // True (with its base and cudaHostAlloc flags) when `p` lies in such an allocation.
  bool emulated_mapped(const void* p, uint64_t* base, unsigned* flags) const;

  // ---- misc2 (client/misc2.cc): pools shared between processes of one server
  static constexpr size_t kPoolShareBytes = 64;
  CudaError mem_pool_export_fd(MemPool* pool, unsigned handle_type, int* fd);
  CudaError mem_pool_import_fd(int fd, unsigned handle_type, MemPool** out);
  // `data`: kIpcHandleBytes (cudaMemPoolPtrExportData).
  CudaError mem_pool_export_pointer(void* ptr, uint8_t* data);
  CudaError mem_pool_import_pointer(MemPool* pool, const uint8_t* data, void** ptr);
  // cudaFree / cudaFreeAsync of an imported pointer: true when `ptr` was one (*e: the unmap).
  bool pool_import_release(void* ptr, CudaError* e);
  bool is_pool_import(const void* ptr);

  // ---- ipc (client/ipc.cc): CUDA IPC between processes using the same server
  static constexpr size_t kIpcHandleBytes = 64;
  CudaError ipc_get_mem_handle(void* ptr, uint8_t* handle);
  CudaError ipc_open_mem_handle(const uint8_t* handle, int dev, void** ptr);
  CudaError ipc_close_mem_handle(void* ptr);
  // ---- vmm (client/vmm.cc): the driver's virtual memory management.  A reservation lies in one
  // device's window (`dev`: the current context's); handles are ids of this process, each naming
  // a physical allocation of one device's server; mapped ranges are device memory in the address
  // map (not freeable) for the copies, memsets and launches of every front-end.
  struct VmmProperties {
    int device = 0;
    uint64_t size = 0;
    uint32_t handle_types = 0;  // CUmemAllocationHandleType bits asked for
  };
  CudaError vmm_granularity(int dev, bool recommended, uint64_t* granularity);
  CudaError vmm_reserve(int dev, uint64_t size, uint64_t alignment, uint64_t* addr);
  CudaError vmm_address_free(uint64_t addr, uint64_t size);
  CudaError vmm_create(int dev, uint64_t size, uint32_t handle_types, uint64_t* handle);
  CudaError vmm_release(uint64_t handle);
  CudaError vmm_map(uint64_t addr, uint64_t size, uint64_t offset, uint64_t handle);
  CudaError vmm_unmap(uint64_t addr, uint64_t size);
  // Access for virtual device `peer` (which must share the reservation's server).
  CudaError vmm_set_access(uint64_t addr, uint64_t size, int peer, uint32_t flags);
  CudaError vmm_get_access(uint64_t addr, int peer, uint32_t* flags);
  CudaError vmm_retain(uint64_t addr, uint64_t* handle);
  CudaError vmm_properties(uint64_t handle, VmmProperties* out);
  // ---- arrays (client/arrays.cc): CUDA arrays (ids chosen here: creation costs no round
  // trip), copies with array operands, texture and surface objects.  Descriptions are in the
  // driver's terms (CUarray_format, CUDA_ARRAY3D_* flags).
  struct ArrayDesc {
    uint64_t width = 0, height = 0, depth = 0;
    uint32_t format = 0, channels = 0, flags = 0;
    uint32_t levels = 0;   // a mipmapped array's levels; 0: a plain array
    uint32_t element = 0;  // bytes per element
  };
  struct ArrayRecord {
    int device = 0;
    ArrayDesc desc;
    uint64_t owner = 0;                  // a level's mipmapped array
    std::map<uint32_t, uint64_t> named;  // a mipmapped array's levels named so far
  };
  CudaError array_create(int dev, const ArrayDesc& d, uint64_t* id);
  // The array of level `level` of a mipmapped array (the same id every time).
  CudaError array_level(uint64_t mipmapped, uint32_t level, uint64_t* id);
  CudaError array_destroy(uint64_t id, bool mipmapped);
  // False for an id that is no live array (mipmapped or not, as `mipmapped` says).
  bool array_record(uint64_t id, bool mipmapped, ArrayRecord* out);
  // proto::ArrayQueryOp `op` of an array on virtual device `dev` (its own device).
  // The widest 1-D linear texture of a format on `dev`, in elements (driver format numbering).
  CudaError texture1d_linear_max_width(int dev, uint32_t format, uint32_t channels, size_t* width);
  CudaError array_query(uint64_t id, bool mipmapped, int dev, uint32_t op,
                        std::vector<uint64_t>* values);
  // One operand of an array copy: an array (`array` non-zero), or linear memory (host or device)
  // at `ptr` with rows `pitch` bytes and slices `slice_rows` rows apart; the box starts `x`
  // bytes, `y` rows, `z` slices in.
  struct ArraySide {
    uint64_t array = 0;
    const void* ptr = nullptr;
    size_t pitch = 0, slice_rows = 0, x = 0, y = 0, z = 0;
  };
  // `width` bytes x `height` rows x `depth` slices; synchronous without a stream.  Host memory is
  // staged through device memory of the array's GPU, in chunks, with the ordinary bulk copies.
  CudaError array_copy(const ArraySide& dst, const ArraySide& src, size_t width, size_t height,
                       size_t depth, CopyKind kind, const Stream* s);
  // A texture (req.surface 0) or surface object on virtual device `dev`; `req.array` is the
  // client's array id.  *object is the server's CUtexObject/CUsurfObject.
  CudaError texture_create(int dev, proto::TexCreateReq req, uint64_t* object);
  CudaError texture_destroy(int dev, bool surface, uint64_t object);

  // ---- managed (client/managed.cc): managed memory emulated over the address windows
  static constexpr unsigned kAttachGlobal = 1, kAttachHost = 2, kAttachSingle = 4;
  static constexpr int kCpuDevice = -1;
  CudaError malloc_managed(int dev, size_t size, unsigned flags, void** ptr);
  // The host shadow of a __managed__ variable (or a library global used as one) on the current
  // device: a host mapping kept coherent with the module global at the same ownership points as
  // cudaMallocManaged memory; made at the first call, the same address afterwards.
  CudaError managed_variable(const Variable* v, void** host);
  bool is_managed(uint64_t p) const;
  // `location`: a device ordinal or kCpuDevice.
  CudaError mem_prefetch(const void* p, size_t n, int location);
  CudaError mem_discard(const void* p, size_t n);
  // The batch forms (cudaMemPrefetchBatchAsync, ...DiscardBatchAsync, ...DiscardAndPrefetch...):
  // range i is discarded (`discard`) and/or prefetched (`prefetch`) to where[j] for the last j
  // with idxs[j] <= i; the batch's shape is checked first.  client/managed_batch.cc.
  CudaError mem_batch(void* const* ptrs, const size_t* sizes, size_t count, const int* where,
                      const size_t* idxs, size_t nlocs, bool discard, bool prefetch);
  // advice: cudaMemoryAdvise numbers (1-6).
  CudaError mem_advise(const void* p, size_t n, int advice, int location);
  CudaError mem_range(const void* p, size_t n, ManagedRange* out);
  CudaError stream_attach(const Stream& s, void* p, size_t length, unsigned flags);
  ManagedStats managed_stats() const;
  // Hooks: device work on `dev`'s `stream` (a launch) or on [p, p + n) (a copy or memset) is
  // about to be sent: the host's changes go first, then the range becomes the device's.
  CudaError managed_before_work(int dev, uint64_t stream);
  CudaError managed_before_access(uint64_t p, uint64_t n, bool write);
  // A copy with a managed operand is a copy of device memory, whatever kind the caller named.
  void managed_copy_kind(const void* dst, const void* src, CopyKind* kind) const;
  CudaError managed_copy(const void* dst, size_t dst_bytes, const void* src, size_t src_bytes);
  void managed_synchronized(int dev);
  // The SIGSEGV handler's question: an access at `addr` faulted; true when it was a managed
  // granule and the access can now be retried.
  bool managed_fault(uint64_t addr);

  // ---- misc (client/misc.cc): peer access undone, RDMA flushes, atomic capabilities, IPC events
  CudaError disable_peer_access(int peer);
  CudaError flush_rdma_writes(uint32_t target, uint32_t scope);
  // The capability bits of `count` atomic operations between `dev` and the host (`peer` < 0) or
  // GPU `peer`.
  CudaError atomic_caps(int dev, int peer, const uint32_t* ops, unsigned count, uint32_t* caps);
  CudaError ipc_get_event_handle(Event* event, uint8_t* handle);  // kIpcHandleBytes
  CudaError ipc_open_event_handle(const uint8_t* handle, Event** out);

  // ---- drvlibs (client/drvlibs.cc): driver calls NVIDIA's libraries need
  // A tensor map's arguments as the program gave them (proto::TensorMapEncodeReq says which
  // arrays hold what); encoded by the current device's server.
  struct TensorMapSpec {
    uint32_t kind = 0, data_type = 0, rank = 0;
    uint64_t address = 0;
    std::vector<uint64_t> dims, strides;
    std::vector<uint32_t> box, elem_strides;
    std::vector<int32_t> lower, upper;
    uint32_t channels = 0, pixels = 0, interleave = 0, swizzle = 0, l2_promotion = 0, oob_fill = 0,
             mode = 0;
  };
  CudaError tensor_map_encode(const TensorMapSpec& spec, uint8_t (&map)[128]);
  CudaError tensor_map_replace_address(uint8_t (&map)[128], uint64_t address);
  // cuOccupancyMaxPotentialBlockSize: `smem_of` (may be empty) is the program's callback,
  // evaluated here for every candidate block size; one round trip either way (two when the
  // function allows fewer threads than the device and not a multiple of the warp size).
  CudaError occupancy_block_size(const Function* f, const std::function<size_t(int)>& smem_of,
                                 size_t dynamic_smem, int limit, unsigned flags, int* min_grid,
                                 int* block_size);
  // Stream memory operations (op: CUstreamBatchMemOpType's number), in order on `s`.
  struct MemOp {
    uint32_t op = 0, flags = 0;
    uint64_t address = 0, value = 0;
  };
  CudaError stream_mem_ops(const Stream& s, const std::vector<MemOp>& ops);
  // cuLink* (client/drvlibs_link.cc): the state lives on the current device's server; the linked
  // image is fetched once and kept here until link_destroy.
  struct LinkState {
    int device = 0;
    uint64_t id = 0;
    std::vector<uint8_t> image;
  };
  CudaError link_create(LinkState** out);
  // Null when `h` is no live link state of this process.
  LinkState* link_of(const void* h);
  CudaError link_add(LinkState* l, uint32_t type, const void* data, size_t size,
                     const std::string& name);
  CudaError link_complete(LinkState* l, const void** image, size_t* size);
  CudaError link_destroy(LinkState* l);

 private:
  // ---- process state that code linked into both libraries reaches through the one Client
  Logs* logs_ = nullptr;
  Notifications* notify_ = nullptr;  // never destroyed (its thread lives as long as the process)
  ManagedState* managed_ = nullptr;  // client/managed.cc
  // The calling thread's per-thread default streams by device: a thread_local of the library
  // that made this Client, bound at construction (client/streams.cc).
  std::map<int, Stream*>& (*per_thread_streams_)() = nullptr;
  std::mutex once_mu_;
  std::mutex func_cache_mu_;  // KernelInfo::attrs and ::occupancy
  mutable std::mutex emulated_mu_;
  std::map<uint64_t, std::pair<uint64_t, unsigned>> emulated_mapped_;  // base -> size, flags
  std::set<std::string> logged_once_;
  std::mutex tls_mu_;
  transport::TlsContext* tls_ = nullptr;  // never freed, as the Client
  std::mutex link_states_mu_;             // drvlibs: live cuLink* states
  std::set<LinkState*> link_states_;
  std::mutex arrays_mu_;
  std::map<uint64_t, ArrayRecord> arrays_;  // live arrays (and named levels) by id
  std::atomic<uint64_t> next_array_{1};
  CudaError graph_link(int dev, ServerLink** l);
  CudaError graph_place(const NodeTarget& t, uint16_t type, std::vector<uint8_t> body,
                        const void* payload, size_t payload_bytes, GraphNode** out);
  std::mutex graphs_mu_;
  std::map<std::pair<const ServerLink*, uint64_t>, Graph*> capturing_;  // by link and graph id
  // ---- graphs4 (client/graphs4.cc): graph memory.  Never drop the last reference of a
  // GraphAlloc while holding gmem_mu_ (its deleter takes it).
  struct GraphMemMarks {
    uint64_t used_high = 0, reserved_high = 0;
  };
  std::mutex gmem_mu_;
  // ---- peer copies (client/peer_copy.cc): the pairs of servers (active, passive) whose peer
  // link exists, with the active server's peer_copy_failures() when it was made.
  std::mutex peer_links_mu_;
  std::map<std::pair<const ServerLink*, const ServerLink*>, uint64_t> peer_links_;
  std::atomic<uint64_t> peer_fences_{0};  // PeerFence ids
  // Asynchronous copies between servers that read or write the memory of a passive device
  // (client device -> the active devices' streams), not yet known to be over: a free on that
  // device waits for them first (settle_peer_copies), as the servers may map each other's
  // memory and a late copy must not see memory handed out again.
  std::mutex peer_pending_mu_;
  std::map<int, std::set<std::pair<int, uint64_t>>> peer_pending_;
  CudaError settle_peer_copies(int dev);  // the first error of those streams
  // cudaMemcpyPeer between servers (and the synchronous D2D copies like it) returns once the copy
  // is queued on the destination's legacy stream, as CUDA's is asynchronous to the host; the
  // source's later work must not overwrite what the copy has yet to read, so the next call for
  // that device waits for those legacy streams first (settle_owed, from link()): passive device
  // -> active device -> the newest such copy's number (a copy queued while a settle waits stays
  // owed).  One settle at a time (peer_settle_mu_, taken before peer_pending_mu_): a call that
  // finds the device owed waits until the copies are over, even when another thread waits.
  std::map<int, std::map<int, uint64_t>> peer_owed_;  // under peer_pending_mu_
  uint64_t peer_owed_seq_ = 0;                        // under peer_pending_mu_
  std::atomic<int> peer_owed_devices_{0};             // peer_owed_.size(), read without the lock
  std::mutex peer_settle_mu_;
  // Waits for those copies.  Not while a capture is on (waiting would end it; they stay owed)
  // unless `even_capturing` (a free).  A failed copy's error is left for the active server's
  // next call to report.
  void settle_owed(int dev, bool even_capturing = false);
  // The program synchronized device `active` (cudaDeviceSynchronize, or its legacy stream): the
  // copies it owed that were queued before (newest number `seq`, from owed_mark) are over.
  uint64_t owed_mark();
  void owed_settled_by(int active, uint64_t seq);
  // The passive session keeps the fences of at most 1024 copies not yet begun
  // (server/peer_host.cc): every kPeerInflight-th copy from one passive server first waits for the
  // streams of the copies before it, as CUDA's queue blocks when it is full (throttle_across).
  static constexpr unsigned kPeerInflight = 256;
  struct PeerInflight {
    unsigned count = 0;
    std::set<std::pair<int, uint64_t>> streams;  // (active device, stream id)
  };
  std::map<const ServerLink*, PeerInflight>
      peer_inflight_;  // by passive server, under peer_pending_mu_
  void throttle_across(const ServerLink* passive, int active, uint64_t stream);
  // cudaStreamSynchronize without link()'s settle; an error is also left for the stream's server
  // to report again (the caller waits for ordering, not for the error).
  CudaError synchronize_for_peer(const Stream& s);
  std::map<uint64_t, GraphAlloc> gmem_all_;                    // every backed one, by address
  std::map<uint64_t, std::shared_ptr<GraphAlloc>> gmem_live_;  // allocated by a launch, not freed
  std::map<int, GraphMemMarks> gmem_marks_;
  void gmem_totals(int dev, uint64_t* used, uint64_t* reserved);  // under gmem_mu_
  void gmem_note(int dev);                                        // under gmem_mu_: high marks
  // The memory nodes' effect of launching `x` (after the server took the launch).
  CudaError graph_mem_launch(GraphExec* x);
  CudaError graph_mem_launch_check(GraphExec* x);
  void graph_mem_instantiate(const Graph* g, GraphExec* x);
  CudaError gmem_allocate(int dev, size_t bytes, std::shared_ptr<GraphAlloc>* out);
  struct CaptureOwner {
    Stream stream;
    unsigned mode = 0;
    std::thread::id thread;
  };
  std::mutex owners_mu_;
  std::vector<CaptureOwner> capture_owners_;
  Graph* gmem_capture(const Stream& s, unsigned* status);  // the graph `s` captures into
  CudaError gmem_capture_node(Graph* g, const Stream& s, uint32_t kind, GraphNode** out);
  explicit Client(bool configured);
  CudaError resolve_kind(const void* dst, const void* src, CopyKind& kind) const;
  // Enters an allocation the server made for device `dev` into the address map, after checking
  // it lies in the device's window clear of every known range; false (logged, naming `what`)
  // otherwise, and the caller gives it back.
  bool adopt_allocation(int dev, uint64_t ptr, size_t size, const char* what);
  // What a copy's pointers are: device ranges (whole extent inside one allocation) or host.
  struct CopyPlan {
    bool empty = false;
    CopyKind kind = CopyKind::Default;
    bool d_ok = false, s_ok = false;    // the extent lies in one device allocation
    bool d_dev = false, s_dev = false;  // the start is device memory
    int ddev = -1, sdev = -1;
  };
  CudaError plan_copy(const void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                      size_t height, CopyKind kind, CopyPlan* plan) const;
  // A 1-D copy between device memory and a shared page-locked segment of the same server: one
  // DMA on the server, no bytes on the transport.  False when the copy does not qualify.
  bool copy_shared(const void* host, uint64_t device_ptr, size_t n, bool to_device, int dev,
                   const Stream* stream, CudaError* result);
  // A large device-to-host copy into ordinary memory over shared memory: the GPU writes chunks
  // into a shared bounce segment while this process copies the previous chunk out (one CPU copy,
  // overlapped with the DMA).  False when the copy does not qualify.
  bool copy_through_bounce(void* dst, uint64_t src, size_t n, int dev, CudaError* result);
  // A kernel found on `dev` (resolved at the first ask), its link and the request naming it.
  CudaError kernel_on(const Function* f, int dev, ServerLink** l, proto::FuncReq* req,
                      const KernelInfo** k);
  // module_on's round trip: by hash when `l` holds the image (held_on), else with the image;
  // `legacy`: a server that knows only ModuleLookup/ModuleLoad.  `why`: the server's reason.
  CudaError fetch_module(ServerLink* l, Module* m, uint32_t gpu, bool legacy,
                         const std::vector<proto::NameAt>& functions,
                         const std::vector<proto::NameAt>& variables, proto::ModuleSlotsRep* rep,
                         std::string* why);
  // Whether `l` holds `m`'s image: 1, 0, or -1 when unknown.  Asks when not known yet, together
  // with every other hashed image whose answer is not known (one ModuleHave), unless `m` is the
  // only one (ModuleResolve then asks).
  int held_on(ServerLink* l, Module* m);
  Event* find_event(Event* handle);
  // Destroys a stream or event already removed from streams_/events_ (context teardown).
  void release_contents(const ContextContents& c);
  struct Virtual {
    DeviceSpec spec;
    ServerLink* link = nullptr;
    std::unique_ptr<DeviceInfo> info;
    bool window_reserved = false;  // spec's window is reserved in this process
    bool window_named = false;     // the server knows the window (under window_mu_)
  };
  // Tells the server the device's address window before its first allocation.
  CudaError name_window(int dev, ServerLink* l);
  std::mutex window_mu_;
  std::vector<Virtual> devices_;
  uint64_t eager_bytes_ = 0;
  std::vector<std::unique_ptr<ServerLink>> links_;
  // Stream waits for another server's event (client/xwaits.cc): gates not yet opened, by id.
  struct CrossWait {
    ServerLink* event_link;
    ServerLink* stream_link;
  };
  std::mutex xwait_mu_;
  std::map<uint64_t, CrossWait> xwaits_;
  uint64_t next_gate_ = 1;
  CudaError cross_server_wait(const Stream& s, Event* ev);
  void open_cross_gate(uint64_t gate, CudaError error, const std::string& why);
  void event_link_lost(ServerLink* l, const std::string& why);
  std::mutex info_mu_;
  AddressMap map_;
  std::unique_ptr<SmallAllocations> small_;  // small cudaMalloc from slabs (client/small_allocs.h)
  // A chunk for a small allocation (a reclaim or a new slab when none is free), *e the outcome;
  // false when the caller should ask the server for the allocation itself (an older server, an
  // error the link holds, no memory for a slab).
  bool small_chunk(int dev, ServerLink* l, size_t size, void** ptr, CudaError* e);
  // A synchronization of `s` would return at once (client/streams.cc); counted as answered here
  // (as request `would_be`).  RGPU_LOCAL_SYNC=0: never.
  bool idle_known(ServerLink* l, const Stream& s, proto::MsgId would_be);
  bool local_sync_ = true;
  ModuleStore modules_;
  ContextTable contexts_;
  std::unique_ptr<std::atomic<bool>[]> runtime_retained_;  // the runtime's primary reference
  struct Bounce {
    std::mutex mu;  // one copy at a time through it
    char* base = nullptr;
    uint64_t segment = 0;
  };
  std::map<const ServerLink*, std::unique_ptr<Bounce>> bounces_;
  std::mutex bounces_mu_;
  std::mutex objects_mu_;
  std::set<Stream*> streams_;  // live streams and events, to refuse stale handles
  std::set<Event*> events_;
  // ---- pools (client/pools.cc)
  bool is_pool_allocation(uint64_t ptr);
  MemPool* live_pool(MemPool* pool);  // null for a handle that is not a live pool
  // Maps a new shared page-locked segment at this process's address in the session too; where the
  // session has that range taken, the segment moves (here, *base changes) to an address free in
  // both processes and is asked for again.  *mapped false: the session could not map it anywhere.
  CudaError map_shared_segment(ServerLink* l, int dev, uint64_t key, void** base, size_t size,
                               bool* mapped);
  CudaError pool_on_server(int dev, uint64_t max_size, std::unique_ptr<MemPool>* out);
  void forget_pools(int dev);  // cudaDeviceReset: the device's pools and allocations are gone
  std::mutex default_pool_mu_;
  std::mutex pools_mu_;
  std::set<MemPool*> pools_;                             // live pools made by the program
  std::vector<std::unique_ptr<MemPool>> default_pools_;  // per device, made at first use
  std::map<int, MemPool*> current_pool_;                 // per device, when set
  std::map<MemPool*, std::set<int>> pool_access_;        // devices given access (beyond its own)
  std::set<uint64_t> pool_ptrs_;                         // live stream-ordered allocations
  std::set<uint64_t> pool_imports_;  // pointers from cudaMemPoolImportPointer (client/misc2.cc)
  // ---- managed (client/managed.cc)
  bool managed_forget(uint64_t base);  // false when `base` is no managed allocation
  void managed_forget_device(int dev);
  CudaError managed_push(int dev, uint64_t base, uint64_t dev_base,
                         const std::vector<PageRun>& send,
                         const std::vector<PageRun>& protect_none);
  // Fetches the device's granules of [addr, addr + n) (all of them, or only the run at addr).
  CudaError managed_fetch(uint64_t addr, uint64_t n, bool all);
  // ---- vmm (client/vmm.cc)
  struct VmmReservation {
    int device = 0;
    uint64_t size = 0;
  };
  // The reservation holding [addr, addr + size) (size 0: addr only); false when there is none.
  bool vmm_reservation_of(uint64_t addr, uint64_t size, VmmReservation* out);
  void vmm_forget(const std::vector<uint64_t>& unmapped, const std::vector<uint64_t>& released);
  void vmm_forget_device(int dev);  // cudaDeviceReset: the server released them
  std::mutex vmm_mu_;
  std::map<uint64_t, VmmProperties> vmm_handles_;     // live handles
  std::map<uint64_t, VmmReservation> vmm_reserved_;   // by start address
  uint64_t vmm_next_handle_ = 0x766d6d0000000001ull;  // "vmm" tag: a stray value is no handle
  // ---- ipc (client/ipc.cc)
  std::mutex ipc_mu_;
  std::set<uint64_t> ipc_imports_;  // bases of memory opened with cudaIpcOpenMemHandle
};

}  // namespace rgpu::client
