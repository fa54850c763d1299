#include "channel/channel.h"

#include <algorithm>
#include <cstring>

namespace rgpu::channel {

using namespace rgpu::proto;

KnownSet::KnownSet(const std::vector<uint16_t>& ids) {
  for (uint16_t id : ids) bits_.set(id);
}

std::vector<uint8_t> Channel::encode_head(uint16_t type, uint16_t flags, uint64_t id,
                                          const std::vector<uint8_t>& body, uint64_t payload_len) {
  FrameHeader h{type, flags, static_cast<uint32_t>(body.size()), id, payload_len};
  std::vector<uint8_t> out(kHeaderSize + body.size());
  encode_header(h, out.data());
  if (!body.empty()) memcpy(out.data() + kHeaderSize, body.data(), body.size());
  return out;
}

uint64_t Channel::send(uint16_t type, uint16_t flags, uint64_t id, const std::vector<uint8_t>& body,
                       const iovec* payload, int n_payload, std::optional<int32_t> trailer) {
  uint64_t payload_len = 0;
  for (int i = 0; i < n_payload; ++i) payload_len += payload[i].iov_len;
  FrameHeader h{type, flags, static_cast<uint32_t>(body.size()), id, payload_len};
  uint8_t raw[kHeaderSize];
  encode_header(h, raw);
  uint8_t t[4];
  iovec small[4];
  std::vector<iovec> big;
  iovec* v = small;
  if (n_payload > 1) {
    big.resize(3 + n_payload);
    v = big.data();
  }
  int n = 0;
  v[n++] = {raw, sizeof raw};
  if (!body.empty()) v[n++] = {const_cast<uint8_t*>(body.data()), body.size()};
  for (int i = 0; i < n_payload; ++i) v[n++] = payload[i];
  if (trailer) {
    uint32_t u = static_cast<uint32_t>(*trailer);
    for (int i = 0; i < 4; ++i) t[i] = static_cast<uint8_t>(u >> (8 * i));
    v[n++] = {t, 4};
  }
  std::lock_guard<std::mutex> lock(send_mu_);
  conn_.send_all(v, n);
  return sent_.fetch_add(1, std::memory_order_acq_rel) + 1;
}

void Channel::send_encoded(const std::vector<uint8_t>& head, const iovec* payload, int n_payload,
                           std::optional<int32_t> trailer) {
  uint8_t t[4];
  std::vector<iovec> v;
  v.reserve(2 + n_payload);
  v.push_back({const_cast<uint8_t*>(head.data()), head.size()});
  v.insert(v.end(), payload, payload + n_payload);
  if (trailer) {
    uint32_t u = static_cast<uint32_t>(*trailer);
    for (int i = 0; i < 4; ++i) t[i] = static_cast<uint8_t>(u >> (8 * i));
    v.push_back({t, 4});
  }
  std::lock_guard<std::mutex> lock(send_mu_);
  conn_.send_all(v.data(), static_cast<int>(v.size()));
  sent_.fetch_add(1, std::memory_order_acq_rel);
}

bool Channel::read_frame(FrameHeader& h, std::vector<uint8_t>& body, Wait wait) {
  uint8_t raw[kHeaderSize];
  switch (wait) {
    case Wait::Idle:
      if (!conn_.recv_idle_or_eof(raw, sizeof raw)) return false;
      break;
    case Wait::TimedOrEof:
      if (!conn_.recv_or_eof(raw, sizeof raw)) return false;
      break;
    case Wait::Timed:
      conn_.recv(raw, sizeof raw);
      break;
  }
  h = decode_header(raw);
  body.resize(h.body_len);
  if (h.body_len) conn_.recv(body.data(), body.size());
  return true;
}

void Channel::skip(uint64_t bytes) {
  char sink[64 << 10];
  while (bytes) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(bytes, sizeof sink));
    conn_.recv(sink, n);
    bytes -= n;
  }
}

void Channel::skip_rest(const FrameHeader& h) {
  skip(h.payload_len);
  if (h.flags & kFlagTrailer) read_trailer();
}

int32_t Channel::read_trailer() {
  uint8_t t[4];
  conn_.recv(t, 4);
  uint32_t u = 0;
  for (int i = 0; i < 4; ++i) u |= static_cast<uint32_t>(t[i]) << (8 * i);
  return static_cast<int32_t>(u);
}

}  // namespace rgpu::channel
