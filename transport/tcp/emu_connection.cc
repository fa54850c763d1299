// The delay line of RGPU_NET_EMU (net_emu.h): a TCP connection whose sends reach the socket one
// way's latency after their departure, departures paced to the emulated rate.
//
// How: send_all copies the bytes into slices (at most kSlice each) and queues them with a release
// time, departure end + rtt/2, where a slice departs when the previous one has finished
// serializing (departure = max(now, end of the previous) and lasts bytes / rate).  One writer
// thread per connection (started by the first emulated send) writes each slice to the socket at
// its release time, without the lock.  The sender is not held for the latency: back-to-back sends
// overlap in the line, so a stream reaches the rate whatever the rtt; it waits only when the line
// holds more than a window (twice the bandwidth-delay product, at least 8 MiB), as a socket whose
// buffer is full, and that wait honours the send timeout.  The bytes still leave in order and the
// protocol on the wire is unchanged; receiving is untouched (the receive timeout, keepalive and
// polling the descriptor work as without emulation).
//
// Costs, only where emulation is on: a copy of every byte sent, one thread and a wake-up per
// message (a few microseconds, added to the emulated latency), and the window's memory at most.
// A failed write is reported by the next send; shutdown() drops what is still in the line (rgpu
// calls it to end a connection at once); destruction delivers it first (a last reply arrives),
// waiting at most until 2 s after the last release.
#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/tcp/net_emu.h"

namespace rgpu::transport {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kSlice = 256 << 10;
constexpr size_t kMinWindow = 8 << 20, kMaxWindow = 1ull << 30;
constexpr size_t kUnpacedWindow = 64 << 20;  // no rate: the window alone bounds the line
constexpr size_t kBatch = 64;                // slices due together go out in one send_all

struct Slice {
  Clock::time_point release;
  std::vector<char> bytes;
};

class EmuConnection final : public Connection {
 public:
  EmuConnection(std::unique_ptr<Connection> inner, const NetEmu& emu, bool active)
      : inner_(std::move(inner)),
        owd_(std::chrono::nanoseconds(emu.rtt_ns / 2)),
        ns_per_byte_(emu.gbps > 0 ? 8.0 / emu.gbps : 0),
        window_(window_for(emu)),
        active_(active) {}

  ~EmuConnection() override {
    std::unique_lock<std::mutex> lock(mu_);
    closing_ = true;
    cv_.notify_all();
    if (!writer_.joinable()) return;
    Clock::time_point last = queue_.empty() ? Clock::now() : queue_.back().release;
    if (!done_cv_.wait_until(lock, std::max(last, Clock::now()) + std::chrono::seconds(2),
                             [&] { return done_; })) {
      drop_locked("the connection to " + inner_->peer() + " was closed");
      lock.unlock();
      inner_->shutdown();  // the writer is stuck in a send: the peer does not read
    } else {
      lock.unlock();
    }
    writer_.join();
  }

  void activate() { active_.store(true, std::memory_order_release); }

  void send_all(const iovec* iov, int count) override {
    if (!active_.load(std::memory_order_acquire)) return inner_->send_all(iov, count);
    size_t left = 0;
    for (int i = 0; i < count; ++i) left += iov[i].iov_len;
    std::vector<char> slice;
    int k = 0;
    size_t off = 0;
    for (;;) {
      // Gather the next slice outside the lock (the copy of up to kSlice bytes).
      slice.clear();
      slice.reserve(std::min(left, kSlice));
      while (k < count && slice.size() < kSlice) {
        size_t n = std::min(kSlice - slice.size(), iov[k].iov_len - off);
        const char* p = static_cast<const char*>(iov[k].iov_base) + off;
        slice.insert(slice.end(), p, p + n);
        off += n;
        if (off == iov[k].iov_len) ++k, off = 0;
      }
      if (slice.empty()) return;
      left -= slice.size();
      enqueue(std::move(slice));
      slice = take_spare();
    }
  }

  void recv_all(const iovec* iov, int count) override { inner_->recv_all(iov, count); }
  bool recv_or_eof(void* buf, size_t len) override { return inner_->recv_or_eof(buf, len); }
  bool recv_idle_or_eof(void* buf, size_t len) override {
    return inner_->recv_idle_or_eof(buf, len);
  }
  std::string peer() const override { return inner_->peer(); }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      drop_locked("the connection to " + inner_->peer() + " was shut down");
    }
    inner_->shutdown();  // wakes this side's readers and a writer in a send
  }
  int fd() const override { return inner_->fd(); }
  void set_recv_timeout(int seconds) override { inner_->set_recv_timeout(seconds); }
  void set_send_timeout(int seconds) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      send_timeout_s_ = seconds;
    }
    inner_->set_send_timeout(seconds);
  }
  const char* kind() const override { return inner_->kind(); }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  long peer_uid() const override { return inner_->peer_uid(); }

 private:
  static size_t window_for(const NetEmu& emu) {
    if (emu.gbps <= 0) return kUnpacedWindow;
    double bdp = emu.gbps / 8 * static_cast<double>(emu.rtt_ns);  // bytes in one rtt
    return std::clamp(static_cast<size_t>(2 * bdp) + 2 * kSlice, kMinWindow, kMaxWindow);
  }

  // Queues one slice once the line has room for it; throws what the writer met, or a timeout.
  void enqueue(std::vector<char> bytes) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!writer_.joinable() && !failed_) writer_ = std::thread([this] { write_loop(); });
    auto room = [&] { return failed_ || queue_.empty() || queued_ + bytes.size() <= window_; };
    if (send_timeout_s_ > 0) {
      if (!space_cv_.wait_for(lock, std::chrono::seconds(send_timeout_s_), room))
        throw TransportError("send to " + inner_->peer() + " made no progress for " +
                                 std::to_string(send_timeout_s_) + " s (the peer is not reading)",
                             false, true);
    } else {
      space_cv_.wait(lock, room);
    }
    if (failed_) throw TransportError(error_, error_closed_, error_timed_out_);
    const Clock::time_point now = Clock::now();
    const Clock::time_point start = std::max(now, next_free_);
    next_free_ = start + std::chrono::nanoseconds(static_cast<int64_t>(
                             ns_per_byte_ * static_cast<double>(bytes.size())));
    queued_ += bytes.size();
    queue_.push_back({next_free_ + owd_, std::move(bytes)});
    cv_.notify_one();
  }

  std::vector<char> take_spare() {
    std::lock_guard<std::mutex> lock(mu_);
    if (spare_.empty()) return {};
    std::vector<char> v = std::move(spare_.back());
    spare_.pop_back();
    return v;
  }

  // Ends the line: what is queued is dropped, senders and the writer return.
  void drop_locked(const std::string& why) {
    if (!failed_) {
      failed_ = true;
      error_ = why;
      error_closed_ = true;
    }
    queue_.clear();
    queued_ = 0;
    cv_.notify_all();
    space_cv_.notify_all();
  }

  void write_loop() {
    prctl(PR_SET_TIMERSLACK, 1UL);  // release times to the microsecond, not the default 50 us
    std::vector<Slice> batch;
    std::vector<iovec> iov;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return failed_ || closing_ || !queue_.empty(); });
      if (failed_ || queue_.empty()) break;  // dropped, or closing with nothing left
      if (Clock::now() < queue_.front().release) {
        cv_.wait_until(lock, queue_.front().release);
        continue;  // look again: shut down meanwhile, or woken early
      }
      const Clock::time_point now = Clock::now();
      while (!queue_.empty() && queue_.front().release <= now && batch.size() < kBatch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      lock.unlock();
      iov.clear();
      size_t bytes = 0;
      for (auto& s : batch) {
        iov.push_back({s.bytes.data(), s.bytes.size()});
        bytes += s.bytes.size();
      }
      try {
        inner_->send_all(iov.data(), static_cast<int>(iov.size()));
      } catch (const TransportError& e) {
        lock.lock();
        if (!failed_) {
          failed_ = true;
          error_ = e.what();
          error_closed_ = e.closed;
          error_timed_out_ = e.timed_out;
        }
        drop_locked(error_);
        lock.unlock();
        inner_->shutdown();  // a caller waiting for a reply to what was lost fails at once
        lock.lock();
        break;
      }
      lock.lock();
      queued_ = queued_ >= bytes ? queued_ - bytes : 0;
      for (auto& s : batch)
        if (spare_.size() < 8) spare_.push_back(std::move(s.bytes));
      batch.clear();
      space_cv_.notify_all();
    }
    done_ = true;
    done_cv_.notify_all();
  }

  std::unique_ptr<Connection> inner_;
  const std::chrono::nanoseconds owd_;
  const double ns_per_byte_;
  const size_t window_;
  std::atomic<bool> active_;

  std::mutex mu_;
  std::condition_variable cv_, space_cv_, done_cv_;
  std::deque<Slice> queue_;
  std::vector<std::vector<char>> spare_;  // slice buffers to reuse (no page faults per slice)
  size_t queued_ = 0;
  Clock::time_point next_free_{};
  bool failed_ = false, closing_ = false, done_ = false;
  std::string error_;
  bool error_closed_ = false, error_timed_out_ = false;
  int send_timeout_s_ = 0;
  std::thread writer_;
};

}  // namespace

std::unique_ptr<Connection> net_emulate(std::unique_ptr<Connection> c, const NetEmu& emu,
                                        bool active) {
  if (!emu.on()) return c;
  return std::make_unique<EmuConnection>(std::move(c), emu, active);
}

bool net_emu_activate(Connection& c) {
  auto* e = dynamic_cast<EmuConnection*>(&c);
  if (!e) return false;
  e->activate();
  return true;
}

}  // namespace rgpu::transport
