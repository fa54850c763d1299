// TLS on rgpud's TCP clients (--tls-cert, --tls-key, --tls-client-ca): the server's TLS context,
// and a session process's side of the handshake.  Shared-memory clients are not affected.
#pragma once

#include <memory>
#include <string>

#include "transport/connection.h"
#include "transport/tls/tls.h"

namespace rgpu::server {

struct TlsSettings {
  std::string cert_file, key_file;  // both or neither
  std::string client_ca_file;       // mutual TLS
};

// nullptr when TLS is not configured; throws TlsError naming what is wrong with the files.
std::unique_ptr<transport::TlsContext> make_tls_context(const TlsSettings& s);

// In the session process, before anything was read: the TLS handshake with a TCP client.  A
// client that does not speak TLS gets a plain rgpu error reply telling it to set RGPU_TLS=1.
// nullptr when the client is refused or gone (logged).
std::unique_ptr<transport::Connection> secure_client(std::unique_ptr<transport::Connection> tcp,
                                                     const transport::TlsContext& ctx);

}  // namespace rgpu::server
