// Shared-memory transport for a client on the same machine as rgpud: two byte rings (one per
// direction) in a memfd segment the client creates and hands to the server over a unix socket
// (SCM_RIGHTS).  The segment has no name anywhere: nobody but the two processes can map it, and it
// disappears when both are gone.  Waiting is a short spin, then a futex wait; the unix socket stays
// open so that either side notices when the other dies.
#pragma once

#include <memory>
#include <string>

#include "transport/connection.h"

namespace rgpu::transport {

// The unix socket (abstract namespace) of the rgpud listening on TCP port `port`.
std::string shm_socket_name(uint16_t port);

// Sends descriptor `fd` over unix socket `sock` (SCM_RIGHTS) with one byte of data.  Throws.
void shm_send_fd(int sock, int fd);

// Connects to a local rgpud; the segment handshake gives up after `timeout_s` (0: 10 s).  Throws
// TransportError.
std::unique_ptr<Connection> shm_connect(const std::string& socket_name, int timeout_s = 10);
// Listens for shared-memory clients.  Throws TransportError.
std::unique_ptr<Listener> shm_listen(const std::string& socket_name);
// The two halves of accepting, so that a daemon can fork between them: the raw socket (-1 on
// EINTR), then the segment handshake within timeout_s (in the session process; throws
// TransportError).  The shm provider (shm_provider.cc) is built on these.
int shm_accept(const Listener& listener);
std::unique_ptr<Connection> shm_adopt(int sock, int timeout_s = 10);

// Both ends of a connection over a socket pair, for tests.
void shm_pair(std::unique_ptr<Connection>& a, std::unique_ptr<Connection>& b, size_t ring_bytes);

}  // namespace rgpu::transport
