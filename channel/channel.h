// The channel layer: one framing for every rgpu link — a client's link to a server, a server's
// session with a client, and links between servers.  It owns the frame (header, body, payload,
// trailing status), request ids, what the peer knows (the handshake's `known` lists, see
// channel/handshake.h) and how a frame nobody here knows is skipped.  Above it, the client's
// ServerLink and the server's Session decide what frames mean; below it, a transport
// (transport::Connection) moves bytes.
//
//   frame   = header (24 bytes, proto/frame.h) | body (body_len) | payload (payload_len)
//             | i32 status, when the header has kFlagTrailer
//
// Sending may happen from any number of threads (each frame goes out whole, under a send lock);
// receiving from one reader thread.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <bitset>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "proto/frame.h"
#include "transport/connection.h"

namespace rgpu::channel {

// A set of message ids: what a peer said it knows.
class KnownSet {
 public:
  KnownSet() { bits_.set(); }  // until the handshake says otherwise, everything
  explicit KnownSet(const std::vector<uint16_t>& ids);
  bool has(uint16_t id) const { return bits_.test(id); }

 private:
  std::bitset<65536> bits_;
};

class Channel {
 public:
  explicit Channel(transport::Connection& conn) : conn_(conn) {}
  transport::Connection& connection() const { return conn_; }

  // ---- sending
  // A frame's header and body, encoded (its payload, if any, follows separately).
  static std::vector<uint8_t> encode_head(uint16_t type, uint16_t flags, uint64_t id,
                                          const std::vector<uint8_t>& body,
                                          uint64_t payload_len = 0);
  // Sends one whole frame: header and body, `payload` pieces, then the trailing status when set
  // (and then the header must carry kFlagTrailer).  Throws TransportError.  Returns the frame's
  // place among the frames this channel sent (1, 2, ...).
  uint64_t send(uint16_t type, uint16_t flags, uint64_t id, const std::vector<uint8_t>& body,
                const iovec* payload = nullptr, int n_payload = 0,
                std::optional<int32_t> trailer = std::nullopt);
  // The same with the head already encoded (encode_head), e.g. by a queue of outgoing frames.
  void send_encoded(const std::vector<uint8_t>& head, const iovec* payload, int n_payload,
                    std::optional<int32_t> trailer);
  // A fresh request id on this channel (increasing, never 0).
  uint64_t next_request_id() { return next_id_.fetch_add(1, std::memory_order_relaxed); }
  // How many frames were sent whole so far (a frame's place is fixed under the send lock).
  uint64_t frames_sent() const { return sent_.load(std::memory_order_acquire); }

  // ---- receiving (one thread)
  // How read_frame waits for a header.
  enum class Wait {
    Idle,        // no deadline (a peer may be quiet between frames); a clean close returns false
    Timed,       // the connection's receive timeout; a close throws
    TimedOrEof,  // the receive timeout; a clean close before the header returns false
  };
  // Reads a frame's header (checked against the limits) and body; the body always under the
  // receive timeout.
  bool read_frame(proto::FrameHeader& h, std::vector<uint8_t>& body, Wait wait);
  // A frame's payload, into `iov` (the pieces' lengths add up to what the caller expects).
  void read_payload(const iovec* iov, int count) { conn_.recv_all(iov, count); }
  // The rest of a frame nobody here wants: its payload and trailing status.
  void skip_rest(const proto::FrameHeader& h);
  void skip(uint64_t bytes);
  int32_t read_trailer();

  // ---- what the peer knows (from the handshake)
  void set_peer_known(const std::vector<uint16_t>& ids) { peer_known_ = KnownSet(ids); }
  bool peer_knows(uint16_t id) const { return peer_known_.has(id); }

 private:
  transport::Connection& conn_;
  std::mutex send_mu_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> sent_{0};  // frames sent (send_mu_ orders them)
  KnownSet peer_known_;
};

}  // namespace rgpu::channel
