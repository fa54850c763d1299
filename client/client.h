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
#include <vector>

#include "client/address_map.h"
#include "client/config.h"
#include "client/context.h"
#include "client/errors.h"
#include "client/modules.h"
#include "client/server_link.h"
#include "common/cuda_errors.h"

namespace rgpu::client {

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

enum class MemoryType { Unregistered = 0, Host = 1, Device = 2 };
struct PointerInfo {
  MemoryType type = MemoryType::Unregistered;
  int device = -2;
  uint64_t base = 0;
  bool mapped = false;  // page-locked memory the GPU reaches at the same address
};

class Client {
 public:
  static Client& get();

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

  ServerLink* link(int dev, CudaError* e);

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
  // Loads `m` on virtual device `dev` once (by hash when the server has it) and resolves it.
  CudaError module_on(Module* m, int dev, const LoadedModule** out);
  CudaError launch(const Function* f, Dim3 grid, Dim3 block, void** args, size_t shared_mem,
                   const Stream& stream);
  CudaError func_attributes(const Function* f, std::vector<int32_t>& values);
  CudaError func_set_attribute(const Function* f, int attr, int value);
  CudaError func_set_cache_config(const Function* f, int config);
  CudaError occupancy(const Function* f, int block_size, size_t dynamic_smem, unsigned flags,
                      int* blocks);
  // Address of a __device__/__constant__ variable on the current device.
  CudaError symbol_address(const Variable* v, uint64_t* addr);

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
  CudaError memcpy_peer(void* dst, int dst_dev, const void* src, int src_dev, size_t n,
                        const Stream* s);
  CudaError can_access_peer(int* can, int dev, int peer);
  CudaError enable_peer_access(int peer);

  // ---- pools (client/pools.cc): stream-ordered allocation and mapped page-locked memory
  // A memory pool of a virtual device: the server's pool `id` (0: the device's default pool).
  struct MemPool {
    int device = 0;
    uint64_t id = 0;
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

 private:
  Client();
  CudaError resolve_kind(const void* dst, const void* src, CopyKind& kind) const;
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
  CudaError kernel_on(const Function* f, int dev, ServerLink** l, proto::FuncReq* req,
                      const LoadedModule** lm);
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
  std::mutex info_mu_;
  AddressMap map_;
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
  // Maps a new shared page-locked segment at this process's address in the session too.
  CudaError map_shared_segment(ServerLink* l, int dev, uint64_t key, void* base, unsigned flags,
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
};

}  // namespace rgpu::client
