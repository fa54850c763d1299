// TLS on the client's TCP links to rgpud:
//   RGPU_TLS       1: TCP links use TLS 1.3 (and auto transport picks TCP, not shared memory)
//   RGPU_TLS_CA    PEM file of the CAs that may sign rgpud's certificate (default: the system's)
//   RGPU_TLS_CERT, RGPU_TLS_KEY   client certificate and key, for servers that require one
// The server's certificate must name the host as written in RGPU_SERVERS (an IP SAN for an
// address).  The token (RGPU_TOKEN) still only proves itself with an HMAC, now inside TLS.
#pragma once

#include <memory>
#include <string>

#include "transport/connection.h"

namespace rgpu::transport {
class TlsContext;
}  // namespace rgpu::transport

namespace rgpu::client {

// The value of environment variable `name` ("" when unset).
std::string tls_env(const char* name);
// The process's client TLS context (RGPU_TLS_CA, RGPU_TLS_CERT, RGPU_TLS_KEY), made at the first
// TLS link: the Client's (client/tls_context.cc) where the library has a client core.  Throws
// transport::TlsError.
const transport::TlsContext& link_tls_context();

// RGPU_TLS: 1 on, 0 or unset off, -1 for anything else (`text` gets the value).
int tls_setting(std::string& text);

// Runs the TLS handshake over a connected TCP connection to `host`.  Throws TransportError whose
// message says what to fix (the variable or the server's option).
std::unique_ptr<transport::Connection> secure_link(std::unique_ptr<transport::Connection> tcp,
                                                   const std::string& host);

}  // namespace rgpu::client
