// Fuzz target: the frame header decoder.  Whatever 24 bytes arrive, decode_header either refuses
// them (ProtoError) or returns a header within the limits, which re-encodes to the same bytes.
#include <cstdlib>
#include <cstring>

#include "proto/frame.h"

using namespace rgpu::proto;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint8_t raw[kHeaderSize] = {};
  memcpy(raw, data, size < kHeaderSize ? size : kHeaderSize);
  FrameHeader h;
  try {
    h = decode_header(raw);
  } catch (const ProtoError&) {
    return 0;
  }
  if (h.body_len > kMaxBody || h.payload_len > kMaxPayload) abort();  // limits not enforced
  uint8_t back[kHeaderSize];
  encode_header(h, back);
  if (memcmp(back, raw, kHeaderSize) != 0) abort();  // decoding lost or invented something
  return 0;
}
