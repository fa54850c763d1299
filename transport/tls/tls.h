// TLS 1.3 over a TCP connection (OpenSSL 3, loaded at run time: see openssl_api.h).  The socket
// is non-blocking underneath and every OpenSSL call on a connection is made under its lock, so one
// thread may receive while another sends (an SSL object must not be used by two threads at once).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "transport/connection.h"

namespace rgpu::transport {

struct TlsError : TransportError {
  enum class Kind {
    Other,
    Unavailable,       // libssl.so.3 could not be loaded
    Config,            // a certificate, key or CA file is unusable
    ServerUnverified,  // the server's certificate does not chain to a trusted CA
    WrongName,         // the server's certificate is not for the host we asked for
    NeedClientCert,    // the server asked for a client certificate and we have none
    NotTlsPeer,        // the peer does not speak TLS
  };
  TlsError(Kind k, const std::string& what) : TransportError(what), kind(k) {}
  Kind kind;
};

struct TlsClientOptions {
  std::string ca_file;    // CAs that may sign the server's certificate; empty: the system store
  std::string cert_file;  // client certificate chain (PEM) for mutual TLS; empty: none
  std::string key_file;   // its private key (PEM)
};

struct TlsServerOptions {
  std::string cert_file;       // certificate chain (PEM)
  std::string key_file;        // private key (PEM)
  std::string client_ca_file;  // non-empty: mutual TLS, clients need a certificate it signed
};

// SHA-256 of a certificate (DER): what a pinned connection compares.
using CertFingerprint = std::array<uint8_t, 32>;

// An SSL_CTX: certificates and keys are loaded and checked once, when it is made.
class TlsContext {
 public:
  // Throw TlsError (Unavailable, Config) naming the file or the reason.
  static std::unique_ptr<TlsContext> client(const TlsClientOptions& o);
  static std::unique_ptr<TlsContext> server(const TlsServerOptions& o);
  // A client that trusts no CA: tls_connect_pinned checks the server's certificate against a
  // fingerprint learned over an already authenticated channel (server-to-server links).
  static std::unique_ptr<TlsContext> pinned_client();
  // A server context's own certificate (the leaf), as a pinned client will compare it.
  CertFingerprint fingerprint() const;
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  bool is_server() const { return server_; }
  bool mutual() const { return mutual_; }
  bool has_client_cert() const { return has_cert_; }
  void* native() const { return ctx_; }  // SSL_CTX*

 private:
  TlsContext() = default;
  void* ctx_ = nullptr;
  bool server_ = false, mutual_ = false, has_cert_ = false;
};

// Client side: takes over the socket of `tcp` (a connected "tcp" Connection) and runs the TLS
// handshake, checking the server's certificate against `host` (a DNS name, or an IP address that
// the certificate must list as an IP SAN).  Throws TlsError / TransportError.
std::unique_ptr<Connection> tls_connect(std::unique_ptr<Connection> tcp, const TlsContext& ctx,
                                        const std::string& host, int timeout_s);

// Client side, pinned (a context from TlsContext::pinned_client): the handshake, then the server's
// certificate must be exactly `pin`, or TlsError ServerUnverified.  TLS 1.3 has the server prove
// that it holds the certificate's key during the handshake, so a matching certificate is the
// server the pin was learned from.
std::unique_ptr<Connection> tls_connect_pinned(std::unique_ptr<Connection> tcp,
                                               const TlsContext& ctx, const CertFingerprint& pin,
                                               int timeout_s);

// Server side, before anything was read from `tcp`: whether the client's first byte opens a TLS
// handshake record (TLS), is something else (a plain rgpu client), or never came (closed or
// silent for timeout_s).
enum class FirstBytes { Tls, NotTls, None };
FirstBytes peek_first_bytes(const Connection& tcp, int timeout_s);

// Server side: takes over the socket of `tcp` and runs the TLS handshake.  Throws TlsError.
std::unique_ptr<Connection> tls_accept(std::unique_ptr<Connection> tcp, const TlsContext& ctx,
                                       int timeout_s);

// "TLS 1.3, TLS_AES_256_GCM_SHA384, kernel TLS send on/off, receive on/off" for a TLS
// connection; empty for others.
std::string tls_summary(const Connection& c);

}  // namespace rgpu::transport
