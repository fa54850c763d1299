// Framing: every message on a connection is a 24-byte header, `body_len` bytes of encoded fields,
// then `payload_len` bytes of bulk data (copies), then — for a reply that carries a payload — a
// 4-byte trailing status (the copy may fail after its first bytes went out).
//
//   off 0  u16 type         message id (proto/catalogue.def), or AsyncError
//   off 2  u16 flags        kFlagReply: this answers request `request_id`; kFlagTrailer; kFlagSync
//   off 4  u32 body_len     <= kMaxBody
//   off 8  u64 request_id   chosen by the client, increasing
//   off 16 u64 payload_len  must equal what the message's fields say (payload_bytes())
//
// A reply's body is i32 error, then the reply's fields when error == 0, else a string message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/messages.h"
#include "proto/wire.h"

namespace rgpu::proto {

constexpr size_t kHeaderSize = 24;
constexpr uint16_t kFlagReply = 0x1;
constexpr uint16_t kFlagTrailer = 0x2;  // a 4-byte i32 status follows the payload
// A request whose sender waits for the reply.  The catalogue says so for every message this side
// knows; the flag lets a peer that does not know the message answer it the right way (an error
// reply, or an AsyncError) instead of dropping the connection.
constexpr uint16_t kFlagSync = 0x4;
constexpr uint64_t kMaxPayload = 1ull << 40;

struct FrameHeader {
  uint16_t type = 0;
  uint16_t flags = 0;
  uint32_t body_len = 0;
  uint64_t request_id = 0;
  uint64_t payload_len = 0;
};

void encode_header(const FrameHeader& h, uint8_t out[kHeaderSize]);
// Decodes and checks limits; throws ProtoError.
FrameHeader decode_header(const uint8_t in[kHeaderSize]);

// Reply bodies.
template <class Rep>
std::vector<uint8_t> encode_ok_reply(const Rep& rep) {
  std::vector<uint8_t> out;
  Writer w(out);
  w.put<int32_t>(0);
  encode_fields(w, rep);
  return out;
}
std::vector<uint8_t> encode_error_reply(int32_t error, const std::string& message);

// Splits a reply body: returns the error; on success decodes `rep`, on failure fills `message`.
template <class Rep>
int32_t decode_reply(const std::vector<uint8_t>& body, Rep& rep, std::string& message) {
  Reader r(body.data(), body.size());
  int32_t error = r.get<int32_t>();
  if (error == 0) {
    decode_fields(r, rep);
  } else {
    decode_field(r, message);
  }
  r.expect_end();
  return error;
}

}  // namespace rgpu::proto
