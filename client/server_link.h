// One connection from this process to one rgpud, opened on first use.  Any number of threads call
// through it at once: a request is sent under a short send lock, and a receiver thread routes what
// comes back — replies to the thread waiting for them (their payloads straight into that thread's
// buffers), device-to-host data of asynchronous copies into their destinations, asynchronous
// errors, kernel output, and host callbacks (run in order on a callback thread, which then tells
// the server to let the stream go on).  Synchronous requests wait for their reply; asynchronous
// ones do not, and a failure among them is returned by the next synchronous request on the link,
// as CUDA reports asynchronous errors at the next synchronizing call.
//
// Liveness (RGPU_TIMEOUT, `timeout_s`): connecting and the handshake must finish within it, and
// while a synchronous call waits, something must arrive from the server within it — a reply,
// data, or a Heartbeat, which a busy server sends while it works on requests (a kernel may run for
// hours).  Silence fails the link (cudaErrorDevicesUnavailable): every waiter is woken and later
// calls fail at once.  0 disables the limit.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "channel/channel.h"
#include "client/config.h"
#include "client/link_stats.h"
#include "common/cuda_errors.h"
#include "proto/frame.h"
#include "proto/messages_nvml.h"
#include "transport/connection.h"

namespace rgpu::client {

struct ServerHello {
  uint32_t gpu_count = 0;
  int32_t driver_version = 0;
  std::string backend;
  std::string info;
  std::string transport;         // "tcp", "shm", "tls": the connection's kind, for display
  transport::Capabilities caps;  // what the connection can do
};

// Where a server's reason for a failed request goes besides the log: the logs API of the process's
// client core (client/logs.h; defined in client/server_errors.cc, alone so that a library without
// a client core, rgpu's libnvidia-ml.so.1, defines its own).
void note_server_error(const std::string& message);

// True on a link's callback thread (host functions, stream callbacks, the notify sink): CUDA
// work there must not wait for streams (one of them runs this callback).
bool on_callback_thread();

class ServerLink {
 public:
  // `purpose` Queries: a link for NVML queries only (proto/messages_nvml.h), which the server
  // serves without an executor (no CUDA context).
  ServerLink(std::string host, uint16_t port, std::optional<std::string> token, int timeout_s = 10,
             proto::LinkPurpose purpose = proto::LinkPurpose::Session);
  ~ServerLink();

  // Connects (once) and returns the handshake's outcome.
  CudaError ensure_connected();
  const ServerHello& hello() const { return hello_; }
  std::string address() const { return host_ + ":" + std::to_string(port_); }
  // A fresh id for a stream, event or callback (unique on this link, never 0).
  uint64_t new_id() { return next_object_++; }

  // Where this link's requests are counted (RGPU_STATS).
  LinkStats& stats() const { return *stats_; }
  // Whether the server knows request `id` (false when not connected): for choosing between a
  // newer request and an older one, without the log line a refused request gets.
  bool knows(proto::MsgId id) {
    return ensure_connected() == err::Success && chan_->peer_knows(static_cast<uint16_t>(id));
  }

  // Sends request M; `out` is the request's payload, `in` receives the reply's payload, `why` the
  // server's message when the request fails.
  template <class M>
  CudaError call(const typename M::Req& req, typename M::Rep* rep = nullptr,
                 const iovec* out = nullptr, int n_out = 0, const iovec* in = nullptr, int n_in = 0,
                 std::string* why = nullptr) {
    Decoder decode = [](void* r, const std::vector<uint8_t>& reply, std::string& msg) -> int32_t {
      typename M::Rep tmp{};
      auto* target = r ? static_cast<typename M::Rep*>(r) : &tmp;
      return proto::decode_reply(reply, *target, msg);
    };
    return transact(static_cast<uint16_t>(M::id), M::name, M::mode == proto::Mode::Sync,
                    proto::encode_message(req), out, n_out, in, n_in, decode, rep, why);
  }

  // An asynchronous device-to-host copy: `rows` (each `width` bytes) receive the data when the
  // server's stream has produced it, before any later synchronizing reply.
  template <class M>
  CudaError call_with_async_data(const typename M::Req& req, std::vector<iovec> rows,
                                 uint64_t width) {
    return transact_async_data(static_cast<uint16_t>(M::id), proto::encode_message(req),
                               std::move(rows), width);
  }

  // Shared page-locked memory, on links that register memory (shm): registers `r` with the
  // transport and announces it to the server (HostShmRegister), which maps and page-locks it.
  // `key` names it in MemcpyShm / HostShmUnregister.  NotSupported where the link cannot.
  bool shared_memory() const { return hello_.caps.registers_memory; }
  CudaError register_memory(uint32_t gpu, const transport::MemoryRegion& r, uint64_t& key);

  // Queues a host function: `fn` runs on the callback thread when the stream reaches it.
  CudaError host_func(uint32_t gpu, uint64_t stream, std::function<void()> fn);
  // `fn` runs on the callback thread once the work recorded in `event` so far is done
  // (EventNotify; at once for an event never recorded).  In client/xwaits.cc.
  CudaError event_notify(uint32_t gpu, uint64_t event, std::function<void()> fn);
  // Called once, by whichever thread notices, when the link is lost (set before first use).
  void set_failure_hook(std::function<void(const std::string& why)> hook) {
    on_failure_ = std::move(hook);
  }
  // How many asynchronous server-to-server copies (PeerCopy) this server reported failed: a
  // change means its peer links may be gone (client/peer_copy.cc brings a new ticket).
  uint64_t peer_copy_failures() const { return peer_copy_failures_.load(); }
  // An asynchronous failure for the next call on this link to report (as the server's own are).
  void defer_error(CudaError e);
  // No failure waits to be reported and none of this link's calls returned a sticky error since
  // the last cudaDeviceReset (clear_sticky): what a call answered on the client may succeed.
  bool clean() const {
    return !has_pending_.load(std::memory_order_acquire) &&
           !failed_.load(std::memory_order_acquire) &&
           sticky_.load(std::memory_order_acquire) == err::Success;
  }
  void clear_sticky() { sticky_.store(err::Success, std::memory_order_release); }
  // What a call answered on the client returns when the link is not clean(): the failure to
  // report now (an asynchronous one is reported once, as by a call the server answers), else the
  // sticky error, else Success.
  CudaError error_to_report();

  // Streams known idle (client/streams.cc elides a synchronization the server would answer at
  // once): note_idle(gpu, stream), called by the thread whose synchronous call on this link just
  // succeeded after the stream's work was done (a StreamSynchronize, a device-to-host copy on it;
  // kAllStreams: a DeviceSynchronize), remembers where the link's frames then stood; known_idle
  // is true while nothing at all was sent on the link since (no work can have reached the
  // stream).
  static constexpr uint64_t kAllStreams = ~0ull;
  void note_idle(uint32_t gpu, uint64_t stream);
  bool known_idle(uint32_t gpu, uint64_t stream);
  // Whether an asynchronous device-to-host copy (call_with_async_data) still has bytes to
  // write into [base, base + size).
  bool async_data_into(uint64_t base, uint64_t size);
  // Returns once none has: the memory may then go (cudaFreeHost).  Connects nothing.
  void wait_async_data_outside(uint64_t base, uint64_t size);
  // A host function of a graph node: kept, run each time the server names it in a replay
  // (RunCallback ids with bit 63 set carry it in bits 0..39; see server/graphs.cc).
  uint64_t keep_callback(std::function<void()> fn);
  // Where AsyncNotify frames go (client/notify.h): called by the receiver; must not block.
  using NotifySink =
      std::function<void(const ServerLink*, uint32_t gpu, uint32_t type, uint64_t value)>;
  void set_notify_sink(NotifySink sink);

 private:
  using Decoder = int32_t (*)(void* rep, const std::vector<uint8_t>& body, std::string& message);
  struct Pending {
    Decoder decode = nullptr;
    void* rep = nullptr;
    const iovec* in = nullptr;
    int n_in = 0;
    uint64_t expect_in = 0;
    CudaError result = err::Success;
    std::string message;
    bool sleeping = false;  // the caller gave up spinning (guarded by mu_)
    std::atomic<bool> done{false};
  };
  struct AsyncDst {
    std::vector<iovec> rows;
    uint64_t width;
    Pending* waiter = nullptr;  // a synchronous copy's caller, waiting for its reply
    uint64_t lo = 0, hi = 0;    // the span of `rows`
  };

  CudaError transact(uint16_t type, const char* name, bool sync, std::vector<uint8_t> body,
                     const iovec* out, int n_out, const iovec* in, int n_in, Decoder decode,
                     void* rep, std::string* why = nullptr);
  // Registers `fn` under a fresh callback id and sends request `type` with body(id).
  CudaError callback_request(uint16_t type, std::function<void()> fn,
                             const std::function<std::vector<uint8_t>(uint64_t)>& body);
  CudaError transact_async_data(uint16_t type, std::vector<uint8_t> body, std::vector<iovec> rows,
                                uint64_t width);
  CudaError send_frame(uint16_t type, uint16_t flags, uint64_t id, const std::vector<uint8_t>& body,
                       const iovec* out, int n_out);
  // False (logged once by name) when the server did not list `type` in its handshake: an older
  // server, which the call must not reach.
  bool server_knows(uint16_t type, const char* name);
  CudaError connect_locked();
  void fail_link(const std::string& why);
  // Reads a frame's header and body; `idle`: the wait for the header has no deadline.  False when
  // the server closed the connection cleanly before the header (idle only).
  bool read_frame(proto::FrameHeader& h, std::vector<uint8_t>& body, bool idle);
  // Receives into `iov` in pieces, noting life after each, so that a long payload on a slow link
  // is not taken for silence.
  void recv_noting_life(const iovec* iov, int count);
  void note_life();
  // Sleeps until `p` is done; fails the link when nothing arrived for timeout_s_.
  void wait_alive(std::unique_lock<std::mutex>& lock, Pending& p);
  // Waits on `cv` (with mu_ held) until done(); fails the link after RGPU_TIMEOUT of silence.
  void wait_alive(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  const std::function<bool()>& done, const char* who);
  void receive_loop();
  void callback_loop();
  void receive_async_data(const proto::FrameHeader& h, const std::vector<uint8_t>& body);

  std::string host_;
  uint16_t port_;
  std::optional<std::string> token_;
  const int timeout_s_;  // RGPU_TIMEOUT (0: none)
  const proto::LinkPurpose purpose_;
  LinkStats* const stats_;              // the instance of the library that made the link
  std::atomic<int64_t> last_rx_ns_{0};  // steady clock: when something last arrived
  std::unique_ptr<transport::Connection> conn_;
  std::unique_ptr<channel::Channel> chan_;  // framing, request ids, what the server knows
  ServerHello hello_;
  std::atomic<uint64_t> next_object_{1};

  std::mutex connect_mu_;
  bool tried_ = false;
  std::atomic<bool> connected_{false};  // handshake done (later failures: state_)
  std::mutex fd_mu_;  // a descriptor and the request that names it go out together

  // Shared with the receiver thread.
  std::mutex mu_;
  std::condition_variable cv_;         // callers sleeping for a reply
  std::condition_variable cb_cv_;      // the callback thread
  std::condition_variable window_cv_;  // senders of asynchronous payload waiting for the window
  uint64_t window_ = 0;                // the server's payload window (0: none)
  uint64_t async_out_ = 0;             // asynchronous payload bytes the server has not given back
  std::atomic<bool> has_pending_{false};
  std::atomic<CudaError> sticky_{err::Success};  // a call returned this sticky error (clean())
  std::mutex idle_mu_;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> idle_at_;  // (gpu, stream): frames sent then
  std::atomic<uint64_t> peer_copy_failures_{0};
  // The last AsyncError logged, and how many just like it came since (the receive thread's).
  uint16_t last_async_type_ = 0;
  std::string last_async_message_;
  uint64_t async_repeats_ = 0;
  std::atomic<bool> failed_{false};   // state_ is an error: every call fails at once
  CudaError state_ = err::Success;    // outcome of connecting / losing the link
  CudaError pending_ = err::Success;  // first asynchronous failure not yet reported
  std::map<uint64_t, Pending*> waiting_;
  Pending* receiving_ = nullptr;  // the receiver is writing into this waiter's buffers
  std::map<uint64_t, AsyncDst> async_dst_;
  // The span of the bytes the receiver is writing (outside mu_) for an asynchronous copy.
  uint64_t delivering_lo_ = 0, delivering_hi_ = 0;
  std::map<uint64_t, std::function<void()>> callbacks_;
  std::deque<std::pair<uint64_t, std::function<void()>>> to_run_;
  NotifySink notify_sink_;             // AsyncNotify frames (set_notify_sink)
  std::set<uint16_t> unknown_logged_;  // frame types already logged as unknown (either way)
  std::thread receiver_, callback_thread_;
  std::function<void(const std::string&)> on_failure_;
};

}  // namespace rgpu::client
