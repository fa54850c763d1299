// Transport providers: one per way of reaching rgpud (tcp, shm, later RDMA).  A provider makes
// client connections, opens the daemon's listener for it, and describes itself with capabilities
// and cost figures, so that callers choose by what a transport can do and what it costs, never by
// its name.  The providers compiled in are listed by the registry (transport/registry.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "transport/connection.h"

namespace rgpu::transport {

// What the client asks for: rgpud's host (as the user wrote it) and its TCP port.  A provider
// derives its own address from it (shm: the abstract socket @rgpud-<port>).
struct Endpoint {
  std::string host;
  uint16_t port = 0;
};

// Expected figures for a copy planner: the cost of moving n bytes is about
// latency_us + n / (bandwidth_gbs * 1000) microseconds.
struct Cost {
  double latency_us = 0;     // one small message, one way
  double bandwidth_gbs = 0;  // sustained, one direction, GB/s
  double micros(uint64_t bytes) const {
    return latency_us + static_cast<double>(bytes) / (bandwidth_gbs * 1000.0);
  }
};

// Phase 1 of accepting: a raw connection taken by the daemon without waiting for the peer.  The
// daemon forks a session process, which runs phase 2 (finish): whatever handshake the transport
// needs, under a deadline.  Destroying an unfinished one closes it.
class PendingConnection {
 public:
  virtual ~PendingConnection() = default;
  // Who connected, as far as is known before the handshake (for logs).
  virtual std::string peer() const = 0;
  // Whom the daemon counts this connection under before it authenticates: known at phase 1 from
  // the socket alone ("address 10.0.0.7" or an IPv6 /64 for TCP, "uid 1000" for shared memory).
  virtual std::string source() const = 0;
  // Phase 2.  Throws TransportError (naming the peer and what went wrong) when the handshake
  // fails or does not finish within timeout_s seconds.  Call at most once.
  virtual std::unique_ptr<Connection> finish(int timeout_s) = 0;
};

class ProviderListener {
 public:
  virtual ~ProviderListener() = default;
  // Phase 1: cheap and non-blocking once fd() polls readable.  nullptr when there was nothing to
  // take (EINTR, an aborted connection).  Throws TransportError on a listener failure.
  virtual std::unique_ptr<PendingConnection> accept() = 0;
  virtual int fd() const = 0;
  virtual uint16_t port() const = 0;  // 0 where the transport has no port
  virtual bool is_loopback() const = 0;
  virtual std::string address() const = 0;
};

class Provider {
 public:
  virtual ~Provider() = default;
  virtual const char* name() const = 0;  // what RGPU_TRANSPORT names it by
  virtual Capabilities capabilities() const = 0;
  virtual Cost cost() const = 0;
  // Whether this provider can reach `server` at all (a co-located-only provider: the host is this
  // machine).
  virtual bool reaches(const Endpoint& server) const;
  // Connects, giving up after timeout_s (0: the transport's default).  Throws TransportError.
  virtual std::unique_ptr<Connection> connect(const Endpoint& server, int timeout_s) const = 0;
  // Opens the daemon's listener for `local` (port 0: a free one, for a provider that has ports).
  // Throws TransportError.
  virtual std::unique_ptr<ProviderListener> listen(const Endpoint& local) const = 0;
  // Whether a listener for `local` would accept connections from this machine only, decided
  // before anything is bound (a co-located-only provider: always).  Throws TransportError when
  // `local` does not resolve.
  virtual bool listens_locally(const Endpoint& local) const = 0;
};

std::unique_ptr<Provider> make_tcp_provider();
std::unique_ptr<Provider> make_shm_provider();

}  // namespace rgpu::transport
