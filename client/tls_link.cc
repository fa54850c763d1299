#include "client/tls_link.h"

#include <cstdlib>
#include <mutex>

#include "common/log.h"
#include "transport/tls/tls.h"

namespace rgpu::client {
namespace {

constexpr int kHandshakeSec = 10;

}  // namespace

std::string tls_env(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

int tls_setting(std::string& text) {
  text = tls_env("RGPU_TLS");
  if (text.empty() || text == "0") return 0;
  return text == "1" ? 1 : -1;
}

std::unique_ptr<transport::Connection> secure_link(std::unique_ptr<transport::Connection> tcp,
                                                   const std::string& host) {
  using Kind = transport::TlsError::Kind;
  try {
    auto conn = transport::tls_connect(std::move(tcp), link_tls_context(), host, kHandshakeSec);
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
