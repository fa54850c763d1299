#include "proto/frame.h"

#include <algorithm>

namespace rgpu::proto {

void encode_header(const FrameHeader& h, uint8_t out[kHeaderSize]) {
  std::vector<uint8_t> v;
  v.reserve(kHeaderSize);
  Writer w(v);
  w.put(h.type);
  w.put(h.flags);
  w.put(h.body_len);
  w.put(h.request_id);
  w.put(h.payload_len);
  memcpy(out, v.data(), kHeaderSize);
}

FrameHeader decode_header(const uint8_t in[kHeaderSize]) {
  Reader r(in, kHeaderSize);
  FrameHeader h;
  h.type = r.get<uint16_t>();
  h.flags = r.get<uint16_t>();
  h.body_len = r.get<uint32_t>();
  h.request_id = r.get<uint64_t>();
  h.payload_len = r.get<uint64_t>();
  if (h.flags & ~(kFlagReply | kFlagTrailer | kFlagSync)) throw ProtoError("unknown frame flags");
  if (h.body_len > kMaxBody) throw ProtoError("frame body larger than the limit");
  if (h.payload_len > kMaxPayload) throw ProtoError("frame payload larger than the limit");
  return h;
}

std::vector<uint8_t> encode_error_reply(int32_t error, const std::string& message) {
  std::vector<uint8_t> out;
  Writer w(out);
  w.put<int32_t>(error);
  encode_field(w, message.size() > kMaxString ? message.substr(0, kMaxString) : message);
  return out;
}

const char* msg_name(uint16_t id) {
  switch (id) {
#define RGPU_MSG(NAME, ID, MODE, PAYLOAD) \
  case ID:                                \
    return #NAME;
#define RGPU_PUSH(NAME, ID, DIRECTION) \
  case ID:                             \
    return #NAME;
#include "proto/catalogue.def"
#undef RGPU_MSG
#undef RGPU_PUSH
  }
  return nullptr;
}

bool msg_info(uint16_t id, Mode* mode, Payload* payload) {
  switch (id) {
#define RGPU_MSG(NAME, ID, MODE, PAYLOAD) \
  case ID:                                \
    *mode = Mode::MODE;                   \
    *payload = Payload::PAYLOAD;          \
    return true;
#include "proto/catalogue.def"
#undef RGPU_MSG
  }
  return false;
}

bool push_info(uint16_t id, Direction* direction) {
  switch (id) {
#define RGPU_PUSH(NAME, ID, DIRECTION) \
  case ID:                             \
    *direction = Direction::DIRECTION; \
    return true;
#include "proto/catalogue.def"
#undef RGPU_PUSH
  }
  return false;
}

const std::vector<uint16_t>& known_ids() {
  static const std::vector<uint16_t> ids = [] {
    std::vector<uint16_t> v = {
#define RGPU_MSG(NAME, ID, MODE, PAYLOAD) ID,
#define RGPU_PUSH(NAME, ID, DIRECTION) ID,
#include "proto/catalogue.def"
#undef RGPU_MSG
#undef RGPU_PUSH
    };
    std::sort(v.begin(), v.end());
    return v;
  }();
  return ids;
}

}  // namespace rgpu::proto
