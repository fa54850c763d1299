// Fuzz target: the decoder of every catalogue message (request and reply, generated from
// proto/catalogue.def), the messages the server sends unasked, and reply bodies.  The first two
// input bytes choose the message; the rest is its body.  A decoder either refuses the bytes
// (ProtoError) or returns a message that encodes back to exactly those bytes.
#include <cstdlib>
#include <vector>

#include "proto/frame.h"

using namespace rgpu::proto;

namespace {

template <class T>
void check(const uint8_t* p, size_t n) {
  T m;
  try {
    m = decode_message<T>(p, n);
  } catch (const ProtoError&) {
    return;
  }
  std::vector<uint8_t> back = encode_message(m);
  if (back.size() != n || (n && memcmp(back.data(), p, n) != 0)) abort();  // not canonical
}

template <class Rep>
void check_reply(const uint8_t* p, size_t n) {
  std::vector<uint8_t> body(p, p + n);
  Rep rep;
  std::string message;
  try {
    decode_reply(body, rep, message);
  } catch (const ProtoError&) {
  }
}

using Checker = void (*)(const uint8_t*, size_t);

const std::vector<Checker>& checkers() {
  static const std::vector<Checker> all = [] {
    std::vector<Checker> v;
#define RGPU_MSG(NAME, ID, MODE, PAYLOAD) \
  v.push_back(&check<NAME##Req>);         \
  v.push_back(&check<NAME##Rep>);         \
  v.push_back(&check_reply<NAME##Rep>);
#include "proto/catalogue.def"
#undef RGPU_MSG
    v.push_back(&check<AsyncErrorMsg>);
    v.push_back(&check<AsyncDataMsg>);
    v.push_back(&check<RunCallbackMsg>);
    v.push_back(&check<DeviceOutputMsg>);
    v.push_back(&check<DeviceStderrMsg>);
    v.push_back(&check<AsyncNotifyMsg>);
    return v;
  }();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto& all = checkers();
  size_t which = (data[0] | (data[1] << 8)) % all.size();
  all[which](data + 2, size - 2);
  return 0;
}
