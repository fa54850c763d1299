// Transport interfaces: a Connection moves bytes in order between a client and a server; a Listener
// accepts them.  Implementations: tcp/, shm/, tls/ (over tcp); each is made and accepted through a
// provider (provider.h, registry.h).
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

// What a transport can do; callers decide by these, never by the transport's name.
struct Capabilities {
  bool passes_descriptors = false;    // send_fd / recv_fd work
  bool registers_memory = false;      // register_memory / map_remote work (zero-copy through it)
  bool remote_memory_access = false;  // the peer reads and writes registered memory (RDMA)
  bool co_located_only = false;       // reaches only a peer on this machine
  bool tls_wraps = false;             // TLS (RGPU_TLS, rgpud --tls-cert) applies on top of it
};

// Memory this process offers for registration: a descriptor the peer may map (shared memory) and
// this process's mapping of it.
struct MemoryRegion {
  int fd = -1;
  void* base = nullptr;
  size_t size = 0;
};

// The peer's registered memory as this process maps it.
struct RemoteMapping {
  char* base = nullptr;
  size_t size = 0;
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

  virtual Capabilities capabilities() const { return {}; }
  // Registers `r` for the peer's direct use and returns the key the peer resolves it by (sent in
  // the message that announces it; a descriptor travels beside the byte stream, so the caller
  // keeps the registration and that message together, under one lock).  The caller keeps owning
  // the memory and the descriptor.  Throws TransportError where registration is not possible.
  virtual uint64_t register_memory(const MemoryRegion& /*r*/) {
    throw TransportError(std::string("the ") + kind() + " transport cannot register memory");
  }
  // Ends a registration once the peer no longer uses it (it has unmapped it).
  virtual void unregister_memory(uint64_t /*key*/) {}
  // Remote side: takes the registration the peer announced with `key` and maps it, checking it
  // is exactly `size` bytes that cannot shrink.  Throws TransportError naming what was wrong (the
  // registration is consumed either way).
  virtual RemoteMapping map_remote(uint64_t /*key*/, uint64_t /*size*/) {
    throw TransportError(std::string("the ") + kind() + " transport cannot map peer memory");
  }
  // Undoes map_remote.
  virtual void unmap_remote(const RemoteMapping& /*m*/) {}

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
