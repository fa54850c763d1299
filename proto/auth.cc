#include "proto/auth.h"

#include <sodium.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace rgpu::proto {
namespace {

void ensure_sodium() {
  static const bool ok = sodium_init() >= 0;
  if (!ok) throw std::runtime_error("libsodium failed to initialise");
}

constexpr char kContext[] = "rgpu-auth-v1";

}  // namespace

Nonce random_nonce() {
  ensure_sodium();
  Nonce n;
  randombytes_buf(n.data(), n.size());
  return n;
}

Mac auth_mac(const std::string& token, const Nonce& challenge) {
  ensure_sodium();
  // Key = SHA-256(token), so tokens of any length give a full-size HMAC key.
  uint8_t key[crypto_auth_hmacsha256_KEYBYTES];
  crypto_hash_sha256(key, reinterpret_cast<const uint8_t*>(token.data()), token.size());
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, key, sizeof key);
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const uint8_t*>(kContext),
                                sizeof kContext - 1);
  crypto_auth_hmacsha256_update(&st, challenge.data(), challenge.size());
  Mac mac;
  crypto_auth_hmacsha256_final(&st, mac.data());
  sodium_memzero(key, sizeof key);
  return mac;
}

bool auth_verify(const std::string& token, const Nonce& challenge, const Mac& mac) {
  Mac expect = auth_mac(token, challenge);
  return sodium_memcmp(expect.data(), mac.data(), mac.size()) == 0;
}

std::array<uint8_t, 32> sha256(const void* data, size_t size) {
  ensure_sodium();
  std::array<uint8_t, 32> h;
  crypto_hash_sha256(h.data(), static_cast<const uint8_t*>(data), size);
  return h;
}

std::string hex(const uint8_t* p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

std::optional<std::string> read_token_file(const std::string& path, std::string& error) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    error = "cannot read token file " + path + ": " + strerror(errno);
    return std::nullopt;
  }
  if (S_ISDIR(st.st_mode)) {
    error = "token file " + path + " is a directory";
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    error = "token file " + path + " is not a regular file";
    return std::nullopt;
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    error = "token file " + path + " is accessible by group or others (chmod 600 it)";
    return std::nullopt;
  }
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  size_t b = line.find_first_not_of(" \t\r\n");
  size_t e = line.find_last_not_of(" \t\r\n");
  if (b == std::string::npos) {
    error = "token file " + path + " is empty";
    return std::nullopt;
  }
  return line.substr(b, e - b + 1);
}

}  // namespace rgpu::proto
