// CUDA IPC handles (cudaIpcMemHandle_t, cudaIpcEventHandle_t) as hexadecimal text, so that the
// test programs can pass them between processes on their command lines and outputs.
#pragma once

#include <string>

template <class Handle>
std::string to_hex(const Handle& h) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < sizeof h.reserved; ++i) {
    unsigned char c = static_cast<unsigned char>(h.reserved[i]);
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

template <class Handle>
bool from_hex(const std::string& s, Handle& h) {
  if (s.size() != 2 * sizeof h.reserved) return false;
  for (size_t i = 0; i < sizeof h.reserved; ++i)
    h.reserved[i] = static_cast<char>(std::stoi(s.substr(2 * i, 2), nullptr, 16));
  return true;
}
