#include "client/tls_link.h"

#include <cstdlib>
#include <mutex>

#include "client/client.h"
#include "common/log.h"
#include "transport/tls/tls.h"

namespace rgpu::client {
namespace {

constexpr int kHandshakeSec = 10;

std::string env(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

}  // namespace

// One context per process, made at the first TLS link (files are read once); it lives in the one
// Client (client/core_table.h).
const transport::TlsContext& Client::tls_context() {
  std::lock_guard<std::mutex> lock(tls_mu_);
  if (!tls_) {
    try {
      tls_ = transport::TlsContext::client(
                 {env("RGPU_TLS_CA"), env("RGPU_TLS_CERT"), env("RGPU_TLS_KEY")})
                 .release();
    } catch (const transport::TlsError& e) {
      if (e.kind != transport::TlsError::Kind::Config) throw;
      throw transport::TlsError(
          e.kind, std::string(e.what()) + " (from RGPU_TLS_CA, RGPU_TLS_CERT, RGPU_TLS_KEY)");
    }
  }
  return *tls_;
}

int tls_setting(std::string& text) {
  text = env("RGPU_TLS");
  if (text.empty() || text == "0") return 0;
  return text == "1" ? 1 : -1;
}

std::unique_ptr<transport::Connection> secure_link(std::unique_ptr<transport::Connection> tcp,
                                                   const std::string& host) {
  using Kind = transport::TlsError::Kind;
  try {
    auto conn =
        transport::tls_connect(std::move(tcp), Client::get().tls_context(), host, kHandshakeSec);
    LOG_INFO("TLS with %s: %s", conn->peer().c_str(), transport::tls_summary(*conn).c_str());
    return conn;
  } catch (const transport::TlsError& e) {
    std::string hint;
    switch (e.kind) {
      case Kind::ServerUnverified:
        hint = " (set RGPU_TLS_CA to the CA file that signed rgpud's certificate)";
        break;
      case Kind::WrongName:
        hint =
            ": it must name '" + host + "' as written in RGPU_SERVERS (an IP SAN for an address)";
        break;
      case Kind::NeedClientCert:
        hint = ": set RGPU_TLS_CERT and RGPU_TLS_KEY to a client certificate and key";
        break;
      case Kind::NotTlsPeer:
        hint = " — does rgpud run with --tls-cert? (unset RGPU_TLS for a server without TLS)";
        break;
      default:
        break;
    }
    throw transport::TlsError(e.kind, e.what() + hint);
  }
}

}  // namespace rgpu::client
