#include "server/outbox.h"

#include "common/log.h"

namespace rgpu::server {

namespace {
constexpr size_t kInlineBytes = 64 << 10;
}

Outbox::Outbox(transport::Connection& conn) : conn_(conn) {}

Outbox::~Outbox() { stop(); }

void Outbox::start() {
  writer_ = std::thread([this] { run(); });
}

void Outbox::push(OutItem item) {
  size_t bytes = item.head.size();
  for (auto& v : item.payload) bytes += v.iov_len;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (broken_ || stopping_) {
      lock.unlock();
      if (item.release) item.release();
      return;
    }
    if (grouped_ && std::this_thread::get_id() != group_owner_) {
      deferred_.push_back(std::move(item));
      return;
    }
    // A small item with nothing ahead of it goes out at once from this thread: no wakeup of the
    // writer on the way of a reply.  Order is kept: the writer waits while busy_.
    if (!items_.empty() || busy_ || bytes > kInlineBytes) {
      items_.push_back(std::move(item));
      cv_.notify_one();
      return;
    }
    busy_ = true;
  }
  send(item);
  std::lock_guard<std::mutex> lock(mu_);
  busy_ = false;
  if (!items_.empty() || stopping_) cv_.notify_one();
}

void Outbox::begin_group() {
  std::lock_guard<std::mutex> lock(mu_);
  grouped_ = true;
  group_owner_ = std::this_thread::get_id();
}

void Outbox::end_group() {
  std::lock_guard<std::mutex> lock(mu_);
  grouped_ = false;
  if (deferred_.empty()) return;
  for (auto& item : deferred_) items_.push_back(std::move(item));
  deferred_.clear();
  cv_.notify_one();
}

void Outbox::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& item : deferred_) items_.push_back(std::move(item));
    deferred_.clear();
    grouped_ = false;
    stopping_ = true;
    cv_.notify_one();
  }
  if (writer_.joinable()) writer_.join();
}

void Outbox::run() {
  for (;;) {
    OutItem item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return (!items_.empty() && !busy_) || (stopping_ && !busy_); });
      if (items_.empty()) return;
      item = std::move(items_.front());
      items_.pop_front();
      busy_ = true;
    }
    send(item);
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
  }
}

void Outbox::send(OutItem& item) {
  {
    bool broken;
    {
      std::lock_guard<std::mutex> lock(mu_);
      broken = broken_;
    }
    if (!broken) {
      try {
        std::vector<iovec> v;
        v.reserve(item.payload.size() + 2);
        v.push_back({item.head.data(), item.head.size()});
        v.insert(v.end(), item.payload.begin(), item.payload.end());
        uint8_t t[4];
        if (item.trailer) {
          uint32_t u = static_cast<uint32_t>(*item.trailer);
          for (int i = 0; i < 4; ++i) t[i] = static_cast<uint8_t>(u >> (8 * i));
          v.push_back({t, 4});
        }
        conn_.send_all(v.data(), static_cast<int>(v.size()));
      } catch (const std::exception& e) {
        LOG_INFO("cannot send to %s: %s", conn_.peer().c_str(), e.what());
        std::lock_guard<std::mutex> lock(mu_);
        broken_ = true;
      }
    }
    if (item.release) item.release();
  }
}

}  // namespace rgpu::server
