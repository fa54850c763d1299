// One client's session, run in its own process.  After the handshake three threads share it:
//   reader      reads requests (payloads straight into page-locked buffers) and answers
//               CallbackDone at once, so a stream held by a client callback never waits behind
//               the dispatcher;
//   dispatcher  executes requests in order; it may wait for the GPU;
//   writer      (Outbox) sends replies and everything else, in the order they were produced.
// Everything the client allocated is released when the session ends, however the connection ends.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/executor.h"
#include "proto/auth.h"
#include "proto/frame.h"
#include "server/address_windows.h"
#include "server/allocation_table.h"
#include "server/buffer_pool.h"
#include "server/host_work.h"
#include "server/module_cache.h"
#include "server/outbox.h"
#include "server/output_capture.h"
#include "server/payload.h"
#include "transport/connection.h"

namespace rgpu::server {

struct SessionConfig {
  std::optional<std::string> token;  // when set, clients must prove they hold it
  std::string server_info;           // "rgpud 0.1.0 on host"
  // Defaults chosen by measurement on an H200 (docs/benchmarks.md, scripts/gpu-tune.sh).
  size_t staging_bytes = 2u << 20;  // one page-locked buffer for device-to-host data
  size_t staging_limit = 8;         // such buffers in flight before the dispatcher waits
  size_t payload_bytes = 2u << 20;  // one page-locked buffer of a request's payload
  // Bounds of the reader's payload buffers: page-locked ones (also the client's window for
  // asynchronous host-to-device bytes), then ordinary memory, then the reader waits at most
  // `payload_patience_ms` before the session ends with an error.
  size_t payload_limit = 64;   // page-locked payload buffers (128 MiB)
  size_t payload_spill = 512;  // ordinary-memory payload buffers beyond those (1 GiB)
  int payload_patience_ms = 30000;
  const ModuleCache* module_cache = nullptr;  // shared fat binaries by hash (may be null)
  OutputCapture* output = nullptr;            // kernels' stdout, forwarded at sync points
  bool authenticated = false;  // the handshake already happened (rgpud's session process)
  // Per-client limits (0: none); exceeding one fails the request with a message naming it.
  uint64_t mem_limit = 0;  // bytes of device memory, all GPUs together (--client-mem-limit)
  size_t max_streams = 0;  // streams alive at once (--client-max-streams)
  size_t max_events = 0;   // events alive at once (--client-max-events)
  // Liveness (rgpud --client-timeout): once a frame has begun, its body and payload must arrive
  // within this many seconds, and a send to the client must make progress within it; otherwise
  // the session ends.  An idle client between requests is never timed out.
  int client_timeout_s = 30;
  uint32_t client_timeout_ms = 0;   // the client's RGPU_TIMEOUT (Hello), for the heartbeat interval
  size_t outbox_bytes = 64u << 20;  // bytes queued for the client before the dispatcher waits
};

// Bytes of asynchronous payload a client may have outstanding (the handshake tells it).
inline uint64_t payload_window(const SessionConfig& c) {
  return static_cast<uint64_t>(c.payload_limit) * c.payload_bytes;
}

class Session {
 public:
  Session(transport::Connection& conn, backend::Executor& exec, SessionConfig config);
  ~Session();
  // Serves the client until it disconnects or breaks the protocol.  Never throws.
  void run();

 private:
  using Status = backend::Status;
  struct Request {
    proto::FrameHeader header;
    std::vector<uint8_t> body;
    std::shared_ptr<PayloadStream> payload;  // arriving while the request is served
  };

  bool handshake();
  void read_loop();
  void dispatch_loop();
  void serve(Request& r);
  template <class M>
  void dispatch(Request& r);

  // Handlers, one per catalogue message (tagged by its Msg type).
  Status on(proto::PingMsg, const proto::PingReq&, proto::PingRep&);
  Status on(proto::GetDeviceInfoMsg, const proto::DeviceReq&, proto::GetDeviceInfoRep&);
  Status on(proto::DeviceSynchronizeMsg, const proto::DeviceReq&, proto::Empty&);
  Status on(proto::DeviceResetMsg, const proto::DeviceReq&, proto::Empty&);
  Status on(proto::MemGetInfoMsg, const proto::DeviceReq&, proto::MemGetInfoRep&);
  Status on(proto::MallocMsg, const proto::MallocReq&, proto::MallocRep&);
  Status on(proto::FreeMsg, const proto::FreeReq&, proto::Empty&);
  Status on(proto::AddressWindowMsg, const proto::AddressWindowReq&, proto::Empty&);
  Status on(proto::MemcpyHtoDMsg, const proto::MemcpyHtoDReq&, proto::Empty&);
  Status on(proto::MemcpyDtoHMsg, const proto::MemcpyDtoHReq&, proto::Empty&);
  Status on(proto::MemcpyDtoDMsg, const proto::MemcpyDtoDReq&, proto::Empty&);
  Status on(proto::MemsetMsg, const proto::MemsetReq&, proto::Empty&);
  Status on(proto::Memcpy2DHtoDMsg, const proto::Memcpy2DHtoDReq&, proto::Empty&);
  Status on(proto::Memcpy2DDtoHMsg, const proto::Memcpy2DDtoHReq&, proto::Empty&);
  Status on(proto::Memcpy2DDtoDMsg, const proto::Memcpy2DDtoDReq&, proto::Empty&);
  Status on(proto::MemcpyHtoDAsyncMsg, const proto::MemcpyHtoDAsyncReq&, proto::Empty&);
  Status on(proto::MemcpyDtoHAsyncMsg, const proto::MemcpyDtoHAsyncReq&, proto::Empty&);
  Status on(proto::MemcpyPeerMsg, const proto::MemcpyPeerReq&, proto::Empty&);
  Status on(proto::DeviceCanAccessPeerMsg, const proto::PeerReq&, proto::DeviceCanAccessPeerRep&);
  Status on(proto::DeviceEnablePeerMsg, const proto::PeerReq&, proto::Empty&);
  Status on(proto::ModuleLookupMsg, const proto::ModuleLookupReq&, proto::ModuleRep&);
  Status on(proto::ModuleLoadMsg, const proto::ModuleLoadReq&, proto::ModuleRep&);
  Status on(proto::LaunchMsg, const proto::LaunchReq&, proto::Empty&);
  Status on(proto::FuncGetAttributesMsg, const proto::FuncReq&, proto::FuncGetAttributesRep&);
  Status on(proto::FuncSetAttributeMsg, const proto::FuncSetAttributeReq&, proto::Empty&);
  Status on(proto::FuncSetCacheConfigMsg, const proto::FuncSetCacheConfigReq&, proto::Empty&);
  Status on(proto::OccupancyMsg, const proto::OccupancyReq&, proto::OccupancyRep&);
  Status on(proto::StreamCreateMsg, const proto::StreamCreateReq&, proto::Empty&);
  Status on(proto::StreamDestroyMsg, const proto::ObjectReq&, proto::Empty&);
  Status on(proto::StreamSynchronizeMsg, const proto::ObjectReq&, proto::Empty&);
  Status on(proto::StreamQueryMsg, const proto::ObjectReq&, proto::Empty&);
  Status on(proto::StreamWaitEventMsg, const proto::StreamWaitEventReq&, proto::Empty&);
  Status on(proto::StreamPriorityRangeMsg, const proto::DeviceReq&, proto::StreamPriorityRangeRep&);
  Status on(proto::EventCreateMsg, const proto::EventCreateReq&, proto::Empty&);
  Status on(proto::EventDestroyMsg, const proto::ObjectReq&, proto::Empty&);
  Status on(proto::EventRecordMsg, const proto::EventRecordReq&, proto::Empty&);
  Status on(proto::EventQueryMsg, const proto::ObjectReq&, proto::Empty&);
  Status on(proto::EventSynchronizeMsg, const proto::ObjectReq&, proto::Empty&);
  Status on(proto::EventElapsedMsg, const proto::EventElapsedReq&, proto::EventElapsedRep&);
  Status on(proto::HostFuncMsg, const proto::HostFuncReq&, proto::Empty&);
  Status on(proto::CallbackDoneMsg, const proto::CallbackDoneReq&, proto::Empty&);
  Status on(proto::HostShmRegisterMsg, const proto::HostShmRegisterReq&, proto::Empty&);
  Status on(proto::HostShmUnregisterMsg, const proto::HostShmUnregisterReq&, proto::Empty&);
  Status on(proto::MemcpyShmMsg, const proto::MemcpyShmReq&, proto::Empty&);
  Status on(proto::MemcpyShmAsyncMsg, const proto::MemcpyShmReq&, proto::Empty&);
  Status copy_shm(const proto::MemcpyShmReq& q, bool async);
  // Handshake messages arriving after the handshake are protocol errors.
  Status on(proto::HelloMsg, const proto::HelloReq&, proto::HelloRep&);
  Status on(proto::AuthMsg, const proto::AuthReq&, proto::Empty&);

  Status check_device(uint32_t dev) const;
  Status check_range(uint32_t dev, uint64_t ptr, uint64_t pitch, uint64_t width,
                     uint64_t height) const;
  // The backend handle of a client's stream id on GPU `dev` (0: legacy default stream).
  Status stream_of(uint32_t dev, uint64_t id, uint64_t& handle) const;
  Status event_of(uint32_t dev, uint64_t id, uint64_t& handle) const;

  // Bulk (server/bulk.cc).  Rows are packed `width` bytes each in the payload / reply.
  Status write_rows(uint32_t dev, uint64_t dst, uint64_t dpitch, uint64_t width, uint64_t height,
                    uint64_t stream, bool async);
  Status read_rows_reply(uint32_t dev, uint64_t src, uint64_t spitch, uint64_t width,
                         uint64_t height);
  Status read_rows_async(uint32_t dev, uint64_t src, uint64_t spitch, uint64_t width,
                         uint64_t height, uint64_t stream);

  // Modules (server/modules.cc).
  Status resolve_module(uint32_t dev, const proto::Hash& hash, const Image& image,
                        const std::vector<std::string>& functions,
                        const std::vector<proto::VarName>& variables, proto::ModuleRep& rep);
  Status find_kernel(const proto::FuncReq& f, uint64_t& kernel) const;
  void unload_modules(int dev);
  void forward_output();

  // Host callbacks (server/streams.cc).
  struct Gate;
  Status gate_for(uint32_t dev, uint64_t stream_id, Gate*& gate);
  void cancel_callbacks();
  void free_gates();
  // Flow control: tells the client that `bytes` of asynchronous payload are no longer held.
  void payload_done(uint64_t bytes);
  void flush_credit();

  // `block`: Outbox::Block::IfFull from the dispatcher, Never from callback threads.
  void push_frame(uint16_t type, uint16_t flags, uint64_t id, const std::vector<uint8_t>& body,
                  Outbox::Block block = Outbox::Block::Never);
  void push_error(const proto::FrameHeader& h, const Status& s);
  void push_async_error(uint64_t request_id, uint16_t type, const Status& s);

  transport::Connection& conn_;
  backend::Executor& exec_;
  SessionConfig config_;
  Outbox outbox_;
  // Two pools: the reader's (payloads; it never calls the backend, or it could not read the
  // CallbackDone a stream is waiting for) and the dispatcher's (device-to-host data; bounded, it
  // waits for the writer).  One shared limit would let queued payloads starve the dispatcher.
  BufferPool in_pool_;
  BufferPool pool_;
  // Device-to-host data of asynchronous copies, apart from pool_: its items may wait in the outbox
  // while a synchronous reply streams (Outbox::begin_group), and must not starve that reply.
  BufferPool async_pool_;
  // What host functions hand over (buffers to return, frames to queue); see server/host_work.h.
  // Declared after the pools: it is drained before they go.
  HostWork host_work_;
  std::vector<AllocationTable> allocs_;
  AddressWindows windows_;  // where allocations go (server/address_windows.h)

  // Requests from the reader to the dispatcher.
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Request> queue_;
  std::atomic<size_t> queued_{0};  // queue_.size(), readable without the lock
  bool reader_done_ = false;
  // Liveness: the dispatcher is serving a request (with queued_: the session is busy, so the
  // writer sends heartbeats every heartbeat_interval_, chosen from the client's timeout).
  std::atomic<bool> serving_{false};
  std::chrono::milliseconds heartbeat_interval_{1000};

  // Dispatcher state.
  Request* current_ = nullptr;  // the request being served
  bool reply_sent_ = false;     // the current handler already queued its reply
  CudaError sticky_ = err::Success;
  struct Object {
    uint32_t device;
    uint64_t handle;
  };
  std::map<uint64_t, Object> streams_, events_;  // by client id
  struct SharedSegment {
    char* base;
    uint64_t size;
  };
  std::map<uint64_t, SharedSegment> shared_;  // the client's page-locked segments, by its id
  struct Module {
    uint64_t handle = 0;
    fatbin::ModuleInfo info;
    std::vector<uint64_t> kernels;  // backend handles, by the client's function index (0: missing)
    std::vector<fatbin::KernelLayout> layouts;
  };
  std::vector<std::vector<Module>> modules_;                 // per GPU, by module id
  std::vector<std::map<proto::Hash, uint32_t>> module_ids_;  // per GPU
  std::map<proto::Hash, Image> images_;                      // this session's fat binaries
  uint64_t images_bytes_ = 0;
  static constexpr uint64_t kMaxSessionImages = 4ull << 30;  // bytes of images one session holds
  Status keep_image(const proto::Hash& hash, const Image& image);
  bool launched_ = false;  // a kernel ran: forward its output at sync points

  // Host callbacks.  A stream waits for its client's callback at a gate (Executor::gate_wait):
  // the n-th callback on a stream waits until its gate word reaches n; the reader opens it when
  // CallbackDone arrives.  No host function ever waits.
  struct Gate {
    uint32_t* word = nullptr;
    uint32_t issued = 0;  // callbacks queued on this stream so far
  };
  struct Callback {
    uint32_t* word;
    uint32_t seq;
  };
  std::mutex cb_mu_;                                     // never held across a backend call
  std::map<std::pair<uint32_t, uint64_t>, Gate> gates_;  // by (GPU, client stream id)
  std::map<uint64_t, Callback> callbacks_;               // by callback id, waiting for the client
  std::vector<uint32_t*> gate_pages_;
  size_t gate_used_ = 0;  // words used in the last page
  bool cancelled_ = false;
  // Asynchronous payload bytes of the request being served not yet given back by PayloadDone.
  uint64_t credit_left_ = 0;
  std::atomic<uint64_t> pending_credit_{0};  // given back, not yet told (payload_done)
  std::atomic<uint64_t> held_payload_{0};    // asynchronous payload not yet given back
  std::atomic<bool> idle_{false};            // the dispatcher waits for a request
};

}  // namespace rgpu::server
