// OpenSSL 3, loaded with dlopen("libssl.so.3") the first time TLS is asked for.  Nothing links
// against OpenSSL: libcudart.so.13 gets no new shared-library dependency, a process that never
// asks for TLS never loads it, and Debian's security updates of libssl3 apply without a rebuild.
// Only types, constants and inline helpers come from the headers; every call goes through `api()`.
#pragma once

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <string>

namespace rgpu::transport::ossl {

// Each OpenSSL function rgpu calls: X(name).  The pointer has the header's own type.
#define RGPU_OPENSSL_FUNCTIONS(X)        \
  X(OPENSSL_init_ssl)                    \
  X(TLS_client_method)                   \
  X(TLS_server_method)                   \
  X(SSL_CTX_new)                         \
  X(SSL_CTX_free)                        \
  X(SSL_CTX_ctrl)                        \
  X(SSL_CTX_set_options)                 \
  X(SSL_CTX_set_ciphersuites)            \
  X(SSL_CTX_set_verify)                  \
  X(SSL_CTX_use_certificate_chain_file)  \
  X(SSL_CTX_use_PrivateKey_file)         \
  X(SSL_CTX_check_private_key)           \
  X(SSL_CTX_load_verify_locations)       \
  X(SSL_CTX_set_default_verify_paths)    \
  X(SSL_CTX_set_client_CA_list)          \
  X(SSL_CTX_set_client_cert_cb)          \
  X(SSL_CTX_set_num_tickets)             \
  X(SSL_CTX_set_default_read_buffer_len) \
  X(SSL_load_client_CA_file)             \
  X(SSL_new)                             \
  X(SSL_free)                            \
  X(SSL_set_fd)                          \
  X(SSL_ctrl)                            \
  X(SSL_set1_host)                       \
  X(SSL_get0_param)                      \
  X(SSL_connect)                         \
  X(SSL_accept)                          \
  X(SSL_read_ex)                         \
  X(SSL_write_ex)                        \
  X(SSL_get_error)                       \
  X(SSL_shutdown)                        \
  X(SSL_get_verify_result)               \
  X(SSL_get_version)                     \
  X(SSL_get_current_cipher)              \
  X(SSL_CIPHER_get_name)                 \
  X(SSL_get_wbio)                        \
  X(SSL_get_rbio)                        \
  X(BIO_ctrl)                            \
  X(ERR_get_error)                       \
  X(ERR_peek_last_error)                 \
  X(ERR_reason_error_string)             \
  X(ERR_clear_error)                     \
  X(X509_verify_cert_error_string)       \
  X(X509_VERIFY_PARAM_set1_ip_asc)       \
  X(SSL_CTX_get0_certificate)            \
  X(SSL_get1_peer_certificate)           \
  X(X509_digest)                         \
  X(X509_free)                           \
  X(EVP_sha256)

struct Api {
#define RGPU_OPENSSL_POINTER(name) decltype(&::name) name = nullptr;
  RGPU_OPENSSL_FUNCTIONS(RGPU_OPENSSL_POINTER)
#undef RGPU_OPENSSL_POINTER
};

// The loaded library, or nullptr with `error` saying why (library missing, or too old).
const Api* load(std::string& error);

// The table; only valid after load() succeeded.
const Api& api();

// The queue of OpenSSL errors of this thread as one line (and clears it); `fallback` when empty.
std::string errors(const std::string& fallback);

}  // namespace rgpu::transport::ossl
