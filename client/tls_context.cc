// link_tls_context for a library or program with a client core: the one context lives in the one
// Client (client/core_table.h).  Alone in its file so that a library without a client core (rgpu's
// libnvidia-ml.so.1) defines its own and does not pull the client core from the static archive.
#include <mutex>

#include "client/client.h"
#include "client/tls_link.h"
#include "transport/tls/tls.h"

namespace rgpu::client {

// One context per process, made at the first TLS link (files are read once).
const transport::TlsContext& Client::tls_context() {
  std::lock_guard<std::mutex> lock(tls_mu_);
  if (!tls_) {
    try {
      tls_ = transport::TlsContext::client(
                 {tls_env("RGPU_TLS_CA"), tls_env("RGPU_TLS_CERT"), tls_env("RGPU_TLS_KEY")})
                 .release();
    } catch (const transport::TlsError& e) {
      if (e.kind != transport::TlsError::Kind::Config) throw;
      throw transport::TlsError(
          e.kind, std::string(e.what()) + " (from RGPU_TLS_CA, RGPU_TLS_CERT, RGPU_TLS_KEY)");
    }
  }
  return *tls_;
}

const transport::TlsContext& link_tls_context() { return Client::get().tls_context(); }

}  // namespace rgpu::client
