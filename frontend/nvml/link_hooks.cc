// The two hooks the client's links call that a library with a client core answers through its
// Client (client/server_errors.cc, client/tls_context.cc): this library has none, so it answers
// them itself and the client core stays out of it.
#include <cstdlib>
#include <memory>
#include <mutex>

#include "client/server_link.h"
#include "client/tls_link.h"
#include "common/log.h"
#include "transport/tls/tls.h"

namespace rgpu::client {

// A server's reason for a failed request: the log only (NVML has no logs API).
void note_server_error(const std::string& message) { LOG_INFO("%s", message.c_str()); }

// This library's own TLS context for RGPU_TLS=1 links (RGPU_TLS_CA, RGPU_TLS_CERT, RGPU_TLS_KEY).
const transport::TlsContext& link_tls_context() {
  static std::mutex mu;
  static transport::TlsContext* ctx = nullptr;  // kept for the life of the process
  std::lock_guard<std::mutex> lock(mu);
  if (!ctx) {
    try {
      ctx = transport::TlsContext::client(
                {tls_env("RGPU_TLS_CA"), tls_env("RGPU_TLS_CERT"), tls_env("RGPU_TLS_KEY")})
                .release();
    } catch (const transport::TlsError& e) {
      if (e.kind != transport::TlsError::Kind::Config) throw;
      throw transport::TlsError(
          e.kind, std::string(e.what()) + " (from RGPU_TLS_CA, RGPU_TLS_CERT, RGPU_TLS_KEY)");
    }
  }
  return *ctx;
}

}  // namespace rgpu::client
