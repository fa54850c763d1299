// One client's session, run in its own process.  After the handshake these threads share it:
//   reader      reads requests (payloads straight into page-locked buffers) and answers
//               CallbackDone at once, so a stream held by a client callback never waits behind
//               the dispatcher;
//   dispatcher  enqueues requests' work in arrival order; it does not wait for the GPU: a
//               synchronizing request hands its wait and its reply to a waiter (server/waiter.h);
//   waiters     wait for a stream, event or device, run synchronous copies, and reply;
//   writer      (Outbox) sends replies and everything else, in the order they were produced.
// Everything the client allocated is released when the session ends, however the connection ends.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/executor.h"
#include "backend/gpu_query.h"
#include "channel/channel.h"
#include "proto/auth.h"
#include "proto/frame.h"
#include "proto/peer_auth.h"
#include "server/address_windows.h"
#include "server/allocation_table.h"
#include "server/buffer_pool.h"
#include "server/decompressions.h"
#include "server/graphs.h"
#include "server/host_work.h"
#include "server/mem_pools.h"
#include "server/module_cache.h"
#include "server/outbox.h"
#include "server/output_capture.h"
#include "server/payload.h"
#include "server/peer_copy.h"
#include "server/peer_fences.h"
#include "server/peer_host.h"
#include "server/quota.h"
#include "server/user_accounts.h"
#include "server/waiter.h"
#include "transport/connection.h"

namespace rgpu::server {

// A launch attribute that records an event (programmatic and launch-completion events).
bool event_attribute(uint32_t id);

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
  OutputCapture* errors = nullptr;            // kernels' stderr (device assert), likewise
  bool authenticated = false;  // the handshake already happened (rgpud's session process)
  // Per-client limits (0: none); exceeding one fails the request with a message naming it.
  uint64_t mem_limit = 0;  // bytes of device memory, all GPUs together (--client-mem-limit)
  // What the user's sessions hold together (--mem-limit-per-user; server/user_accounts.h), and
  // the user's number there (0: none).
  UserAccount user_account{};
  uint32_t user = 0;
  // Module images (server/modules.cc): what one may decompress to, at least (rgpud
  // --max-image-mb; fatbin::decompression_budget), and the daemon's decompression slots
  // (--max-decompressions; null: no limit), waited for at most decompression_wait_ms.
  uint64_t image_floor = fatbin::kDefaultImageFloor;
  DecompressionSlots* decompressions = nullptr;
  int decompressions_per_user = 0;  // slots one user holds at once (--max-decompressions-per-user)
  int decompression_wait_ms = 30000;
  size_t max_streams = 0;  // streams alive at once (--client-max-streams)
  size_t max_events = 0;   // events alive at once (--client-max-events)
  // Liveness (rgpud --client-timeout): once a frame has begun, its body and payload must arrive
  // within this many seconds, and a send to the client must make progress within it; otherwise
  // the session ends.  An idle client between requests is never timed out.
  int client_timeout_s = 30;
  // Once the client is gone, its GPU work gets this many seconds to finish; then the session's
  // process ends without freeing anything itself (the driver frees what the process held).  0:
  // wait for ever (a session inside another process, as in unit tests).
  int drain_limit_s = 0;
  uint32_t client_timeout_ms = 0;  // the client's RGPU_TIMEOUT (Hello), for the heartbeat interval
  std::vector<uint16_t> client_known{};  // the message ids the client knows (Hello)
  size_t outbox_bytes = 64u << 20;       // bytes queued for the client before the dispatcher waits
  int control = -1;  // the control socket to rgpud, for CUDA IPC (server/ipc_exports.h); -1: none
  // rgpud's certificate for peer links when it runs TLS (server/peer_host.h); null: plain links.
  const transport::TlsContext* peer_tls = nullptr;
  // The peer key rgpuds share (server/peer_vouch.h): tickets are vouched for and peer links
  // proven with it; none (`peer_key_error` says why): no copies between servers.
  std::optional<proto::PeerKey> peer_key{};
  std::string peer_key_error = "none was given";
  std::string peer_listen{};  // the TCP listener's address, the endpoint of shared-memory clients
  backend::GpuQuery* gpus = nullptr;  // NVML answers (server/nvml.h); null: NotSupported
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
  // Once the client is gone: waits for every device's work, at most config_.drain_limit_s, else
  // ends the process (std::_Exit) — a session process only sets the limit.
  void drain_or_exit();

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
  // Answers a request this server does not know: cudaErrorNotSupported, as a reply when the
  // client waits for one (kFlagSync), else as an AsyncError.
  void not_supported(const proto::FrameHeader& h);
  template <class M>
  void dispatch(Request& r);

  // Handlers, one per catalogue request (tagged by its Msg type), declared from the catalogue;
  // each is defined in the file of its concern (session.cc, bulk.cc, modules.cc, streams.cc).
  // Handshake messages arriving after the handshake are protocol errors.
#define RGPU_MSG(NAME, ID, MODE, PAYLOAD) \
  Status on(proto::NAME##Msg, const proto::NAME##Req&, proto::NAME##Rep&);
#include "proto/catalogue.def"
#undef RGPU_MSG
  Status copy_shm(const proto::MemcpyShmReq& q, bool async);

  Status check_device(uint32_t dev) const;
  Status check_range(uint32_t dev, uint64_t ptr, uint64_t pitch, uint64_t width, uint64_t height,
                     uint64_t born_by = UINT64_MAX) const;
  // The backend handle of a client's stream id on GPU `dev` (0: legacy default stream).
  Status stream_of(uint32_t dev, uint64_t id, uint64_t& handle) const;
  Status event_of(uint32_t dev, uint64_t id, uint64_t& handle) const;
  // drvlibs: [address, address + size) is device memory or mapped page-locked memory of GPU `dev`.
  bool memop_address_ok(uint32_t dev, uint64_t address, uint64_t size) const;

  // Bulk (server/bulk.cc).  Rows are packed `width` bytes each in the payload / reply.
  Status write_rows(uint32_t dev, uint64_t dst, uint64_t dpitch, uint64_t width, uint64_t height,
                    uint64_t stream, bool async);
  // A synchronous read after the earlier work of `stream` (the backend's handle; 0: legacy).
  Status read_rows_reply(uint32_t dev, uint64_t src, uint64_t spitch, uint64_t width,
                         uint64_t height, uint64_t stream = 0);
  Status read_rows_async(uint32_t dev, uint64_t src, uint64_t spitch, uint64_t width,
                         uint64_t height, uint64_t stream);

  // Modules (server/modules.cc).  load_module loads the image on GPU `dev` unless it is already
  // (describe_module: within the image budget and a decompression slot, charged to quota_).
  Status load_module(uint32_t dev, const proto::Hash& hash, const Image& image);
  Status describe_module(uint32_t dev, const Image& image, fatbin::ModuleInfo& info,
                         DecompressionSlot& slot);
  uint32_t device_arch(uint32_t dev);  // compute capability, major * 10 + minor (0: unknown)
  // The image named `hash`: this session's, else the module cache's (read, verified and kept);
  // null (with `s`) when the server has none.
  Image find_image(const proto::Hash& hash, Status& s);
  // Receives an image of `size` bytes from the request's payload and checks it against `hash`;
  // it is kept by the session, and reaches the module cache once it loaded (resolve_module).
  Image receive_image(const proto::Hash& hash, uint64_t size, Status& s);
  // Loads the image on GPU `dev` at its first use there, then resolves the names asked for: each
  // function at the module's index for its name (`by_name`), or at the client's own index (a
  // client from before lazy modules).
  // ModuleResolve / ModuleShip, numbering functions by name or (ModuleLookup / ModuleLoad) at
  // the client's positions.
  Status find_and_resolve(const proto::ModuleResolveReq& q, bool by_name,
                          proto::ModuleSlotsRep& rep);
  Status ship_and_resolve(const proto::ModuleShipReq& q, bool by_name, proto::ModuleSlotsRep& rep);
  Status resolve_module(uint32_t dev, const proto::Hash& hash, const Image& image,
                        const std::vector<proto::NameAt>& functions,
                        const std::vector<proto::NameAt>& variables, bool by_name,
                        proto::ModuleSlotsRep& rep);
  Status find_kernel(const proto::FuncReq& f, uint64_t& kernel) const;
  // What a launch names, resolved and checked (kernel, argument layout, stream, dimensions).
  struct LaunchTarget {
    uint64_t kernel = 0;
    const fatbin::KernelLayout* layout = nullptr;
    uint64_t stream = 0;
    backend::LaunchDims dims;
  };
  Status prepare_launch(const proto::LaunchReq& q, LaunchTarget& t);
  // Bytes of a kernel's parameter buffer (its layout's end).
  static uint64_t layout_bytes(const fatbin::KernelLayout& l);
  // Launch attributes (server/launch.cc): checked, events as the backend's handles.
  Status launch_attributes(uint32_t dev, const std::vector<proto::LaunchAttr>& in,
                           std::vector<backend::LaunchAttribute>& out) const;
  void unload_modules(int dev);
  void forward_output();
  void forward_output(uint64_t request_id);  // any thread

  // Waits off the dispatcher (server/waits.cc).  A handler that must wait enqueues what it needs,
  // then calls defer(wait): the dispatcher posts `wait` to a waiter, which runs it and sends the
  // reply (unless `wait` set `replied`, having queued its own).  `wait` runs on another thread: it
  // captures what it needs by value and holds no session lock while it waits.
  using Wait = std::function<Status(bool& replied)>;
  // `now`: nothing to wait for (checked without waiting): the dispatcher runs it at once, saving
  // a thread handoff on the common path.  `ready`: a check that does not wait (an event query):
  // while no other request is queued, the dispatcher polls it for a short while
  // (kDispatcherPoll) and runs the wait itself once it holds, which saves the waiter's wakeup
  // from a synchronization that the GPU ends within microseconds.
  void defer(Wait wait, bool now = false, std::function<bool()> ready = nullptr);
  // Every stream of `device` that may have work (legacy and busy ones, at most `limit` queries)
  // is idle; clears `busy` of those found idle.
  bool device_idle(uint32_t device, size_t limit = 64);
  // Releases the marks of destroyed streams whose work is over (every device's); false while a
  // mark of `device` still has work.
  bool prune_ended_streams(uint32_t device);
  // Polls `ready` while no request is queued, for up to kDispatcherPoll; its last answer.
  bool poll_ready(const std::function<bool()>& ready);
  static constexpr std::chrono::microseconds kDispatcherPoll{200};
  void finish_wait(const proto::FrameHeader& h, Wait& wait, bool launched);
  void latch_sticky(CudaError code);
  // Private events and streams (from per-GPU pools, never the client's) for waits.
  Status acquire_event(int dev, uint64_t& event);
  void release_event(int dev, uint64_t event);
  Status acquire_stream(int dev, uint64_t& stream);
  void release_stream(int dev, uint64_t stream);
  // A private event recorded on the legacy stream now: marks "after all earlier legacy work".
  Status mark_legacy(int dev, uint64_t& event) { return mark_stream(dev, 0, event); }
  Status mark_stream(int dev, uint64_t stream, uint64_t& event);  // ... on `stream` (a handle)
  void forget_private(int dev);  // after a device reset (its handles are gone)
  void free_private();
  // A client event a waiter synchronizes is destroyed by the last such waiter.
  void hold_event(uint64_t handle);
  void unhold_event(int dev, uint64_t handle);
  bool destroy_when_unheld(int dev, uint64_t handle);  // false: nobody holds it, destroy it now
  Status write_rows_sync(int dev, uint64_t dst, uint64_t dpitch, uint64_t width, uint64_t height);
  Status copy_shm_sync(int dev, char* host, uint64_t device_ptr, uint64_t size, bool to_device);

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
  channel::Channel channel_;  // framing for everything the session reads and sends
  Outbox outbox_;
  // Two pools: the reader's (payloads; it never calls the backend, or it could not read the
  // CallbackDone a stream is waiting for) and the dispatcher's (device-to-host data; bounded, it
  // waits for the writer).  One shared limit would let queued payloads starve the dispatcher.
  BufferPool in_pool_;
  BufferPool pool_;
  // Device-to-host data of asynchronous copies, apart from pool_: its items may wait in the outbox
  // behind a synchronous copy's data, and must not starve it.
  BufferPool async_pool_;
  // What host functions hand over (buffers to return, frames to queue); see server/host_work.h.
  // Declared after the pools: it is drained before they go.
  HostWork host_work_;
  std::vector<AllocationTable> allocs_;
  AddressWindows windows_;  // where allocations go (server/address_windows.h)
  MemoryQuota quota_;       // what the GPUs hold for this client (--client-mem-limit)
  // A charge for `bytes` of cudaMalloc-like memory; when it does not fit, memory pools first
  // give back the cached blocks they hold (as the driver does when memory runs short).
  Status charge_memory(Hold why, uint32_t dev, uint64_t bytes, const std::string& action);
  std::vector<uint32_t> archs_;  // per GPU: device_arch's answer, once known

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
  Request* current_ = nullptr;                   // the request being served
  bool reply_sent_ = false;                      // the current handler already queued its reply
  std::atomic<CudaError> sticky_{err::Success};  // waiters latch too
  Wait deferred_;                                // set by a handler that defers its wait (defer())
  bool deferred_now_ = false;                    // ... and it is ready: run it on the dispatcher
  std::function<bool()> deferred_ready_;         // ... a check that it is ready (see defer())
  struct Object {
    uint32_t device;
    uint64_t handle;
    // Streams: work may have been queued since a query last found the stream idle (stream_of
    // sets it; DeviceSynchronize queries only such streams).
    mutable bool busy = true;
  };
  std::map<uint64_t, Object> streams_, events_;  // by client id
  // Private events marking the work of streams the client destroyed before it ended (device,
  // event): DeviceSynchronize's ready check waits for them too.  The dispatcher's.
  std::vector<std::pair<uint32_t, uint64_t>> ended_streams_;
  // SmallReclaim (server/reclaims.cc): the work before quarantine epoch `epoch` of the client's
  // small allocations on `device` is done once every private event and every destroyed stream's
  // event (`ended`) is.  The dispatcher's.
  // Epochs are counted per (GPU, address window): two virtual devices may name one GPU.  A mark
  // covers the work of every GPU the session queued work on (a peer copy or kernel of another
  // GPU may use the memory).
  struct ReclaimMark {
    std::pair<uint32_t, uint64_t> key;  // (GPU, window)
    uint64_t epoch;
    std::vector<std::pair<int, uint64_t>> events, ended;  // (GPU, private event)
  };
  std::vector<ReclaimMark> reclaim_marks_;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> reclaim_complete_;  // epochs below: complete
  bool reclaim_mark_done(ReclaimMark& m);  // releases the events found done
  // cudaDeviceReset of GPU `device` (which destroyed its events).
  void drop_reclaim_marks(uint32_t device);
  // GPUs whose streams the session gave work (bit per GPU; GPUs from 64 on always count).
  mutable uint64_t used_gpus_ = 0;
  void note_gpu_used(uint32_t dev) const {
    if (dev < 64) used_gpus_ |= 1ull << dev;
  }
  bool gpu_used(uint32_t dev) const { return dev >= 64 || (used_gpus_ >> dev & 1); }
  struct SharedSegment {
    char* base;
    uint64_t size;
  };
  std::map<uint64_t, SharedSegment> shared_;  // the client's page-locked segments, by its id
  struct LinkState {                          // drvlibs: cuLink* (server/drvlibs_link.cc)
    uint32_t device;
    uint64_t handle;
    uint64_t added = 0;          // input bytes so far
    std::vector<uint8_t> image;  // once completed
  };
  std::map<uint64_t, LinkState> links_;  // by the client's id
  void destroy_links();
  struct Module {
    uint64_t handle = 0;
    fatbin::ModuleInfo info;
    uint64_t code_bytes = 0, global_bytes = 0;  // charged to quota_ (Hold::ModuleCode, ...Globals)
    // Backend handles by the function's index in the module (0: missing).  Indices are the
    // server's, by name (ModuleSlotsRep::slots); for a client from before lazy modules, its
    // own positions (ModuleLookup/ModuleLoad, every name each time).
    std::vector<uint64_t> kernels;
    std::vector<fatbin::KernelLayout> layouts;
    std::map<std::string, uint32_t> slots;  // function name -> index (by-name numbering)
  };
  std::vector<std::vector<Module>> modules_;                 // per GPU, by module id
  std::vector<std::map<proto::Hash, uint32_t>> module_ids_;  // per GPU
  std::map<proto::Hash, Image> images_;                      // this session's images
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
  uint32_t* new_gate_word();  // the dispatcher's; zero, never reused within the session
  // Stream waits for another server's event (server/xwaits.cc).  A stream's n-th such wait waits
  // for its word to reach n; GateOpens may come in any order, so the word moves only over gates
  // opened in a row (`early` holds the others).  Guarded by cb_mu_.
  struct XGate {
    uint32_t* word = nullptr;
    uint32_t issued = 0, opened = 0;
    std::set<uint32_t> early;
  };
  struct XWait {
    XGate* gate;
    uint32_t seq;
  };
  std::map<std::pair<uint32_t, uint64_t>, XGate> xgates_;  // by (GPU, client stream id)
  std::map<uint64_t, XWait> xwaiting_;      // by the client's gate id: waits not yet opened
  std::set<uint64_t> xearly_;               // gates opened before their StreamGateWait was served
  std::set<uint64_t> xdropped_;             // gates whose StreamGateWait failed
  void xgate_pass(XGate& g, uint32_t seq);  // cb_mu_ held
  void on_gate_open(const proto::GateOpenReq& q);  // the reader's
  // Asynchronous payload bytes of the request being served not yet given back by PayloadDone.
  uint64_t credit_left_ = 0;
  std::atomic<uint64_t> pending_credit_{0};  // given back, not yet told (payload_done)
  std::atomic<uint64_t> held_payload_{0};    // asynchronous payload not yet given back
  std::atomic<bool> idle_{false};            // the dispatcher waits for a request

  std::mutex output_mu_;  // forward_output: one taker of the kernels' output at a time
  // Waits (server/waits.cc).  waits_mu_ guards the maps only, never held across a backend call.
  std::mutex waits_mu_;
  std::vector<std::vector<uint64_t>> free_events_, free_streams_;  // per GPU, idle
  std::vector<std::vector<uint64_t>> all_events_, all_streams_;    // per GPU, every private one
  std::map<uint64_t, int> event_holders_;                          // client event handle -> waits
  std::map<uint64_t, int> destroy_later_;  // client event handle -> its GPU, destroyed unheld
  // Frees (server/session.cc): like cudaFree, memory goes back only once the GPU is past the work
  // issued before the free — waited for on a waiter, so the dispatcher goes on.  heap_mu_ guards
  // windows_ (the dispatcher allocates while a waiter frees); free_mu_ the queue of frees.
  struct PendingFree {
    int device;
    uint64_t ptr;
    uint64_t request_id;
    uint16_t type;
    PeerHost* peers;  // this session's links from other servers (peer_host_ when it exists)
  };
  void defer_free(int device, uint64_t ptr, const proto::FrameHeader& h);
  void drain_frees();
  void wait_frees();  // until every free issued so far is done
  std::timed_mutex heap_mu_;
  std::mutex free_mu_;
  std::condition_variable free_cv_;
  std::vector<PendingFree> pending_frees_;
  bool free_draining_ = false;  // a drain_frees task is queued or running
  // ---- graphs (server/graphs.cc)
  // A request on a capturing stream is recorded instead of run (true: `s` is its outcome).
  bool capture_request(const Request& r, Status& s);
  Status record_node(Graph& g, std::vector<uint64_t> deps, uint16_t type, std::vector<uint8_t> body,
                     std::shared_ptr<const std::vector<char>> payload, uint64_t& id);
  Status replay_node(const GraphNode& n, uint32_t dev, uint64_t stream);
  // Native graphs (server/graphs_native.cc): true when `x` ran as one backend launch on the
  // stream handle; false: replay it node by node.  drop_native after any change to `x`.
  bool launch_native(GraphExec& x, uint32_t dev, uint64_t stream);
  bool capture_native(GraphExec& x, uint32_t dev);
  void drop_native(GraphExec& x);
  // Graphs with conditional nodes (server/graphs_cond.cc): always native, built at instantiation
  // (and again after a change) by capturing their nodes and bodies into the backend's graph.
  Status cond_instantiate(GraphExec& x, const Graph& g);
  Status cond_build(GraphExec& x);
  Status cond_capture(const GraphExec& x, const std::vector<GraphNode>& order, uint64_t graph,
                      int depth);
  Status graph_of(uint64_t id, Graph*& g);
  void invalidate_capture(uint64_t graph);
  GraphState graphs_;
  // ---- pools (server/pools.cc): stream-ordered allocation, created at first use
  MemPools& pools();
  std::unique_ptr<MemPools> pools_;
  // ---- ipc (server/ipc.cc): CUDA IPC between sessions of one rgpud.  An export belongs to one
  // allocation: freeing it (cudaFree, cudaFreeAsync, a device reset) withdraws the export from
  // rgpud, and its mapping is never handed out again (DeviceHeap::share).
  struct IpcImport {
    uint32_t device;
    uint64_t map;   // the mapping's reserved range: [map, map + span)
    uint64_t span;  // the exported allocation is [key, key + size) inside it; charged to the
                    // importer (Hold::IpcImport): the mapping keeps it alive
    uint64_t size;
  };
  void close_ipc_imports(uint32_t dev);  // cudaDeviceReset, session end
  // Withdraws the export of the allocation starting at `ptr` (it is being freed); false when it
  // was never exported.
  bool revoke_ipc_export(uint32_t dev, uint64_t ptr);
  // Withdraws the handles of ranges in [start, start + size) (a slab of small allocations goes).
  void revoke_ipc_exports_in(uint32_t dev, uint64_t start, uint64_t size);
  // IpcGetMemHandle (range 0: the allocation holding ptr) and IpcGetRangeHandle.
  Status export_memory(uint32_t device, uint64_t ptr, uint64_t range,
                       proto::IpcGetMemHandleRep& rep);
  void revoke_ipc_exports(uint32_t dev);  // cudaDeviceReset (memory and events)
  void revoke_ipc_event(uint64_t id);     // the event with the client's id `id` is destroyed
  // Exports by (GPU, allocation start): the token.
  std::map<std::pair<uint32_t, uint64_t>, std::array<uint8_t, 32>> ipc_tokens_;
  // Event exports by the client's event id: its GPU and the token (server/misc.cc).
  std::map<uint64_t, std::pair<uint32_t, std::array<uint8_t, 32>>> ipc_event_tokens_;
  std::map<uint64_t, IpcImport> ipc_imports_;  // by the imported allocation's start
  // ---- vmm (server/vmm.cc): the program's virtual memory management.  Physical allocations by
  // the client's handle (references: the program's plus one per mapping), reservations and
  // mappings by start address.  Mapped ranges enter allocs_ (joinable, not freeable) for each GPU
  // given access.
  struct VmmHandle {
    uint32_t device = 0;
    uint64_t backend = 0;  // the executor's handle
    uint64_t size = 0;
    uint32_t refs = 1;
  };
  struct VmmReservation {
    uint32_t device = 0;
    uint64_t size = 0;
    uint64_t taken = 0, taken_size = 0;  // what the window gave (alignment beyond the granule)
  };
  struct VmmMapping {
    uint32_t device = 0;
    uint64_t size = 0;
    uint64_t handle = 0;
    std::map<uint32_t, uint32_t> access;  // GPU -> CUmemAccess_flags (absent: none)
  };
  void close_vmm(uint32_t dev);  // cudaDeviceReset, session end
  Status vmm_unmap_one(uint64_t addr, std::vector<uint64_t>& released);
  void vmm_unref(uint64_t handle, std::vector<uint64_t>* released);
  std::map<uint64_t, VmmHandle> vmm_handles_;
  std::map<uint64_t, VmmReservation> vmm_reserved_;
  std::map<uint64_t, VmmMapping> vmm_mapped_;
  // ---- arrays (server/arrays.cc): arrays by client id, texture/surface objects by (GPU, value)
  struct ArrayRecord {
    uint32_t device;
    uint64_t handle;
    bool mipmapped;
    uint64_t owner;      // a level's mipmapped array (its client id); 0 otherwise
    uint64_t bytes = 0;  // charged to quota_ (Hold::Array)
  };
  std::map<uint64_t, ArrayRecord> arrays_;
  std::map<std::pair<uint32_t, uint64_t>, bool> tex_objects_;  // -> is a surface
  Status array_of(uint32_t dev, uint64_t id, bool mipmapped, uint64_t& handle) const;
  Status copy_side(uint32_t dev, uint64_t array, uint64_t ptr, uint64_t pitch, uint64_t rows,
                   uint64_t x, uint64_t y, uint64_t z, uint64_t width, uint64_t height,
                   uint64_t depth, backend::Executor::CopySide& out) const;

  // ---- notify (server/notify.cc): GPUs whose notifications go to the client (dispatcher only)
  std::vector<bool> notify_on_;
  void stop_notifications();  // the session ends: no frame is queued after this returns
  // ---- peer (server/peer.cc): server-to-server copies; their threads end before the session's
  // GPU state goes (stop_peers)
  StagingPool& peer_pool();
  PeerHost& peer_host();
  PeerImports::Hooks peer_import_hooks();
  void stop_peers();
  // Before loading or unloading code on the GPU (module loads, functions, globals): waits for
  // this session's copies to other servers to end (PeerCopier::wait_idle says why).
  void settle_peer_copies(const char* why);
  // This session's fence page (server/peer_fences.h), made when the first link from a server on
  // this machine asks for it (a link's thread); its memfd, -1 when there is none.
  backend::Status peer_fence_page(int& fd, uint32_t& slot);
  std::mutex peer_fences_mu_;
  std::unique_ptr<PeerFenceMap> peer_fences_;
  bool peer_fences_refused_ = false;
  std::atomic<PeerFencePage*> peer_page_{nullptr};  // peer_fences_'s, for the dispatcher
  std::atomic<uint32_t> peer_slots_{0};             // slots handed to links so far
  std::array<uint32_t, kPeerFenceDevices> peer_fence_newest_{};  // the dispatcher's
  // PeerFence requests that came one after another mark one point of the GPU's legacy stream:
  // they wait here (by GPU) while the next request is a PeerFence too, then share one event and
  // one store (flush_fences; server/peer.cc).  The dispatcher's.
  std::map<uint32_t, std::vector<uint64_t>> peer_fences_pending_;
  bool next_request_is(proto::MsgId type);
  backend::Status flush_fences();
  // A PeerCopy whose ticket this rgpud may not connect to (server/peer_vouch.h): the client's
  // error names why; rgpud logs each reason once (peer_refusals_, the dispatcher's).
  backend::Status refuse_peer_copy(const proto::PeerCopyReq& q, const std::string& why);
  std::set<std::string> peer_refusals_;
  std::unique_ptr<StagingPool> peer_pool_;
  std::unique_ptr<PeerHost> peer_host_;      // this session as a copy's passive end
  std::unique_ptr<PeerCopier> peer_copier_;  // ... and as its active end

  // Last: its threads use everything above; stopped first.
  Waiter waiter_;
};

}  // namespace rgpu::server
