// Server-to-server copies, the active end (docs/architecture.md, "Server-to-server copies"): the
// session whose stream runs the copy keeps one peer link per other server (by its endpoint),
// made at the first copy with the client's ticket (HelloReq::purpose PeerLink, PeerAttach,
// PeerProve) and kept for the client's later copies.  It connects only to the endpoint a ticket's
// statement names, once its MAC holds under the peer key (server/peer_vouch.h), and proves itself
// with that key, never by answering a token challenge (proto/peer_auth.h).  Each link has a
// thread of its own that takes its copies in the order they came: waits for the copy's stream's
// earlier work, names the rows (PeerBegin), then pushes its rows (PeerWrite... PeerFinish) or
// pulls the remote ones (PeerRead).  Never on the dispatcher, never in a host function: the session
// holds the stream at a gate and opens it when `done` has run (see Session::on(PeerCopyMsg)).  A
// link that fails fails its waiting copies and is dropped; the client's next copy brings a new
// ticket.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/executor.h"
#include "channel/channel.h"
#include "proto/messages.h"
#include "proto/peer_auth.h"
#include "server/peer_fences.h"
#include "server/peer_ipc.h"
#include "server/peer_pipe.h"
#include "transport/connection.h"

namespace rgpu::server {

struct PeerJob {
  PeerRows local;
  proto::PeerBeginReq remote;  // the rows on the passive server
  bool push = false;           // local -> remote
  uint64_t after_event = 0;  // a private event: the stream's earlier work is done (destroyed here)
  std::string endpoint;      // the passive rgpud as the client names it: the link's key
  std::string remote_name;   // for messages
  // The ticket (all zero id: the link must exist): the link goes to its endpoint, and runs TLS
  // with exactly its certificate when it names one.
  proto::PeerVoucher ticket;
  bool has_ticket() const;
};

class PeerCopier {
 public:
  using Done = std::function<void(const backend::Status&)>;
  // `key`: the peer key links prove themselves with and tickets are checked with (null: none,
  // `no_key` says why; every link fails); `timeout_s`: connecting, the handshake, and any
  // silence mid-copy.
  // `imports`: address space for the memory of peers on this machine (server/peer_ipc.h).
  // `failed`: direct copies (try_direct) failed after they were queued (a link's thread): the
  // session reports it to the client as an asynchronous error.
  PeerCopier(backend::Executor& exec, StagingPool& pool, const proto::PeerKey* key,
             std::string no_key, int timeout_s, PeerImports::Hooks imports, Done failed);
  ~PeerCopier() { stop(); }
  PeerCopier(const PeerCopier&) = delete;
  PeerCopier& operator=(const PeerCopier&) = delete;

  // Queues `job` on its link (made now when the job has a ticket); `done(status)` is called on
  // the link's thread when it ends (or here, at once, when there is no link to queue it on).
  void start(PeerJob job, Done done);
  // The direct path (server/peer_fences.h; the dispatcher): when the job's link maps the peer's
  // memory already, has seen no free there since, and the peer has handled the job's fence, the
  // copy goes on `stream` itself: a wait on the GPU for the peer's legacy stream to reach the
  // fence, then one DMA.  No round trip, no gate.  False: take start() (`out` unset); true: done
  // or failed (`out`).  A link's thread watches the waits: a peer gone or broken fails them
  // within seconds (`failed`) and opens them.
  bool try_direct(const PeerJob& job, uint64_t stream, backend::Status& out);
  // The session ends: links are shut down (copies fail), threads joined.
  void stop();
  // Waits (at most `limit`) until every copy started has run its `done`; false when some still
  // had not.  Loading code into the GPU's context may wait for the context's streams (CUDA's
  // lazy loading synchronizes the context) while holding a driver lock that a copy's own CUDA
  // calls need, and a stream held at a copy's gate cannot finish before the copy does: so the
  // dispatcher settles the copies before it loads code (Session::settle_peer_copies).
  bool wait_idle(std::chrono::milliseconds limit);
  // The dispatcher, before it holds a stream for a copy: peers' memory that copies let go of is
  // unmapped now (PeerImports::flush).
  void flush_unmaps();
  // The dispatcher, before destroying a stream of GPU `dev` (PeerImports::stream_ending).
  void stream_ending(int dev, uint64_t stream);
  // GPU `dev` is being reset: peers' memory mapped on it goes (no copy runs: wait_idle first).
  void forget_device(int dev);

 private:
  // RGPU_PEER_TRACE=1: each copy's phases (µs) go to rgpud's log.
  struct Trace {
    bool on = false;
    std::chrono::steady_clock::time_point t0;
    std::string phases;
    void mark(const char* what);
  };
  struct Job {
    PeerJob job;
    Done done;
    std::chrono::steady_clock::time_point queued;
  };
  struct Link {
    std::mutex mu;  // queue, closing, cancelled, conn; never held across a backend call or I/O
    std::condition_variable cv;
    std::deque<Job> queue;
    bool closing = false;    // replaced by a newer link: ends when its queue is empty
    bool cancelled = false;  // the session ends
    bool done = false;       // the thread has ended
    std::unique_ptr<transport::Connection> conn;
    std::thread thread;
    // The link thread's own:
    std::unique_ptr<channel::Channel> ch;
    PrivateStreams streams;
    std::string failed;  // why the link broke ("" while it works)
    Trace trace;
    int ipc = -1;          // the unix socket beside a link to a peer on this machine (PeerIpcOpen)
    int ipc_failures = 0;  // imports in a row that failed
    std::shared_ptr<PeerImports> imports;  // the peer's memory mapped here
    // The direct path: the passive session's fence page mapped here (the link's thread's; kept
    // for the session's life once the link ends), `page` its address for the dispatcher (null:
    // no direct copies), `slot` this link's words in it.
    std::unique_ptr<PeerFenceMap> fences;
    std::atomic<PeerFencePage*> page{nullptr};
    uint32_t slot = 0;
    // Bit 32 set: the imports were all checked by a PeerIpcMap when the page's `frees` was the
    // low 32 bits.
    std::atomic<uint64_t> checked_frees{0};
    struct Wait {
      uint32_t fence = 0;  // the newest fence a direct copy waits for on this GPU of the peer
      uint32_t seen = 0;   // the slot's word when `since` was set
      std::chrono::steady_clock::time_point since, asked;
    };
    std::mutex direct_mu;  // waits, direct_closed; never held across a backend call or I/O
    std::map<uint32_t, Wait> waits;  // by the peer's GPU
    bool direct_closed = false;
    std::string name;  // "name (endpoint)" of the peer, for messages
  };
  void work(Link& link);
  // The link's thread: direct copies whose fence is late make it ask the peer (PeerFenceQuery).
  bool watching(Link& link);
  void watch(Link& link);
  // Direct copies waiting on this link fail (`why`) and their streams go on; no more are taken.
  void end_direct(Link& link, const std::string& why);
  backend::Status run(Link& link, const PeerJob& job);
  void connect(Link& link, const PeerJob& job);
  void connect_tls(Link& link, const PeerJob& job);
  // PeerAttach and PeerProve: the peer proves it holds the peer key and the ticket, then this end.
  void attach(Link& link, const PeerJob& job);
  void open_ipc(Link& link);
  // The copy as one DMA between the peer's memory mapped here and the local rows; false when
  // that memory cannot be had (the caller goes on with the pipeline; PeerBegin was sent).
  bool transfer_mapped(Link& link, const PeerJob& job, uint64_t stream, backend::Status& out);
  backend::Status transfer(Link& link, const PeerJob& job, uint64_t stream);

  backend::Executor& exec_;
  StagingPool& pool_;
  const proto::PeerKey* const key_;
  const std::string no_key_;
  const int timeout_s_;
  const PeerImports::Hooks import_hooks_;
  const Done failed_;
  std::mutex mu_;  // links_, all_, stopping_, busy_
  std::condition_variable idle_cv_;
  size_t busy_ = 0;  // copies queued or running: their `done` has not run yet
  std::map<std::string, std::shared_ptr<Link>> links_;  // the live link to each endpoint
  std::vector<std::shared_ptr<Link>> all_;              // every link whose thread runs
  bool stopping_ = false;
  // Fence pages of ended links: a GPU may still read them (kept for the session's life).
  std::vector<std::unique_ptr<PeerFenceMap>> old_fences_;
  // Imports of ended links (all retired) that flush_unmaps() has yet to unmap: a stream may
  // still use them, or their events are yet to be recorded (PeerImports::flush).
  std::vector<std::shared_ptr<PeerImports>> retired_;        // under mu_
  std::vector<std::shared_ptr<PeerImports>> every_import();  // live links' and retired_
};

}  // namespace rgpu::server
