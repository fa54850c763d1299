// Server-to-server copies between two rgpuds on one machine (docs/architecture.md,
// "Server-to-server copies"): the peer link (TCP) adds a unix socket beside itself (PeerIpcOpen),
// over which the passive server hands the active one descriptors of the memory of each copy's rows
// (PeerIpcMap; Executor::ipc_mem_export, CUDA IPC on the cuda backend).  The active server maps
// them once and keeps them, and each copy is one device-to-device DMA on its stream: at the GPUs'
// own speed. The passive server tells the active one when an export's memory left it (freed), and
// the active server unmaps it then.  Both ends fall back to the staging pipeline
// (server/peer_pipe.h) whenever memory cannot be shared.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/executor.h"
#include "proto/messages.h"
#include "server/peer_pipe.h"

namespace rgpu::server {

// This machine (its boot id): two rgpuds that report the same one share a kernel.
std::string peer_machine_id();
// Secrets compared in constant time.
bool peer_same_secret(const proto::PeerSecret& a, const proto::PeerSecret& b);
// RGPU_PEER_IPC=0 in rgpud's environment turns the path off (its copies then use the pipeline).
bool peer_ipc_enabled();

// The passive end's socket: listens on a fresh abstract name, accepts one connection that shows
// `nonce` within `timeout_s`, and acknowledges it with a byte.  -1 (and `why`) on failure.
int peer_ipc_listen(std::string& name, std::string& why);
int peer_ipc_accept(int listener, const proto::PeerSecret& nonce, int timeout_s, std::string& why);
// The active end's: connects, shows the nonce, waits for the byte.
int peer_ipc_connect(const std::string& name, const proto::PeerSecret& nonce, int timeout_s,
                     std::string& why);
// Descriptors over the socket (one data byte each).  Throw std::runtime_error.
void peer_ipc_send_fd(int sock, int fd);
int peer_ipc_recv_fd(int sock);

// The passive end's exports over one link, keyed by the active server's GPU (the importer), the
// exporting GPU and the export's base.  Not thread-safe (the link's thread owns it).
class PeerExports {
 public:
  // The stamp of the allocation at (dev, ptr) (AllocationTable::stamp_at; 0: none).
  using StampAt = std::function<uint64_t(int dev, uint64_t ptr)>;
  explicit PeerExports(StampAt stamp_at) : stamp_at_(std::move(stamp_at)) {}
  // PeerIpcMapReq::forget: exports the importer let go of on its own (triples importer, device,
  // base).
  void forget(const std::vector<uint64_t>& triples);
  // Answers PeerIpcMap for `rows` (checked by PeerBegin; `stamp`: their allocation's stamp then,
  // 0 when it has left the table since): exports the memory when the importer does not hold it
  // yet (its descriptor goes over `sock`).  Throws when the socket fails (the link is broken).
  void map(backend::Executor& exec, const PeerRows& rows, uint64_t stamp, uint32_t importer,
           int sock, proto::PeerIpcMapRep& rep);

 private:
  struct Export {
    uint32_t importer;
    int dev;
    uint64_t base, size;
    uint64_t probe;  // an address of the allocation it was made for, and that allocation's stamp:
    uint64_t stamp;  // while it lives, so does the export's memory
  };
  StampAt stamp_at_;
  std::vector<Export> exports_;  // oldest first
  bool warned_ = false;
};

// The active end's imports over one link.  The link's thread uses them; forget_device may come
// from the session's dispatcher (a device reset) while no copy runs: hence the lock.
class PeerImports {
 public:
  // Address space for an import near `ptr` (in its address window), and giving it back.
  struct Hooks {
    std::function<backend::Status(int dev, uint64_t near, uint64_t size, uint64_t& addr)> reserve;
    std::function<void(int dev, uint64_t addr, uint64_t size)> unreserve;
  };
  PeerImports(backend::Executor& exec, Hooks hooks) : exec_(exec), hooks_(std::move(hooks)) {}
  ~PeerImports() { clear(); }
  PeerImports(const PeerImports&) = delete;
  PeerImports& operator=(const PeerImports&) = delete;
  // Applies a PeerIpcMap reply for a copy between GPU `dev` here and `remote_dev` of the peer,
  // whose local rows start at `near` and whose remote rows span `extent` bytes: unmaps
  // its drops, maps a new export (descriptor from `sock`).  `addr`: where the remote rows lie
  // here.  False (with `why`) when the rows cannot be reached this way: the copy takes the
  // pipeline.  Throws when the socket fails or the reply makes no sense (rows outside the export).
  bool apply(int dev, uint32_t remote_dev, uint64_t near, uint64_t extent,
             const proto::PeerIpcMapRep& rep, int sock, uint64_t& addr, std::string& why);
  // What the importer let go of on its own since the last call (for PeerIpcMapReq::forget).
  std::vector<uint64_t> take_forgotten();
  // A direct copy (PeerCopier::try_direct, the dispatcher): where the remote rows (`extent`
  // bytes from `remote` on the peer's GPU `remote_dev`) lie here on GPU `dev`, when an import
  // holds them.  Then note_use() once the copy is on `stream`: the import is not unmapped before
  // the stream is past it.
  struct Found {
    uint64_t addr = 0;
    std::tuple<uint32_t, uint32_t, uint64_t> key;
    uint64_t mapped = 0;  // the import's own address (an import that replaced it is another)
  };
  bool find(int dev, uint32_t remote_dev, uint64_t remote, uint64_t extent, Found& out);
  // No CUDA call for a stream that used the import before: its event is recorded once the import
  // is to go (flush(), on the same dispatcher thread, so after every copy queued through it) or
  // the stream is (stream_ending).
  void note_use(const Found& f, uint64_t stream);
  // The dispatcher, before stream `stream` of GPU `dev` is destroyed: its uses' events are
  // recorded now, and a later stream given the same handle counts as another.
  void stream_ending(int dev, uint64_t stream);
  // The link ended: every import goes to flush(), which unmaps it once no stream uses it.
  void retire();
  bool empty();  // nothing mapped any more
  // Unmapping may wait for the GPU's streams (the host backend synchronizes them; cuMemUnmap did
  // not on two H200s, but nothing promises it), and a stream held at a copy's gate waits for the
  // copy: so a copy never unmaps; what it lets go of is unmapped by flush(), which the session's
  // dispatcher calls before each copy between servers (as StagingPool::reserve).  An import a
  // direct copy's stream has not passed yet stays for a later flush (never waited for).
  void flush();
  // The dispatcher, after PeerCopier::wait_idle: everything mapped on GPU `dev` goes.
  void forget_device(int dev);
  // Everything goes (the session ends); an import a stream may still use stays mapped.
  void clear();

 private:
  struct Use {
    uint64_t stream = 0;  // kGone once destroyed
    uint64_t event = 0;   // 0: none could be made; the import then stays mapped for the session
    bool dirty = false;   // copies since the event was last recorded
  };
  static constexpr uint64_t kGone = ~uint64_t{0};
  struct Import {
    uint64_t addr = 0, size = 0;
    std::vector<Use> uses;  // direct copies' streams
  };
  using Key = std::tuple<uint32_t, uint32_t, uint64_t>;  // importer GPU, exporter GPU, base
  void unmap(const Key& k, const Import& im);
  bool unused(const Key& k, const Import& im);    // no stream is before its uses' ends
  void record(int dev, Use& u);                   // the dispatcher: a dirty use's event
  Import* lookup(const Key& k, uint64_t mapped);  // under mu_: in imports_ or later_
  backend::Executor& exec_;
  const Hooks hooks_;
  std::mutex mu_;
  std::map<Key, Import> imports_;
  std::vector<std::pair<Key, Import>> later_;  // to unmap at flush()
  std::vector<uint64_t> forgotten_;
};

}  // namespace rgpu::server
