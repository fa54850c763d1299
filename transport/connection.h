// Transport interfaces: a Connection moves bytes in order between a client and a server; a Listener
// accepts them.  TCP is the first implementation; shared memory and libfabric come later behind the
// same interface.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace rgpu::transport {

struct TransportError : std::runtime_error {
  explicit TransportError(const std::string& what, bool peer_closed = false, bool deadline = false)
      : std::runtime_error(what), closed(peer_closed), timed_out(deadline) {}
  bool closed;     // the peer closed the connection (EOF or reset)
  bool timed_out;  // a receive or send timeout expired: the peer stalled
};

class Connection {
 public:
  virtual ~Connection() = default;
  // Sends every byte of the vector (scatter/gather, no intermediate copy).  Throws TransportError.
  virtual void send_all(const iovec* iov, int count) = 0;
  // Fills every byte of the vector.  Throws TransportError (closed=true when the peer went away).
  virtual void recv_all(const iovec* iov, int count) = 0;
  // Like recv_all for one buffer, but returns false when the peer closed cleanly before the first
  // byte (the normal end of a session).
  virtual bool recv_or_eof(void* buf, size_t len) = 0;
  // Like recv_or_eof, but the wait for the first byte has no deadline (a peer may be idle between
  // messages for ever); the rest of `len` is subject to the receive timeout.
  virtual bool recv_idle_or_eof(void* buf, size_t len) = 0;
  virtual std::string peer() const = 0;
  virtual void shutdown() = 0;
  virtual int fd() const = 0;
  // Receives that wait longer than this for data fail with timed_out (0: wait forever).
  virtual void set_recv_timeout(int seconds) = 0;
  // Sends that make no progress for this long fail with timed_out (0: wait forever): the peer
  // stopped reading.  Over TCP, bytes the peer's host has not acknowledged within this time also
  // end the connection (TCP_USER_TIMEOUT: a lost network).
  virtual void set_send_timeout(int seconds) = 0;
  virtual const char* kind() const = 0;  // "tcp", "shm"
  // Passing file descriptors to the peer (shared memory only): the descriptor travels beside the
  // byte stream; the receiver takes it when the message that names it arrives.
  virtual bool can_pass_fds() const { return false; }
  // The peer's user id when the kernel vouches for it (unix sockets: SO_PEERCRED), else -1.
  virtual long peer_uid() const { return -1; }
  virtual void send_fd(int /*fd*/) {
    throw TransportError("this transport cannot pass descriptors");
  }
  virtual int recv_fd() { throw TransportError("this transport cannot pass descriptors"); }

  void send(const void* p, size_t n) {
    iovec v{const_cast<void*>(p), n};
    send_all(&v, 1);
  }
  void recv(void* p, size_t n) {
    iovec v{p, n};
    recv_all(&v, 1);
  }
};

class Listener {
 public:
  virtual ~Listener() = default;
  // Blocks for the next connection; nullptr when interrupted (EINTR) so the caller can look at
  // signals.
  virtual std::unique_ptr<Connection> accept() = 0;
  virtual int fd() const = 0;
  virtual uint16_t port() const = 0;
  virtual bool is_loopback() const = 0;
  virtual std::string address() const = 0;
};

}  // namespace rgpu::transport
