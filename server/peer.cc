// Server-to-server copies, the session's requests (docs/architecture.md, "Server-to-server
// copies"): PeerTicket (this server is the passive end: server/peer_host.h) and PeerCopy (this
// server's stream runs the copy: server/peer_copy.h).  The peer link's own requests are served
// by PeerHost on the link, never by a client's session.
#include <algorithm>

#include "backend/gate.h"
#include "common/cuda_errors.h"
#include "common/log.h"
#include "server/peer_copy.h"
#include "server/peer_host.h"
#include "server/peer_vouch.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {
constexpr unsigned kEventDisableTiming = 2;  // cudaEventDisableTiming
constexpr CudaError kCaptureUnsupported = 900;
Status link_only(const char* name) {
  return Status::fail(err::NotSupported, std::string(name) + " is a request of peer links only");
}
}  // namespace

StagingPool& Session::peer_pool() {
  if (!peer_pool_) peer_pool_ = std::make_unique<StagingPool>(exec_);
  return *peer_pool_;
}

void Session::stop_peers() {
  if (peer_copier_) peer_copier_->stop();
  if (peer_host_) peer_host_->stop();
}

void Session::settle_peer_copies(const char* why) {
  if (!peer_copier_) return;
  // A copy ends on its own (its peer link times out within timeout_s), so this wait is bounded
  // in any case; the limit only keeps a stuck link from stalling the dispatcher longer.
  const auto limit = std::chrono::seconds(std::max(config_.client_timeout_s, 1) + 5);
  if (!peer_copier_->wait_idle(limit))
    LOG_WARN("%s: copies to other servers still running after %lld s; going on", why,
             static_cast<long long>(limit.count()));
}

PeerImports::Hooks Session::peer_import_hooks() {
  PeerImports::Hooks hooks;  // called on a link's thread: the heap's lock
  hooks.reserve = [this](int dev, uint64_t near, uint64_t size, uint64_t& addr) {
    // In the middle of a copy whose stream is gated, while the dispatcher may hold the lock
    // across an unmap that waits for the GPU's streams (the host backend's does): a bounded try,
    // and the copy takes the pipeline when the heap stays busy.
    std::unique_lock<std::timed_mutex> lock(heap_mu_, std::chrono::milliseconds(20));
    if (!lock.owns_lock())
      return Status::fail(err::NotReady, "the session's address space is busy");
    const auto d = static_cast<uint32_t>(dev);
    return windows_.reserve(d, windows_.window_at(d, near), size, addr);
  };
  hooks.unreserve = [this](int dev, uint64_t addr, uint64_t size) {
    std::lock_guard<std::timed_mutex> lock(heap_mu_);
    windows_.unreserve(static_cast<uint32_t>(dev), addr, size);
  };
  return hooks;
}

PeerHost& Session::peer_host() {
  if (!peer_host_) {
    PeerHost::Hooks hooks;
    hooks.check = [this](const PeerBeginReq& q, uint64_t born_by) {  // a link's thread: the
      return check_range(q.device, q.ptr, q.pitch, q.width, q.height, born_by);  // table locks
    };
    hooks.release_event = [this](int dev, uint64_t event) { release_event(dev, event); };
    hooks.stamp_at = [this](int dev, uint64_t ptr) {
      return dev >= 0 && static_cast<size_t>(dev) < allocs_.size() ? allocs_[dev].stamp_at(ptr) : 0;
    };
    hooks.fence_page = [this](int& fd, uint32_t& slot) { return peer_fence_page(fd, slot); };
    hooks.fence_query = [this](uint32_t dev) {
      if (Status s = check_device(dev); !s.ok()) return s;
      return exec_.stream_query(static_cast<int>(dev), 0);
    };
    peer_host_ = std::make_unique<PeerHost>(
        exec_, peer_pool(), config_.control, config_.client_timeout_s, std::move(hooks),
        config_.peer_key ? &*config_.peer_key : nullptr, config_.peer_tls);
  }
  return *peer_host_;
}

Status Session::peer_fence_page(int& fd, uint32_t& slot) {
  std::lock_guard<std::mutex> lock(peer_fences_mu_);
  if (!peer_fences_) {
    if (peer_fences_refused_) return Status::fail(err::NotSupported, "no fence page here");
    std::string why;
    if (allocs_.size() > kPeerFenceDevices)
      why = "more GPUs than a fence page covers";
    else
      peer_fences_ = PeerFenceMap::create(exec_, why);
    if (!peer_fences_) {
      peer_fences_refused_ = true;
      LOG_INFO("peer copies: no fence page (%s); every copy asks the passive server", why.c_str());
      return Status::fail(err::NotSupported, "no fence page here: " + why);
    }
    // From now on every free counts (the tables have their own locks).
    for (AllocationTable& t : allocs_) t.count_frees(&peer_fences_->page()->frees);
    peer_page_.store(peer_fences_->page(), std::memory_order_release);
  }
  // Slots are never reused: a link that ended may have opened its words.
  const uint32_t n = peer_slots_.load(std::memory_order_relaxed);
  if (n >= kPeerFenceSlots) return Status::fail(err::NotSupported, "no fence slot left");
  peer_slots_.store(n + 1, std::memory_order_release);  // PeerFence signals it from now on
  fd = peer_fences_->fd();
  slot = n;
  return Status::success();
}

Status Session::on(PeerTicketMsg, const Empty&, PeerTicketRep& rep) {
  if (!config_.peer_key)
    return Status::fail(err::NotSupported, "this rgpud has no peer key (" + config_.peer_key_error +
                                               "): it copies to and from no other server");
  // The endpoint the ticket vouches for: where this client reached this rgpud.
  std::string why;
  const std::string endpoint = peer_own_endpoint(conn_, config_.peer_listen, why);
  if (endpoint.empty()) return Status::fail(err::NotSupported, why);
  PeerHost& host = peer_host();
  // Staging for every later copy over the link, now, while nothing waits for one
  // (StagingPool::reserve): two buffers of the largest chunk serve every size.
  peer_pool().reserve(kPeerMaxChunk, 2);
  return host.issue(rep, endpoint);
}

bool Session::next_request_is(MsgId type) {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return !queue_.empty() && queue_.front().header.type == static_cast<uint16_t>(type);
}

Status Session::on(PeerFenceMsg, const PeerFenceReq& q, Empty&) {
  Status bad = check_device(q.device);
  if (bad.ok() && q.fence == 0) bad = Status::fail(err::InvalidValue, "peer fence 0");
  if (bad.ok()) peer_fences_pending_[q.device].push_back(q.fence);
  // A client that queues copies one after another sends fences faster than an event and a store
  // each take: a run of them marks one point (nothing else runs between them here).
  if (next_request_is(MsgId::PeerFence)) return bad;
  Status f = flush_fences();
  return bad.ok() ? f : bad;
}

Status Session::flush_fences() {
  std::map<uint32_t, std::vector<uint64_t>> pending;
  pending.swap(peer_fences_pending_);
  Status first = Status::success();
  for (auto& [device, ids] : pending) {
    uint64_t event = 0;
    if (Status s = mark_legacy(static_cast<int>(device), event); !s.ok()) {
      if (first.ok()) first = s;
      continue;
    }
    // What was allocated by now is what the copies may name (AllocationTable stamps).
    peer_host().fence(ids, static_cast<int>(device), event, allocs_[device].stamp());
    // For copies through memory a server on this machine mapped before: the legacy stream stores
    // the fence when it gets there, then the page says this fence was handled (and so every free
    // the client asked for before it: PeerCopier::try_direct).
    PeerFencePage* page = peer_page_.load(std::memory_order_acquire);
    if (!page) continue;
    // Fences from several client threads may come out of order: the newest so far is stored
    // (this point of the stream is past every fence handled before it).
    uint32_t& newest = peer_fence_newest_[device];
    for (uint64_t id : ids) {
      const auto f = static_cast<uint32_t>(id);
      if (newest == 0 || !peer_fence_passed(newest, f)) newest = f;
    }
    const uint32_t slots = peer_slots_.load(std::memory_order_acquire);
    bool signalled = true;
    for (uint32_t s = 0; s < slots && signalled; ++s) {
      // A slot's first signal: its words start just before it (not 0, which a fence id past
      // 2^31 would count as passed), so no fence from `slot_from` on passes before the GPU
      // stores it.  No GPU store to the slot is queued yet.
      if (peer_fence_load(page->slot_from[s]) == 0)
        for (uint32_t& w : page->reached[s]) peer_fence_store(w, newest - 1);
      signalled =
          exec_.gate_signal(static_cast<int>(device), 0, &page->reached[s][device], newest).ok();
      // Fences from this one on are stored for the slot.
      if (signalled && peer_fence_load(page->slot_from[s]) == 0)
        peer_fence_store(page->slot_from[s], newest);
    }
    if (signalled) peer_fence_store(page->processed[device], newest);
  }
  return first;
}

Status Session::refuse_peer_copy(const PeerCopyReq& q, const std::string& why) {
  // Logged once per reason (a client may send many), with what the client named.
  if (peer_refusals_.size() < 32 && peer_refusals_.insert(why).second)
    LOG_WARN("client %s: copy %s %s refused, nothing was connected: %s", conn_.peer().c_str(),
             q.push ? "to" : "from", q.ticket.endpoint.c_str(), why.c_str());
  return Status::fail(err::NotPermitted, std::string("copy ") + (q.push ? "to " : "from ") +
                                             q.remote_name + " (" + q.endpoint +
                                             "): refused, nothing was connected: " + why);
}

Status Session::on(PeerCopyMsg, const PeerCopyReq& q, Empty&) {
  // A new link goes only where an rgpud of this cluster vouched for itself (server/peer_vouch.h),
  // checked before anything else (PeerCopier::connect checks again before connecting).
  PeerJob job;
  job.ticket = q.ticket;
  if (job.has_ticket()) {
    const std::string why = peer_check_voucher(config_.peer_key ? &*config_.peer_key : nullptr,
                                               config_.peer_key_error, q.ticket);
    if (!why.empty()) return refuse_peer_copy(q, why);
  }
  if (Status s = check_range(q.device, q.local, q.local_pitch, q.width, q.height); !s.ok())
    return s;
  if (q.width == 0 || q.height == 0) return Status::success();
  if (graphs_.streams.count(q.stream))
    return Status::fail(kCaptureUnsupported,
                        "a copy between GPUs of two servers cannot be captured in a graph");
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.stream, h); !s.ok()) return s;
  const int dev = static_cast<int>(q.device);
  job.local = PeerRows{dev, q.local, q.height > 1 ? q.local_pitch : q.width, q.width, q.height};
  job.remote = PeerBeginReq{q.remote_device, q.remote, q.remote_pitch, q.width, q.height, q.fence};
  job.push = q.push != 0;
  job.endpoint = q.endpoint;
  job.remote_name = q.remote_name;
  if (peer_copier_) {
    // The unmaps that earlier copies left (PeerImports::flush), while nothing waits for this one.
    peer_copier_->flush_unmaps();
    // Memory of a server on this machine mapped here before: the copy goes on the stream itself.
    if (Status direct; peer_copier_->try_direct(job, h, direct)) return direct;
  }
  // Staging first, while nothing waits for this copy (StagingPool::reserve).
  peer_pool().reserve(peer_chunk_bytes(q.width * q.height), 2);
  // The copy thread starts once the stream's earlier work is done (this event), and the stream's
  // later work waits at its gate until the copy has ended.
  if (Status s = exec_.event_create(dev, kEventDisableTiming, job.after_event); !s.ok()) return s;
  if (Status s = exec_.event_record(dev, job.after_event, h); !s.ok()) {
    exec_.event_destroy(dev, job.after_event);
    return s;
  }
  Gate* gate = nullptr;
  if (Status s = gate_for(q.device, q.stream, gate); !s.ok()) {
    exec_.event_destroy(dev, job.after_event);
    return s;
  }
  uint32_t* word = gate->word;
  uint32_t seq;
  {
    std::lock_guard<std::mutex> lock(cb_mu_);
    seq = ++gate->issued;
    if (cancelled_) backend::open_gate(word, seq);
  }
  if (Status s = exec_.gate_wait(dev, h, word, seq); !s.ok()) {
    backend::open_gate(word, seq);
    exec_.event_destroy(dev, job.after_event);
    return s;
  }
  if (!peer_copier_)
    peer_copier_ = std::make_unique<PeerCopier>(
        exec_, peer_pool(), config_.peer_key ? &*config_.peer_key : nullptr, config_.peer_key_error,
        std::min(config_.client_timeout_s, 10), peer_import_hooks(), [this](const Status& s) {
          push_async_error(0, static_cast<uint16_t>(MsgId::PeerCopy), s);  // a link's thread
        });
  const uint64_t request_id = current_->header.request_id;
  const uint16_t type = current_->header.type;
  peer_copier_->start(std::move(job), [this, word, seq, request_id, type](const Status& s) {
    if (!s.ok()) push_async_error(request_id, type, s);  // before the stream goes on
    backend::open_gate(word, seq);
  });
  return Status::success();
}

Status Session::on(PeerAttachMsg, const PeerAttachReq&, PeerAttachRep&) {
  return link_only("PeerAttach");
}
Status Session::on(PeerProveMsg, const PeerProveReq&, Empty&) { return link_only("PeerProve"); }
Status Session::on(PeerRouteMsg, const PeerRouteReq&, Empty&) { return link_only("PeerRoute"); }
Status Session::on(PeerWriteMsg, const PeerWriteReq&, Empty&) { return link_only("PeerWrite"); }
Status Session::on(PeerReadMsg, const PeerReadReq&, Empty&) { return link_only("PeerRead"); }
Status Session::on(PeerFinishMsg, const Empty&, Empty&) { return link_only("PeerFinish"); }
Status Session::on(PeerBeginMsg, const PeerBeginReq&, Empty&) { return link_only("PeerBegin"); }
Status Session::on(PeerIpcOpenMsg, const PeerIpcOpenReq&, PeerIpcOpenRep&) {
  return link_only("PeerIpcOpen");
}
Status Session::on(PeerIpcMapMsg, const PeerIpcMapReq&, PeerIpcMapRep&) {
  return link_only("PeerIpcMap");
}
Status Session::on(PeerIpcDoneMsg, const Empty&, Empty&) { return link_only("PeerIpcDone"); }
Status Session::on(PeerFenceQueryMsg, const PeerFenceQueryReq&, Empty&) {
  return link_only("PeerFenceQuery");
}
Status Session::on(PeerFencePageMsg, const Empty&, PeerFencePageRep&) {
  return link_only("PeerFencePage");
}

}  // namespace rgpu::server
