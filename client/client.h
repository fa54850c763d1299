// The client core: virtual devices (RGPU_SERVERS entries), their server links, the address map,
// and the CUDA memory operations in API-neutral form.  Frontends (libcudart, later libcuda) are
// thin translations onto this.  Every operation returns a CUDA error code.
#pragma once

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
};
struct Event {
  int device = 0;
  uint64_t id = 0;
  unsigned flags = 0;
};

enum class MemoryType { Unregistered = 0, Host = 1, Device = 2 };
struct PointerInfo {
  MemoryType type = MemoryType::Unregistered;
  int device = -2;
  uint64_t base = 0;
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

  // Kernels and modules (client/kernels.cc).
  Registry& registry() { return registry_; }
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
  // Stream handles as the application passes them: 0, cudaStreamLegacy (1), cudaStreamPerThread
  // (2) or a Stream*.  `per_thread_default` says how 0 reads (the _ptsz/_ptds entry points).
  CudaError resolve_stream(uint64_t handle, bool per_thread_default, Stream* out);
  CudaError stream_create(unsigned flags, int priority, Stream** out);
  CudaError stream_destroy(uint64_t handle);
  CudaError stream_synchronize(const Stream& s);
  CudaError stream_query(const Stream& s);
  CudaError stream_wait_event(const Stream& s, uint64_t event);
  CudaError stream_priority_range(int dev, int* least, int* greatest);
  bool stream_flags(uint64_t handle, bool per_thread_default, unsigned* flags, int* priority);
  CudaError event_create(unsigned flags, Event** out);
  CudaError event_destroy(uint64_t handle);
  CudaError event_record(uint64_t event, const Stream& s);
  CudaError event_query(uint64_t event);
  CudaError event_synchronize(uint64_t event);
  CudaError event_elapsed(float* ms, uint64_t start, uint64_t end);
  CudaError memcpy2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                           size_t height, CopyKind kind, const Stream& s);
  CudaError memset_async(void* ptr, int value, size_t n, const Stream& s);
  CudaError host_func(const Stream& s, std::function<void()> fn);
  CudaError memcpy_peer(void* dst, int dst_dev, const void* src, int src_dev, size_t n,
                        const Stream* s);
  CudaError can_access_peer(int* can, int dev, int peer);
  CudaError enable_peer_access(int peer);

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
  Event* find_event(uint64_t handle);
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
  Registry registry_;
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
};

}  // namespace rgpu::client
