// Everything a session sends goes through one ordered queue served by a writer thread: replies,
// asynchronous errors, kernel output, device-to-host data that completes on a stream, callback
// requests.  Whoever produces an item (the dispatcher, or a stream's completion callback) never
// waits for the network, and the order of items is the order in which they were pushed — so data
// that completed before a synchronization is sent before that synchronization's reply.
#pragma once

#include <sys/uio.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "transport/connection.h"

namespace rgpu::server {

struct OutItem {
  std::vector<uint8_t> head;       // encoded frame header + body
  std::vector<iovec> payload;      // bytes that follow (may point into pooled buffers)
  std::optional<int32_t> trailer;  // trailing status after the payload
  std::function<void()> release;   // called once the bytes are gone (or dropped)
};

class Outbox {
 public:
  explicit Outbox(transport::Connection& conn);
  ~Outbox();
  void start();
  void push(OutItem item);
  // A frame sent as several items (a reply and its payload chunks) must not be split by items
  // other threads push meanwhile: between begin_group() and end_group() the calling thread's items
  // go out as usual and everyone else's wait, in order, until end_group().
  void begin_group();
  void end_group();
  // Sends what is queued, then stops the writer.
  void stop();

 private:
  void run();
  void send(OutItem& item);
  transport::Connection& conn_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<OutItem> items_;
  bool stopping_ = false;
  bool broken_ = false;
  bool busy_ = false;  // an item is being sent (by the writer or inline)
  bool grouped_ = false;
  std::thread::id group_owner_;
  std::deque<OutItem> deferred_;  // other threads' items while a group is open
  std::thread writer_;
};

}  // namespace rgpu::server
