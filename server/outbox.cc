#include "server/outbox.h"

#include "common/log.h"

namespace rgpu::server {

namespace {
constexpr size_t kInlineBytes = 64 << 10;

size_t item_bytes(const OutItem& item) {
  size_t bytes = item.head.size();
  for (auto& v : item.payload) bytes += v.iov_len;
  return bytes;
}
}  // namespace

Outbox::Outbox(channel::Channel& channel, size_t max_bytes)
    : channel_(channel), conn_(channel.connection()), max_bytes_(max_bytes) {}

Outbox::~Outbox() { stop(); }

void Outbox::set_heartbeat(std::chrono::milliseconds interval,
                           std::function<std::optional<OutItem>()> make) {
  heartbeat_interval_ = interval;
  heartbeat_ = std::move(make);
}

void Outbox::start() {
  writer_ = std::thread([this] { run(); });
}

void Outbox::push(OutItem item, Block block) {
  size_t bytes = item_bytes(item);
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Room: the queue under its bound, or empty (one item larger than the bound still goes).
    // The writer sends while anything is queued; its send either progresses or fails within the
    // connection's send timeout (broken_), so this wait is bounded.
    if (block == Block::IfFull)
      space_cv_.wait(lock, [&] {
        return broken_ || stopping_ || items_.empty() || queued_bytes_ + bytes <= max_bytes_;
      });
    if (broken_ || stopping_) {
      lock.unlock();
      if (item.release) item.release();
      return;
    }
    // A small item with nothing ahead of it goes out at once from this thread: no wakeup of the
    // writer on the way of a reply.  Order is kept: the writer waits while busy_.
    if (!items_.empty() || busy_ || bytes > kInlineBytes) {
      items_.push_back(std::move(item));
      queued_bytes_ += bytes;
      cv_.notify_one();
      return;
    }
    busy_ = true;
  }
  send(item);
  sent();
}

void Outbox::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_one();
    space_cv_.notify_all();
  }
  if (writer_.joinable()) writer_.join();
}

void Outbox::sent() {
  std::lock_guard<std::mutex> lock(mu_);
  busy_ = false;
  last_sent_ = Clock::now();
  space_cv_.notify_all();
  if (!items_.empty() || stopping_) cv_.notify_one();
}

bool Outbox::next(std::unique_lock<std::mutex>& lock, OutItem& item) {
  auto ready = [&] { return !busy_ && (!items_.empty() || stopping_); };
  while (!ready()) {
    if (!heartbeat_) {
      cv_.wait(lock, ready);
      break;
    }
    if (cv_.wait_until(lock, last_sent_ + heartbeat_interval_, ready)) break;
    if (busy_ || broken_ || Clock::now() < last_sent_ + heartbeat_interval_) continue;
    // Nothing went out for an interval: a heartbeat if the session is busy.
    lock.unlock();
    std::optional<OutItem> beat = heartbeat_();
    lock.lock();
    last_sent_ = Clock::now();  // the next look in one interval, sent or not
    if (beat && !busy_ && items_.empty() && !stopping_) {
      item = std::move(*beat);
      busy_ = true;
      return true;
    }
  }
  if (items_.empty()) return false;  // stopping, everything sent
  item = std::move(items_.front());
  items_.pop_front();
  queued_bytes_ -= item_bytes(item);
  busy_ = true;
  return true;
}

void Outbox::run() {
  for (;;) {
    OutItem item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!next(lock, item)) return;
    }
    send(item);
    sent();
  }
}

void Outbox::send(OutItem& item) {
  bool broken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    broken = broken_;
  }
  if (!broken) {
    try {
      channel_.send_encoded(item.head, item.payload.data(), static_cast<int>(item.payload.size()),
                            item.trailer);
    } catch (const std::exception& e) {
      auto* te = dynamic_cast<const transport::TransportError*>(&e);
      if (te && te->timed_out)
        LOG_WARN("ending the session of %s: %s", conn_.peer().c_str(), e.what());
      else
        LOG_INFO("cannot send to %s: %s", conn_.peer().c_str(), e.what());
      {
        std::lock_guard<std::mutex> lock(mu_);
        broken_ = true;
        space_cv_.notify_all();
      }
      // The session's reader sees the end and tears the session down (a client that stopped
      // reading must not keep it, or its memory, for ever).
      conn_.shutdown();
    }
  }
  if (item.release) item.release();
}

}  // namespace rgpu::server
