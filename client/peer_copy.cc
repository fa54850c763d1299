// Copies between GPUs of two servers: server to server, never through the client
// (docs/architecture.md, "Server-to-server copies").  The active server (the stream's) pushes
// (its GPU is the source) or pulls (the destination) over a peer link to the passive one, made
// at the pair's first copy with a one-time ticket from the passive server and kept: later copies
// are one request to the active server.  A failed copy reported by the active server may mean
// the link is gone; the next copy brings a new ticket.
#include "client/client.h"
#include "common/strings.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {
uint64_t u64(const void* p) { return reinterpret_cast<uint64_t>(p); }
}  // namespace

CudaError Client::memcpy_across(void* dst, int dst_dev, size_t dpitch, const void* src, int src_dev,
                                size_t spitch, size_t width, size_t height, const Stream* s) {
  if (width == 0 || height == 0) return err::Success;
  // Without a stream (cudaMemcpyPeer) the copy runs on the legacy stream of the destination.
  const int active = s ? s->device : dst_dev;
  if (active != dst_dev && active != src_dev) return errc::InvalidResourceHandle;
  const bool push = active == src_dev;
  const int passive = push ? dst_dev : src_dev;
  CudaError e;
  // Copies from one device one after another do not wait for each other (link_only); a copy
  // that writes a device (the active one, or the passive one when pushed to) waits for earlier
  // copies from it (link).
  ServerLink* pl = push ? link(passive, &e) : link_only(passive, &e);
  if (!pl) return e;
  ServerLink* al = link(active, &e);
  if (!al) return e;
  const DeviceSpec& ps = devices_[passive].spec;
  PeerCopyReq q;
  q.device = devices_[active].spec.gpu;
  q.remote_device = ps.gpu;
  q.local = u64(push ? src : dst);
  q.local_pitch = push ? spitch : dpitch;
  q.remote = u64(push ? dst : src);
  q.remote_pitch = push ? dpitch : spitch;
  q.width = width;
  q.height = height;
  q.push = push ? 1 : 0;
  q.stream = s ? s->id : 0;
  // The passive server as this client names it (RGPU_SERVERS): the key of the active server's
  // link to it.  The link itself goes where the passive server's ticket says it is.
  const bool v6 = ps.host.find(':') != std::string::npos;
  q.endpoint =
      (v6 ? "[" + ps.host + "]" : ps.host) + ":" + std::to_string(ps.port ? ps.port : kDefaultPort);
  q.remote_name = ps.text;
  // (Not while a capture is on: waiting for a capturing stream would end its capture.)
  if (!capture_running()) throttle_across(pl, active, q.stream);
  // The passive server marks this client's work there so far: the copy waits for it.
  q.fence = peer_fences_.fetch_add(1) + 1;
  e = pl->call<PeerFenceMsg>(PeerFenceReq{ps.gpu, q.fence});
  if (e != err::Success) return e;
  bool sent = false;
  {
    std::lock_guard<std::mutex> lock(peer_links_mu_);
    const std::pair<const ServerLink*, const ServerLink*> key{al, pl};
    auto it = peer_links_.find(key);
    const uint64_t failures = al->peer_copy_failures();
    if (it == peer_links_.end() || it->second != failures) {
      // A new link: the ticket and the copy that uses it go out before any copy that relies
      // on the link (so the lock stays held for this one round trip).
      peer_links_.erase(key);
      PeerTicketRep ticket;
      e = pl->call<PeerTicketMsg>(Empty{}, &ticket);
      if (e != err::Success) return e;
      // Handed on unchanged: the active rgpud checks the passive one's MAC before it connects to
      // the endpoint inside (and the certificate pin, learnt over our own link).
      q.ticket = ticket.ticket;
      e = al->call<PeerCopyMsg>(q);
      if (e == err::Success) peer_links_[key] = failures;
      sent = true;
    }
  }
  if (!sent) e = al->call<PeerCopyMsg>(q);
  if (e != err::Success) return e;
  std::lock_guard<std::mutex> lock(peer_pending_mu_);
  if (s) {
    peer_pending_[passive].insert({active, s->id});
  } else {
    // Host-asynchronous, like CUDA's cudaMemcpyPeer: the passive device's next work waits for
    // the destination's legacy stream (link()).
    peer_owed_[passive][active] = ++peer_owed_seq_;
    peer_owed_devices_.store(static_cast<int>(peer_owed_.size()), std::memory_order_release);
  }
  return err::Success;
}

void Client::throttle_across(const ServerLink* passive, int active, uint64_t stream) {
  std::set<std::pair<int, uint64_t>> streams;
  {
    std::lock_guard<std::mutex> lock(peer_pending_mu_);
    PeerInflight& f = peer_inflight_[passive];
    f.streams.insert({active, stream});
    if (++f.count < kPeerInflight) return;
    f.count = 0;
    streams.swap(f.streams);
  }
  for (const auto& [dev, id] : streams) synchronize_for_peer(Stream{dev, id, 0, 0});
}

CudaError Client::synchronize_for_peer(const Stream& s) {
  CudaError e;
  ServerLink* l = link_only(s.device, &e);
  if (!l) return e;
  e = l->call<StreamSynchronizeMsg>(ObjectReq{devices_[s.device].spec.gpu, s.id});
  // A stream destroyed since has nothing left in flight; any other error is the program's to see.
  if (e != err::Success && e != errc::InvalidResourceHandle) l->defer_error(e);
  return e;
}

void Client::settle_owed(int dev, bool even_capturing) {
  {
    std::lock_guard<std::mutex> lock(peer_pending_mu_);
    if (!peer_owed_.count(dev)) return;
  }
  std::lock_guard<std::mutex> settling(peer_settle_mu_);
  std::map<int, uint64_t> owed, settled;
  {
    std::lock_guard<std::mutex> lock(peer_pending_mu_);
    auto it = peer_owed_.find(dev);
    if (it == peer_owed_.end()) return;  // another thread's settle came first
    owed = it->second;
  }
  for (const auto& [active, seq] : owed) {
    // Waiting for the active server's legacy stream while a capture runs there could end the
    // capture: that wait stays owed.  A capture on another server is no reason not to wait.
    if (!even_capturing && capture_running_on(devices_[active].link)) continue;
    synchronize_for_peer(Stream{active, 0, 0, 0});
    settled[active] = seq;
  }
  std::lock_guard<std::mutex> lock(peer_pending_mu_);
  auto it = peer_owed_.find(dev);
  if (it == peer_owed_.end()) return;
  for (const auto& [active, seq] : settled) {
    auto a = it->second.find(active);
    if (a != it->second.end() && a->second == seq) it->second.erase(a);  // none queued since
  }
  if (it->second.empty()) peer_owed_.erase(it);
  peer_owed_devices_.store(static_cast<int>(peer_owed_.size()), std::memory_order_release);
}

uint64_t Client::owed_mark() {
  if (peer_owed_devices_.load(std::memory_order_acquire) == 0) return 0;
  std::lock_guard<std::mutex> lock(peer_pending_mu_);
  return peer_owed_seq_;
}

void Client::owed_settled_by(int active, uint64_t seq) {
  if (seq == 0) return;
  std::lock_guard<std::mutex> lock(peer_pending_mu_);
  for (auto it = peer_owed_.begin(); it != peer_owed_.end();) {
    auto a = it->second.find(active);
    if (a != it->second.end() && a->second <= seq) it->second.erase(a);  // none queued since
    it = it->second.empty() ? peer_owed_.erase(it) : std::next(it);
  }
  peer_owed_devices_.store(static_cast<int>(peer_owed_.size()), std::memory_order_release);
}

CudaError Client::settle_peer_copies(int dev) {
  std::set<std::pair<int, uint64_t>> streams;
  {
    std::lock_guard<std::mutex> lock(peer_pending_mu_);
    auto it = peer_pending_.find(dev);
    if (it != peer_pending_.end()) {
      streams.swap(it->second);
      peer_pending_.erase(it);
    }
  }
  settle_owed(dev, true);  // a free synchronizes, as CUDA's does
  CudaError first = err::Success;
  for (const auto& [active, id] : streams) {
    CudaError e = stream_synchronize(Stream{active, id});
    // A stream destroyed since is no error of the free's.
    if (first == err::Success && e != err::Success && e != errc::InvalidResourceHandle) first = e;
  }
  return first;
}

}  // namespace rgpu::client
