#include "transport/tls/openssl_api.h"

#include <dlfcn.h>

#include <mutex>

namespace rgpu::transport::ossl {
namespace {

Api g_api;
std::string g_error;
bool g_loaded = false;
std::once_flag g_once;

void load_once() {
  // RTLD_LOCAL: OpenSSL's symbols stay out of the program's global scope.  A program that links
  // libssl.so.3 itself shares the same copy (the loader keeps one instance per soname).
  void* h = dlopen("libssl.so.3", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    g_error = std::string("TLS needs OpenSSL 3 (libssl.so.3), which could not be loaded: ") +
              (e ? e : "unknown error") + " (on Debian/Ubuntu: apt-get install libssl3)";
    return;
  }
  // dlsym on libssl's handle also searches its dependencies, libcrypto.so.3 among them.
#define RGPU_OPENSSL_RESOLVE(name)                                           \
  g_api.name = reinterpret_cast<decltype(g_api.name)>(dlsym(h, #name));      \
  if (!g_api.name) {                                                         \
    g_error = "libssl.so.3 lacks " #name ": TLS needs OpenSSL 3.0 or later"; \
    return;                                                                  \
  }
  RGPU_OPENSSL_FUNCTIONS(RGPU_OPENSSL_RESOLVE)
#undef RGPU_OPENSSL_RESOLVE
  if (g_api.OPENSSL_init_ssl(OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS,
                             nullptr) != 1) {
    g_error = "OpenSSL failed to initialise";
    return;
  }
  g_loaded = true;
}

}  // namespace

const Api* load(std::string& error) {
  std::call_once(g_once, load_once);
  if (!g_loaded) {
    error = g_error;
    return nullptr;
  }
  return &g_api;
}

const Api& api() { return g_api; }

std::string errors(const std::string& fallback) {
  std::string out;
  while (unsigned long e = g_api.ERR_get_error()) {
    const char* reason = g_api.ERR_reason_error_string(e);
    if (!out.empty()) out += "; ";
    out += reason ? reason : "OpenSSL error " + std::to_string(ERR_GET_REASON(e));
  }
  return out.empty() ? fallback : out;
}

}  // namespace rgpu::transport::ossl
