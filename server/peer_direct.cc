// Direct copies between two rgpuds on one machine (server/peer_fences.h): the copy waits on the
// GPU for the peer's fence and runs as one DMA on the client's stream, with no round trip to the
// peer.  The link's thread watches the waits (PeerCopier::watch).
#include <cstdlib>
#include <thread>

#include "backend/gate.h"
#include "common/cuda_errors.h"
#include "common/log.h"
#include "server/peer_copy.h"

namespace rgpu::server {

using namespace rgpu::proto;
using backend::Status;
using Clock = std::chrono::steady_clock;

namespace {
// How long the dispatcher waits for the peer to handle the client's PeerFence, which the client
// sent before this copy (else: the copy asks the peer, as any copy can).  300 µs;
// RGPU_PEER_FENCE_SPIN_US in rgpud's environment sets it (tests on slow, sanitized builds).
std::chrono::microseconds fence_spin() {
  static const std::chrono::microseconds spin = [] {
    const char* v = getenv("RGPU_PEER_FENCE_SPIN_US");
    long us = v && *v ? strtol(v, nullptr, 10) : 300;
    return std::chrono::microseconds(us >= 0 && us <= 1000000 ? us : 300);
  }();
  return spin;
}
// A direct copy's fence not reached for this long makes the link ask the peer about it.
constexpr auto kLateFence = std::chrono::seconds(1);
}  // namespace

bool PeerCopier::try_direct(const PeerJob& job, uint64_t stream, Status& out) {
  if (job.has_ticket() || job.remote.fence == 0) return false;
  const uint32_t rdev = job.remote.device;
  if (rdev >= kPeerFenceDevices) return false;
  std::shared_ptr<Link> l;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = links_.find(job.endpoint);
    if (stopping_ || it == links_.end()) return false;
    l = it->second;
  }
  PeerFencePage* page = l->page.load(std::memory_order_acquire);
  if (!page) return false;
  const uint32_t slot = l->slot;
  // The peer has handled the client's fence, so every free the client asked for before it; and
  // stores this fence in the link's slot.
  const auto fence = static_cast<uint32_t>(job.remote.fence);
  if (!peer_fence_passed(peer_fence_load(page->processed[rdev]), fence)) {
    for (auto until = Clock::now() + fence_spin();
         !peer_fence_passed(peer_fence_load(page->processed[rdev]), fence);) {
      if (Clock::now() > until) return false;
      std::this_thread::yield();
    }
  }
  const uint32_t from = peer_fence_load(page->slot_from[slot]);
  if (from == 0 || !peer_fence_passed(fence, from)) return false;
  // No free there since the imports were last checked: they hold what the client names.
  const uint64_t checked = l->checked_frees.load(std::memory_order_acquire);
  if (!(checked >> 32) || static_cast<uint32_t>(checked) != peer_fence_load(page->frees))
    return false;
  // The remote rows' extent (the session checked only the local ones), without wrapping.
  const uint64_t w = job.remote.width, h = job.remote.height;
  const uint64_t rpitch = h > 1 ? job.remote.pitch : w;
  if (h > 1 && (rpitch < w || rpitch > (UINT64_MAX - w) / (h - 1))) return false;
  const uint64_t extent = (h - 1) * rpitch + w;
  PeerImports::Found found;
  const int dev = job.local.dev;
  if (!l->imports->find(dev, rdev, job.remote.ptr, extent, found)) return false;
  // The peer's GPU is past the fence already (copies queued one after another from a source
  // nothing writes): the stream need not wait for it.
  const bool reached = peer_fence_passed(peer_fence_load(page->reached[slot][rdev]), fence);
  bool fresh = false;
  {
    std::lock_guard<std::mutex> lock(l->mu);  // the link's thread sees the wait (watching)
    if (l->closing || l->cancelled || l->done) return false;
    std::lock_guard<std::mutex> dlock(l->direct_mu);
    if (l->direct_closed) return false;
    if (!reached) {
      auto [it, added] = l->waits.try_emplace(rdev);
      Link::Wait& wt = it->second;
      if (added) {
        wt.since = Clock::now();
        wt.seen = peer_fence_load(page->reached[slot][rdev]);
      }
      if (added || !peer_fence_passed(wt.fence, fence)) wt.fence = fence;
      fresh = added;
    }
  }
  // The link's thread watches waits now and then once it has one; only the first needs waking
  // it (a wakeup per copy cost the dispatcher more than the copy's own DMA call).
  if (fresh) l->cv.notify_all();
  // A wait that cannot be queued: the round trip instead (the wait above passes by itself).
  if (!reached && !exec_.gate_wait(dev, stream, &page->reached[slot][rdev], fence).ok())
    return false;
  const backend::Rect r{job.local.width, job.local.height};
  out = job.push ? exec_.copy_on_device(dev, found.addr, rpitch, job.local.base, job.local.pitch, r,
                                        stream)
                 : exec_.copy_on_device(dev, job.local.base, job.local.pitch, found.addr, rpitch, r,
                                        stream);
  if (out.ok()) l->imports->note_use(found, stream);
  static const bool trace = getenv("RGPU_PEER_TRACE") && *getenv("RGPU_PEER_TRACE") == '1';
  if (trace)
    LOG_NOTICE("peer copy of %llu bytes: direct (%s)",
               static_cast<unsigned long long>(job.local.bytes()), out.ok() ? "queued" : "failed");
  if (!out.ok())
    out.message = std::string("copy ") + (job.push ? "to " : "from ") + job.remote_name + " (" +
                  job.endpoint + "): " + out.message;
  return true;
}

bool PeerCopier::watching(Link& l) {
  std::lock_guard<std::mutex> lock(l.direct_mu);
  return !l.waits.empty();
}

void PeerCopier::watch(Link& l) {
  struct Late {
    uint32_t rdev, fence;
  };
  std::vector<Late> late;
  const auto now = Clock::now();
  PeerFencePage* page = l.page.load(std::memory_order_acquire);
  if (!page) return;
  {
    std::lock_guard<std::mutex> lock(l.direct_mu);
    for (auto it = l.waits.begin(); it != l.waits.end();) {
      Link::Wait& w = it->second;
      const uint32_t cur = peer_fence_load(page->reached[l.slot][it->first]);
      if (peer_fence_passed(cur, w.fence)) {
        it = l.waits.erase(it);
        continue;
      }
      if (cur != w.seen) {  // the peer's stream moves: late only from here
        w.seen = cur;
        w.since = now;
      }
      if (now - w.since >= kLateFence && now - w.asked >= kLateFence) {
        w.asked = now;
        late.push_back({it->first, w.fence});
      }
      ++it;
    }
  }
  for (const Late& x : late) {
    Status s;
    try {
      if (!l.ch) throw std::runtime_error("not connected");
      channel::Channel& ch = *l.ch;
      const auto type = static_cast<uint16_t>(MsgId::PeerFenceQuery);
      uint64_t id = ch.next_request_id();
      ch.send(type, kFlagSync, id, encode_message(PeerFenceQueryReq{x.rdev}));
      FrameHeader h;
      std::vector<uint8_t> body;
      ch.read_frame(h, body, channel::Channel::Wait::Timed);
      if (!(h.flags & kFlagReply) || h.type != type || h.request_id != id)
        throw std::runtime_error("the peer sent an unexpected frame");
      Empty ok;
      std::string message;
      if (int32_t e = decode_reply(body, ok, message)) s = Status::fail(e, message);
    } catch (const std::exception& e) {
      l.failed = e.what();
      std::lock_guard<std::mutex> lock(l.mu);
      l.closing = true;  // the link ends (end_direct fails the waits)
      if (l.conn) l.conn->shutdown();
      return;
    }
    if (s.code == err::NotReady) continue;  // its GPU is busy: the copies wait, as CUDA's do
    // Idle there: the fence asked about was stored by now, or it never will be.
    if (s.ok() && peer_fence_passed(peer_fence_load(page->reached[l.slot][x.rdev]), x.fence))
      continue;
    if (s.ok()) s = Status::fail(err::DevicesUnavailable, "its GPU never got to the copy's fence");
    l.failed = s.message;
    {
      std::lock_guard<std::mutex> lock(l.mu);
      l.closing = true;  // no more copies over this link; the client's next brings a new one
    }
    end_direct(l, s.message);
    return;
  }
}

void PeerCopier::end_direct(Link& l, const std::string& why) {
  std::map<uint32_t, Link::Wait> waits;
  {
    std::lock_guard<std::mutex> lock(l.direct_mu);
    l.direct_closed = true;
    waits.swap(l.waits);
  }
  PeerFencePage* page = l.page.load(std::memory_order_acquire);
  if (!page) return;
  std::vector<std::pair<uint32_t, uint32_t>> lost;
  for (const auto& [rdev, w] : waits)
    if (!peer_fence_passed(peer_fence_load(page->reached[l.slot][rdev]), w.fence))
      lost.push_back({rdev, w.fence});
  if (lost.empty()) return;
  // The error first: the client hears of it before its streams can be seen to go on.
  if (failed_) failed_(Status::fail(err::DevicesUnavailable, "copy with " + l.name + ": " + why));
  for (const auto& [rdev, fence] : lost)                      // this link's words only
    backend::open_gate(&page->reached[l.slot][rdev], fence);  // the streams go on (failed)
}

}  // namespace rgpu::server
