// SmallReclaim: whether the work issued before an epoch of the client's small-allocation
// quarantine closed is done (client/small_allocs.h), answered without waiting for the GPU.  Every
// GPU the session gave work idle now (a few stream queries each, as DeviceSynchronize's ready
// check) completes the epoch at once; otherwise, when every such GPU's legacy stream is idle, a
// mark is kept (private events on each stream given work since it was last seen idle, and the
// events of streams the client destroyed before they ended), and a later request finds it done.
// Nothing is ever queued on a legacy stream: an event there would wait for every blocking
// stream's earlier work and hold back their later work (a kernel waiting for a later one would
// never end).  An allocation never waits: a kernel may wait for what the program does after it.
#include <algorithm>

#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {
constexpr size_t kMarksPerWindow = 8;  // bound the private events a client can hold this way
constexpr size_t kEventsPerMark = 64;  // (more busy streams: no mark, a new slab instead)
constexpr size_t kWindows = 64;        // (GPU, window) pairs a session keeps epochs for
}  // namespace

bool Session::reclaim_mark_done(ReclaimMark& m) {
  while (!m.events.empty()) {
    const auto [dev, event] = m.events.back();
    if (!exec_.event_query(dev, event).ok()) return false;  // pending (or failed)
    release_event(dev, event);
    m.events.pop_back();
  }
  // A destroyed stream's event is the ended_streams_ entry's own until its work is done (pruned
  // then, and only then handed out again): no longer there, or complete, means done.
  std::erase_if(m.ended, [&](const std::pair<int, uint64_t>& de) {
    const auto entry = std::make_pair(static_cast<uint32_t>(de.first), de.second);
    return std::find(ended_streams_.begin(), ended_streams_.end(), entry) == ended_streams_.end() ||
           exec_.event_query(de.first, de.second).ok();
  });
  return m.ended.empty();
}

void Session::drop_reclaim_marks(uint32_t device) {
  // A reset destroys the GPU's events: a mark holding one can never be checked again (dropped,
  // its epochs stay incomplete; the client forgot those slabs anyway).  Its events on other GPUs
  // go back to their pools.
  std::erase_if(reclaim_marks_, [&](ReclaimMark& m) {
    bool on = false;
    for (const auto& [d, e] : m.events) on = on || static_cast<uint32_t>(d) == device;
    for (const auto& [d, e] : m.ended) on = on || static_cast<uint32_t>(d) == device;
    if (!on) return false;
    for (const auto& [d, e] : m.events)
      if (static_cast<uint32_t>(d) != device) release_event(d, e);
    return true;
  });
}

Status Session::on(SmallReclaimMsg, const SmallReclaimReq& q, SmallReclaimRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  const auto key = std::make_pair(q.device, q.window);
  // A client names a few windows (its virtual devices); any more are answered "nothing complete"
  // (the client takes new slabs) rather than kept.
  if (!reclaim_complete_.count(key) && reclaim_complete_.size() >= kWindows) {
    rep.complete = 0;
    return Status::success();
  }
  uint64_t& complete = reclaim_complete_[key];
  std::vector<uint32_t> gpus;
  for (uint32_t g = 0; g < allocs_.size(); ++g)
    if (g == q.device || gpu_used(g)) gpus.push_back(g);
  bool idle = true;
  for (uint32_t g : gpus) idle = idle && device_idle(g);
  if (idle) {  // the work issued before this request is done, on every GPU
    complete = std::max(complete, q.epoch + 1);
    std::erase_if(reclaim_marks_, [&](ReclaimMark& m) {
      if (m.key != key) return false;
      for (const auto& [d, e] : m.events) release_event(d, e);
      return true;
    });
    rep.complete = complete;
    return Status::success();
  }
  size_t marks = 0;
  for (auto it = reclaim_marks_.begin(); it != reclaim_marks_.end();) {
    if (it->key == key && reclaim_mark_done(*it)) {
      complete = std::max(complete, it->epoch + 1);
      it = reclaim_marks_.erase(it);
    } else {
      marks += it->key == key;
      ++it;
    }
  }
  rep.complete = complete;
  if (marks >= kMarksPerWindow) return Status::success();  // the client takes a new slab
  // No mark while a legacy stream has work (see above): a later reclaim finds it idle.
  for (uint32_t g : gpus)
    if (exec_.stream_query(static_cast<int>(g), 0).code == err::NotReady) return Status::success();
  std::vector<std::pair<int, uint64_t>> streams;  // the streams that may be busy
  for (const auto& [id, o] : streams_)
    if (o.busy && gpu_used(o.device)) streams.push_back({static_cast<int>(o.device), o.handle});
  if (streams.size() > kEventsPerMark) return Status::success();
  ReclaimMark m{key, q.epoch, {}, {}};
  for (const auto& [dev, stream] : streams) {
    uint64_t event = 0;
    if (!mark_stream(dev, stream, event).ok()) {  // (a broken context): no mark, no harm
      for (const auto& [d, e] : m.events) release_event(d, e);
      return Status::success();
    }
    m.events.push_back({dev, event});
  }
  for (const auto& [d, e] : ended_streams_) m.ended.push_back({static_cast<int>(d), e});
  reclaim_marks_.push_back(std::move(m));
  return Status::success();
}

}  // namespace rgpu::server
