// TLS contexts: TLS 1.3 only, certificates and keys loaded and checked up front.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "transport/tls/openssl_api.h"
#include "transport/tls/tls.h"

namespace rgpu::transport {
namespace {

using ossl::api;
using Kind = TlsError::Kind;

const ossl::Api& load_api() {
  std::string error;
  if (!ossl::load(error)) throw TlsError(Kind::Unavailable, error);
  return api();
}

void need_file(const std::string& what, const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    throw TlsError(Kind::Config, what + " " + path + " cannot be read: " + strerror(errno));
}

// Settings both sides share: TLS 1.3 only, partial writes (a large write returns as records go
// out, so a receiving thread gets its turn), read-ahead into a large buffer (a frame header and
// body cost one read), kernel TLS where the kernel offers it (the "tls" module), no session
// tickets (every rgpu session is a new process on the server; nothing would be resumed).
SSL_CTX* new_ctx(const SSL_METHOD* method) {
  const auto& a = api();
  SSL_CTX* ctx = a.SSL_CTX_new(method);
  if (!ctx) throw TlsError(Kind::Other, ossl::errors("cannot create a TLS context"));
  a.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_3_VERSION, nullptr);
  a.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MAX_PROTO_VERSION, TLS1_3_VERSION, nullptr);
  a.SSL_CTX_ctrl(ctx, SSL_CTRL_MODE,
                 SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, nullptr);
  a.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_READ_AHEAD, 1, nullptr);
  a.SSL_CTX_set_default_read_buffer_len(ctx, 256 << 10);
  a.SSL_CTX_set_options(ctx,
                        SSL_OP_ENABLE_KTLS | SSL_OP_NO_TICKET | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // AES-128-GCM first: about a quarter cheaper per byte than AES-256-GCM with AES-NI, and what
  // bulk copies are bound by.  Both sides prefer it; the others remain acceptable.
  if (a.SSL_CTX_set_ciphersuites(
          ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") != 1)
    throw TlsError(Kind::Other, ossl::errors("no usable TLS 1.3 cipher suite"));
  return ctx;
}

void load_identity(SSL_CTX* ctx, const std::string& cert, const std::string& key,
                   const std::string& role) {
  const auto& a = api();
  need_file(role + " certificate", cert);
  need_file(role + " key", key);
  if (a.SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1)
    throw TlsError(Kind::Config, "cannot use " + role + " certificate " + cert + ": " +
                                     ossl::errors("not a PEM certificate"));
  if (a.SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
    unsigned long e = a.ERR_peek_last_error();
    bool mismatch = e && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH;
    throw TlsError(Kind::Config,
                   mismatch ? role + " key " + key + " does not belong to certificate " + cert
                            : "cannot use " + role + " key " + key + ": " +
                                  ossl::errors("not a PEM private key"));
  }
  if (a.SSL_CTX_check_private_key(ctx) != 1)
    throw TlsError(Kind::Config, role + " key " + key + " does not belong to certificate " + cert +
                                     ": " + ossl::errors("key mismatch"));
}

void load_cas(SSL_CTX* ctx, const std::string& file, const std::string& what) {
  need_file(what, file);
  if (api().SSL_CTX_load_verify_locations(ctx, file.c_str(), nullptr) != 1)
    throw TlsError(Kind::Config,
                   "cannot load " + what + " " + file + ": " + ossl::errors("no PEM certificates"));
}

}  // namespace

// The handshake runs in the calling thread, so the callback below can report through it.
thread_local bool t_certificate_requested = false;

namespace {

// Called when the server asks for a client certificate and none is configured: noted, so that
// the client fails its handshake with a clear message rather than at the server's alert later.
int note_certificate_request(SSL*, X509**, EVP_PKEY**) {
  t_certificate_requested = true;
  return 0;
}

}  // namespace

std::unique_ptr<TlsContext> TlsContext::client(const TlsClientOptions& o) {
  const auto& a = load_api();
  std::unique_ptr<TlsContext> c(new TlsContext);
  SSL_CTX* ctx = new_ctx(a.TLS_client_method());
  c->ctx_ = ctx;
  a.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (!o.ca_file.empty()) {
    load_cas(ctx, o.ca_file, "CA file");
  } else if (a.SSL_CTX_set_default_verify_paths(ctx) != 1) {
    throw TlsError(Kind::Config, "cannot load the system's trusted CAs: " +
                                     ossl::errors("OpenSSL found no default store"));
  }
  if (o.cert_file.empty() != o.key_file.empty())
    throw TlsError(Kind::Config, "a client certificate needs both a certificate and a key file");
  if (!o.cert_file.empty()) {
    load_identity(ctx, o.cert_file, o.key_file, "client");
    c->has_cert_ = true;
  } else {
    a.SSL_CTX_set_client_cert_cb(ctx, note_certificate_request);
  }
  return c;
}

std::unique_ptr<TlsContext> TlsContext::server(const TlsServerOptions& o) {
  const auto& a = load_api();
  std::unique_ptr<TlsContext> c(new TlsContext);
  SSL_CTX* ctx = new_ctx(a.TLS_server_method());
  c->ctx_ = ctx;
  c->server_ = true;
  a.SSL_CTX_set_num_tickets(ctx, 0);  // every session is a new process: nothing to resume
  load_identity(ctx, o.cert_file, o.key_file, "server");
  if (!o.client_ca_file.empty()) {
    load_cas(ctx, o.client_ca_file, "client CA file");
    STACK_OF(X509_NAME)* names = a.SSL_load_client_CA_file(o.client_ca_file.c_str());
    if (!names)
      throw TlsError(Kind::Config, "cannot read CA names from " + o.client_ca_file + ": " +
                                       ossl::errors("no PEM certificates"));
    a.SSL_CTX_set_client_CA_list(ctx, names);
    a.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    c->mutual_ = true;
  }
  return c;
}

std::unique_ptr<TlsContext> TlsContext::pinned_client() {
  const auto& a = load_api();
  std::unique_ptr<TlsContext> c(new TlsContext);
  SSL_CTX* ctx = new_ctx(a.TLS_client_method());
  c->ctx_ = ctx;
  // No chain to check: the certificate itself is compared after the handshake.
  a.SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  a.SSL_CTX_set_client_cert_cb(ctx, note_certificate_request);
  return c;
}

CertFingerprint TlsContext::fingerprint() const {
  CertFingerprint out{};
  const auto& a = api();
  X509* cert = a.SSL_CTX_get0_certificate(static_cast<SSL_CTX*>(ctx_));
  unsigned int len = 0;
  if (!cert || a.X509_digest(cert, a.EVP_sha256(), out.data(), &len) != 1 || len != out.size())
    throw TlsError(Kind::Other, ossl::errors("cannot fingerprint the server's certificate"));
  return out;
}

TlsContext::~TlsContext() {
  if (ctx_) api().SSL_CTX_free(static_cast<SSL_CTX*>(ctx_));
}

}  // namespace rgpu::transport
