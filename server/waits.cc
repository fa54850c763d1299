// Waits of a session, off the dispatcher.  The dispatcher enqueues everything in arrival order; a
// request that must wait for the GPU enqueues what it needs (a private event recorded on the
// stream, on the legacy stream for a synchronous copy) and hands the wait and the reply to a
// waiter (server/waiter.h), so a synchronization on one stream never holds up other streams' work.
// See "Waits" in docs/architecture.md.
#include "common/log.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;
using backend::Rect;

namespace {
constexpr unsigned kEventDisableTiming = 2;  // cudaEventDisableTiming
constexpr unsigned kStreamNonBlocking = 1;   // cudaStreamNonBlocking
}  // namespace

void Session::defer(Wait wait, bool now, std::function<bool()> ready) {
  deferred_ = std::move(wait);
  deferred_now_ = now;
  deferred_ready_ = now ? nullptr : std::move(ready);
}

void Session::latch_sticky(CudaError code) {
  CudaError none = err::Success;
  sticky_.compare_exchange_strong(none, code);
}

void Session::finish_wait(const FrameHeader& h, Wait& wait, bool launched) {
  // On a waiter thread, or on the dispatcher when the wait is ready (defer's `now`/`ready`).
  // What a synchronizing reply needs, as the dispatcher did it before: what
  // finished streams handed over goes first (HostWork::flush), then the kernels' output, the
  // sticky-error latch, the reply.
  try {
    bool replied = false;
    Status s = wait(replied);
    if (!s.ok() && cuda_error_is_sticky(s.code)) latch_sticky(s.code);
    if (replied) return;
    host_work_.flush();
    if (launched) forward_output(h.request_id);
    if (s.ok())
      push_frame(h.type, kFlagReply, h.request_id, encode_ok_reply(Empty{}), Outbox::Block::IfFull);
    else
      push_error(h, s);
  } catch (const std::exception& e) {
    LOG_ERROR("closing connection from %s: %s", conn_.peer().c_str(), e.what());
    conn_.shutdown();
  }
}

// ---- private events and streams
// ---------------------------------------------------------------------------------------

Status Session::acquire_event(int dev, uint64_t& event) {
  {
    std::lock_guard<std::mutex> lock(waits_mu_);
    if (!free_events_[dev].empty()) {
      event = free_events_[dev].back();
      free_events_[dev].pop_back();
      return Status::success();
    }
  }
  if (Status s = exec_.event_create(dev, kEventDisableTiming, event); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(waits_mu_);
  all_events_[dev].push_back(event);
  return Status::success();
}

void Session::release_event(int dev, uint64_t event) {
  std::lock_guard<std::mutex> lock(waits_mu_);
  free_events_[dev].push_back(event);
}

Status Session::acquire_stream(int dev, uint64_t& stream) {
  {
    std::lock_guard<std::mutex> lock(waits_mu_);
    if (!free_streams_[dev].empty()) {
      stream = free_streams_[dev].back();
      free_streams_[dev].pop_back();
      return Status::success();
    }
  }
  if (Status s = exec_.stream_create(dev, kStreamNonBlocking, 0, stream); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(waits_mu_);
  all_streams_[dev].push_back(stream);
  return Status::success();
}

void Session::release_stream(int dev, uint64_t stream) {
  std::lock_guard<std::mutex> lock(waits_mu_);
  free_streams_[dev].push_back(stream);
}

Status Session::mark_stream(int dev, uint64_t stream, uint64_t& event) {
  if (Status s = acquire_event(dev, event); !s.ok()) return s;
  Status s = exec_.event_record(dev, event, stream);
  if (!s.ok()) release_event(dev, event);
  return s;
}

void Session::forget_private(int dev) {
  std::lock_guard<std::mutex> lock(waits_mu_);
  free_events_[dev].clear();
  free_streams_[dev].clear();
  all_events_[dev].clear();
  all_streams_[dev].clear();
}

void Session::free_private() {
  // No waiter runs any more (waiter_.stop()).
  for (size_t d = 0; d < all_events_.size(); ++d) {
    const int dev = static_cast<int>(d);
    for (uint64_t e : all_events_[d]) exec_.event_destroy(dev, e);
    for (uint64_t s : all_streams_[d]) exec_.stream_destroy(dev, s);
    forget_private(dev);
  }
  for (auto& [handle, dev] : destroy_later_) exec_.event_destroy(dev, handle);
  event_holders_.clear();
  destroy_later_.clear();
}

void Session::hold_event(uint64_t handle) {
  std::lock_guard<std::mutex> lock(waits_mu_);
  ++event_holders_[handle];
}

void Session::unhold_event(int dev, uint64_t handle) {
  bool destroy = false;
  {
    std::lock_guard<std::mutex> lock(waits_mu_);
    auto it = event_holders_.find(handle);
    if (it != event_holders_.end() && --it->second == 0) {
      event_holders_.erase(it);
      destroy = destroy_later_.erase(handle) > 0;
    }
  }
  if (destroy) exec_.event_destroy(dev, handle);  // the client destroyed it meanwhile
}

bool Session::destroy_when_unheld(int dev, uint64_t handle) {
  std::lock_guard<std::mutex> lock(waits_mu_);
  if (!event_holders_.count(handle)) return false;
  destroy_later_[handle] = dev;
  return true;
}

// ---- synchronous copies
// ---------------------------------------------------------------------------------------

// A synchronous copy starts after all earlier legacy-stream work (an event the dispatcher records
// now) and ends before its reply; it runs on a waiter, on a private stream, so later work of other
// streams goes on meanwhile.  (Rows: server/bulk.cc.)
Status Session::copy_shm_sync(int dev, char* host, uint64_t device_ptr, uint64_t size,
                              bool to_device) {
  uint64_t mark = 0;
  if (Status s = mark_legacy(dev, mark); !s.ok()) return s;
  const uint64_t id = current_->header.request_id;
  const bool launched = launched_;
  // A copy of one buffer's size with the legacy stream past `mark` runs on the dispatcher (a
  // short DMA, no handoff); others on a waiter.
  const bool small = size <= pool_.buffer_bytes();
  auto ready = [this, dev, mark] { return exec_.event_query(dev, mark).ok(); };
  defer(
      [this, dev, host, device_ptr, size, to_device, mark, id, launched](bool&) {
        Status s = exec_.event_synchronize(dev, mark);
        release_event(dev, mark);
        if (!s.ok()) return s;
        if (!to_device && launched) forward_output(id);  // what kernels printed goes first
        uint64_t stream = 0;
        if (s = acquire_stream(dev, stream); !s.ok()) return s;
        Rect r{size, 1};
        s = to_device ? exec_.copy_to_device_async(dev, device_ptr, size, host, size, r, stream)
                      : exec_.copy_to_host_async(dev, host, size, device_ptr, size, r, stream);
        if (s.ok()) s = exec_.stream_synchronize(dev, stream);
        release_stream(dev, stream);
        return s;
      },
      small && ready(), small ? std::function<bool()>(ready) : nullptr);
  return Status::success();
}

}  // namespace rgpu::server
