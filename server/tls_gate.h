// TLS on rgpud's TCP clients (--tls-cert, --tls-key, --tls-client-ca): the server's TLS context,
// and a session process's side of the handshake.  Shared-memory clients are not affected.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "proto/messages.h"
#include "transport/connection.h"
#include "transport/tls/tls.h"

namespace rgpu::server {

struct TlsSettings {
  std::string cert_file, key_file;  // both or neither
  std::string client_ca_file;       // mutual TLS
};

// nullptr when TLS is not configured; throws TlsError naming what is wrong with the files.
std::unique_ptr<transport::TlsContext> make_tls_context(const TlsSettings& s);
// The same certificate for peer links (server-to-server copies, server/peer_host.h): no client
// certificate is asked for, the link's ticket is its credential.  nullptr without TLS.
std::unique_ptr<transport::TlsContext> make_peer_tls_context(const TlsSettings& s);

// Hands a peer link routed before TLS (its PeerRoute's ticket id, the request's id, the socket)
// to the session that issued the ticket: "" or why not.
using PeerRouter =
    std::function<std::string(const proto::PeerTicketId&, uint64_t request_id, int fd)>;

// In the session process, before anything was read: the TLS handshake with a TCP client.  A
// client that does not speak TLS gets a plain rgpu error reply telling it to set RGPU_TLS=1; a
// plain PeerRoute (another rgpud's peer link) goes to `route` and is answered in plain.
// nullptr when the client is refused, gone (logged) or routed.
std::unique_ptr<transport::Connection> secure_client(std::unique_ptr<transport::Connection> tcp,
                                                     const transport::TlsContext& ctx,
                                                     const PeerRouter& route);

}  // namespace rgpu::server
