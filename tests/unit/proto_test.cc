// Protocol: every catalogue message round-trips; malformed, truncated, oversized and wrong-version
// input is rejected with ProtoError, never a crash.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>

#include "proto/auth.h"
#include "proto/frame.h"

using namespace rgpu::proto;

namespace {

// Fills every field of a message with pseudo-random values (strings and arrays included).
struct Filler {
  std::mt19937_64& rng;
  template <class T>
  void fill(T& v) {
    if constexpr (std::is_same_v<T, bool>)
      v = rng() & 1;
    else if constexpr (std::is_integral_v<T>)
      v = static_cast<T>(rng());
    else if constexpr (std::is_same_v<T, std::string>)
      v = std::string(rng() % 40, 'a' + rng() % 26);
    else if constexpr (is_byte_array<T>::value)
      for (auto& b : v) b = static_cast<uint8_t>(rng());
    else if constexpr (std::is_same_v<T, std::vector<uint8_t>>)
      v.assign(rng() % 100, 7);
    else if constexpr (is_vector<T>::value) {
      v.resize(rng() % 5);
      for (auto& e : v) fill(e);
    } else
      v.visit([&](auto&... f) { (fill(f), ...); });
  }
};

template <class T>
T random_message(std::mt19937_64& rng) {
  T m{};
  Filler{rng}.fill(m);
  return m;
}

template <class T>
void check_roundtrip_and_truncation(std::mt19937_64& rng) {
  for (int i = 0; i < 20; ++i) {
    T m = random_message<T>(rng);
    std::vector<uint8_t> bytes = encode_message(m);
    T back = decode_message<T>(bytes.data(), bytes.size());
    EXPECT_EQ(encode_message(back), bytes);
    // Every shorter prefix is rejected, and so is a trailing byte.
    for (size_t n = 0; n < bytes.size(); ++n)
      EXPECT_THROW(decode_message<T>(bytes.data(), n), ProtoError) << "prefix " << n;
    bytes.push_back(0);
    EXPECT_THROW(decode_message<T>(bytes.data(), bytes.size()), ProtoError);
  }
}

template <class T>
void check_random_input_never_crashes(std::mt19937_64& rng) {
  std::vector<uint8_t> buf;
  for (int i = 0; i < 2000; ++i) {
    buf.resize(rng() % 64);
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    try {
      decode_message<T>(buf.data(), buf.size());
    } catch (const ProtoError&) {
    }
  }
}

}  // namespace

TEST(Proto, EveryCatalogueMessageRoundTrips) {
  std::mt19937_64 rng(42);
  int messages = 0;
#define RGPU_MSG(NAME, ID, MODE, PAYLOAD)         \
  check_roundtrip_and_truncation<NAME##Req>(rng); \
  check_roundtrip_and_truncation<NAME##Rep>(rng); \
  ++messages;
#include "proto/catalogue.def"
#undef RGPU_MSG
  check_roundtrip_and_truncation<AsyncErrorMsg>(rng);
  check_roundtrip_and_truncation<HeartbeatMsg>(rng);
  EXPECT_GE(messages, 16);
}

TEST(Proto, RandomBytesAreRejectedOrDecodedNeverCrash) {
  std::mt19937_64 rng(7);
#define RGPU_MSG(NAME, ID, MODE, PAYLOAD)           \
  check_random_input_never_crashes<NAME##Req>(rng); \
  check_random_input_never_crashes<NAME##Rep>(rng);
#include "proto/catalogue.def"
#undef RGPU_MSG
}

TEST(Proto, ValuesAreLittleEndianFixedWidth) {
  MallocReq m{0x01020304, 0x1122334455667788ull};
  std::vector<uint8_t> b = encode_message(m);
  std::vector<uint8_t> want = {4,    3,    2, 1, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33,
                               0x22, 0x11, 0, 0, 0,    0,    0,    0,    0,    0};
  EXPECT_EQ(b, want);
}

TEST(Proto, OversizedLengthsAreRejectedBeforeAllocating) {
  // A string claiming more than the limit.
  std::vector<uint8_t> b;
  Writer w(b);
  w.put<uint32_t>(kMagic);
  w.put<uint32_t>(kProtocolVersion);
  w.put<uint32_t>(kMaxString + 1);
  EXPECT_THROW(decode_message<HelloReq>(b.data(), b.size()), ProtoError);
  // A string claiming more bytes than are present.
  b.clear();
  w.put<uint32_t>(kMagic);
  w.put<uint32_t>(kProtocolVersion);
  w.put<uint32_t>(1000);
  b.resize(b.size() + 10);
  EXPECT_THROW(decode_message<HelloReq>(b.data(), b.size()), ProtoError);
  // An array with more elements than the limit, and more than the bytes left.
  GetDeviceInfoRep rep;
  std::vector<uint8_t> enc = encode_message(rep);
  size_t count_at = enc.size() - 4;
  enc[count_at] = 0xff, enc[count_at + 1] = 0xff, enc[count_at + 2] = 0xff,
  enc[count_at + 3] = 0x7f;
  EXPECT_THROW(decode_message<GetDeviceInfoRep>(enc.data(), enc.size()), ProtoError);
  enc[count_at] = 100, enc[count_at + 1] = 0, enc[count_at + 2] = 0, enc[count_at + 3] = 0;
  EXPECT_THROW(decode_message<GetDeviceInfoRep>(enc.data(), enc.size()), ProtoError);
}

TEST(Proto, BoolMustBeZeroOrOne) {
  HelloRep rep;
  std::vector<uint8_t> b = encode_message(rep);
  b[8] = 2;  // auth_required follows magic and version
  EXPECT_THROW(decode_message<HelloRep>(b.data(), b.size()), ProtoError);
}

TEST(Proto, FrameHeaderLimits) {
  uint8_t raw[kHeaderSize];
  FrameHeader h{1, 0, 100, 5, 0};
  encode_header(h, raw);
  FrameHeader back = decode_header(raw);
  EXPECT_EQ(back.type, 1);
  EXPECT_EQ(back.body_len, 100u);
  EXPECT_EQ(back.request_id, 5u);
  h.body_len = kMaxBody + 1;
  encode_header(h, raw);
  EXPECT_THROW(decode_header(raw), ProtoError);
  h.body_len = 10;
  h.payload_len = kMaxPayload + 1;
  encode_header(h, raw);
  EXPECT_THROW(decode_header(raw), ProtoError);
  h.payload_len = 0;
  h.flags = 0x80;
  encode_header(h, raw);
  EXPECT_THROW(decode_header(raw), ProtoError);
}

TEST(Proto, ReplyBodies) {
  MallocRep rep{0xdeadbeef};
  std::vector<uint8_t> ok = encode_ok_reply(rep);
  MallocRep back;
  std::string msg;
  EXPECT_EQ(decode_reply(ok, back, msg), 0);
  EXPECT_EQ(back.ptr, 0xdeadbeefu);
  std::vector<uint8_t> bad = encode_error_reply(2, "out of memory");
  EXPECT_EQ(decode_reply(bad, back, msg), 2);
  EXPECT_EQ(msg, "out of memory");
  bad.pop_back();
  EXPECT_THROW(decode_reply(bad, back, msg), ProtoError);
}

TEST(Proto, CatalogueLookup) {
  Mode mode;
  Payload payload;
  ASSERT_TRUE(msg_info(static_cast<uint16_t>(MsgId::MemcpyHtoD), &mode, &payload));
  EXPECT_EQ(payload, Payload::In);
  ASSERT_TRUE(msg_info(static_cast<uint16_t>(MsgId::Free), &mode, &payload));
  EXPECT_EQ(mode, Mode::Async);
  EXPECT_FALSE(msg_info(0x7777, &mode, &payload));
  EXPECT_STREQ(msg_name(static_cast<uint16_t>(MsgId::Malloc)), "Malloc");
  EXPECT_EQ(msg_name(0x7777), nullptr);
}

TEST(Auth, MacVerifiesOnlyWithTheSameTokenAndChallenge) {
  Nonce c1 = random_nonce(), c2 = random_nonce();
  EXPECT_NE(c1, c2);
  Mac m = auth_mac("secret", c1);
  EXPECT_TRUE(auth_verify("secret", c1, m));
  EXPECT_FALSE(auth_verify("Secret", c1, m));
  EXPECT_FALSE(auth_verify("secret", c2, m));
  // The MAC does not contain the token.
  std::string s(m.begin(), m.end());
  EXPECT_EQ(s.find("secret"), std::string::npos);
}

TEST(Auth, TokenFileMustBePrivate) {
  char path[] = "/tmp/rgpu-token-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "  tok3n \n", 9), 9);
  close(fd);
  std::string error;
  chmod(path, 0600);
  auto t = read_token_file(path, error);
  ASSERT_TRUE(t.has_value()) << error;
  EXPECT_EQ(*t, "tok3n");
  chmod(path, 0644);
  EXPECT_FALSE(read_token_file(path, error).has_value());
  EXPECT_NE(error.find("group or others"), std::string::npos);
  unlink(path);
  EXPECT_FALSE(read_token_file(path, error).has_value());
}
