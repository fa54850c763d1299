// Everything a session sends goes through one ordered queue served by a writer thread: replies,
// asynchronous errors, kernel output, device-to-host data that completes on a stream, callback
// requests.  Whoever produces an item (the dispatcher, or a stream's completion callback) never
// waits for the network, and the order of items is the order in which they were pushed — so data
// that completed before a synchronization is sent before that synchronization's reply.
//
// Liveness: the queue is bounded (bytes); a send that makes no progress for the connection's send
// timeout fails, which shuts the connection down (the session ends) and wakes every producer.
// While the session is busy the writer sends a heartbeat whenever nothing else went out for a
// while, so a client can tell a server that is working (a long kernel) from one that is gone.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "channel/channel.h"

namespace rgpu::server {

struct OutItem {
  std::vector<uint8_t> head;       // encoded frame header + body (Channel::encode_head)
  std::vector<iovec> payload;      // bytes that follow (may point into pooled buffers)
  std::optional<int32_t> trailer;  // trailing status after the payload
  std::function<void()> release;   // called once the bytes are gone (or dropped)
};

class Outbox {
 public:
  // Outbox::Block::IfFull: the producer (one of rgpud's own threads) waits while more than
  // `max_bytes` are queued, until the writer has made room (a stalled client fails the writer's
  // send within the send timeout, which ends the session and wakes the producer; the item is then
  // dropped).  Block::Never: queued at once, beyond the bound if need be — for threads that must
  // never wait (CUDA stream callbacks, host functions).
  enum class Block { Never, IfFull };

  explicit Outbox(channel::Channel& channel, size_t max_bytes = 64u << 20);
  ~Outbox();
  // Before start(): every `interval` without anything sent, the writer asks `make` for an item
  // (a heartbeat while the session is busy; nothing when it is idle).  `make` must not block.
  void set_heartbeat(std::chrono::milliseconds interval,
                     std::function<std::optional<OutItem>()> make);
  void start();
  void push(OutItem item, Block block = Block::Never);
  // Sends what is queued, then stops the writer.
  void stop();

 private:
  using Clock = std::chrono::steady_clock;
  void run();
  // The next item for the writer (false: stop); called with `lock` held.
  bool next(std::unique_lock<std::mutex>& lock, OutItem& item);
  void send(OutItem& item);
  void sent();  // after send(): the item is gone, room for producers
  channel::Channel& channel_;
  transport::Connection& conn_;
  const size_t max_bytes_;
  std::chrono::milliseconds heartbeat_interval_{0};
  std::function<std::optional<OutItem>()> heartbeat_;
  std::mutex mu_;
  std::condition_variable cv_;        // the writer
  std::condition_variable space_cv_;  // producers waiting for room
  std::deque<OutItem> items_;
  size_t queued_bytes_ = 0;  // bytes of items_
  Clock::time_point last_sent_ = Clock::now();
  bool stopping_ = false;
  bool broken_ = false;
  bool busy_ = false;  // an item is being sent (by the writer or inline)
  std::thread writer_;
};

}  // namespace rgpu::server
