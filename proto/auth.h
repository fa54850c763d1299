// Cryptography for the protocol: SHA-256 content hashes, and token authentication for the
// handshake: challenge-response with HMAC-SHA256 (libsodium).  The token itself never crosses the
// wire; the server sends a fresh random 32-byte challenge per connection and compares the client's
// MAC in constant time.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace rgpu::proto {

using Nonce = std::array<uint8_t, 32>;
using Mac = std::array<uint8_t, 32>;

Nonce random_nonce();
Mac auth_mac(const std::string& token, const Nonce& challenge);
bool auth_verify(const std::string& token, const Nonce& challenge, const Mac& mac);

// SHA-256 of a buffer (content hashes of modules).
std::array<uint8_t, 32> sha256(const void* data, size_t size);
std::string hex(const uint8_t* p, size_t n);

// Reads a token file: the first line, surrounding whitespace removed.  nullopt (with `error` set)
// if it cannot be read, is empty, or is readable by group or others.
std::optional<std::string> read_token_file(const std::string& path, std::string& error);

}  // namespace rgpu::proto
