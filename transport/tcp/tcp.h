// TCP transport: TCP_NODELAY, large socket buffers, keepalive (a vanished peer is noticed), and
// scatter/gather sendmsg/recvmsg straight from and into the caller's buffers.  Connections made by
// tcp_connect and accepted by tcp_listen's listener carry RGPU_NET_EMU's emulation (net_emu.h).
#pragma once

#include <memory>
#include <string>

#include "transport/connection.h"

namespace rgpu::transport {

// Connects to host:port, giving up after `timeout_s` (0: the system's limit).  Throws
// TransportError with a message naming the address.
std::unique_ptr<Connection> tcp_connect(const std::string& host, uint16_t port, int timeout_s = 0);
// Listens on host:port (port 0 picks a free one).  Throws TransportError.
std::unique_ptr<Listener> tcp_listen(const std::string& host, uint16_t port);
// The key under which rgpud counts a TCP peer's connections before they authenticate: "address "
// and the peer's IPv4 address (a v4-mapped one as IPv4), or the /64 prefix of an IPv6 address (one
// site's addresses, which a single host can change at will).  "address ?" when unknown.
std::string tcp_source_key(int fd);
// Whether every address `host` resolves to for listening is a loopback address (0.0.0.0, ::, a
// public name: false).  Throws TransportError when it does not resolve.
bool tcp_host_is_loopback(const std::string& host);
// Wraps an already connected socket (takes ownership); never emulated (TLS takes the socket).
std::unique_ptr<Connection> tcp_adopt(int fd, const std::string& peer);

}  // namespace rgpu::transport
