// Field encoding for the rgpu wire protocol.
//
// Every message is a plain struct that lists its fields once with RGPU_FIELDS(...).  Encoding and
// decoding are both derived from that list (encode_message / decode_message below), so the two ends
// cannot drift apart.  All integers are fixed-width little-endian; strings, byte blobs and arrays
// carry an explicit u32 length that the decoder checks against a limit and against the bytes left
// before it allocates anything.  Never a raw C struct.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace rgpu::proto {

// Decoding limits.  A frame body larger than kMaxBody is refused before it is read.
constexpr uint32_t kMaxBody = 4u << 20;     // 4 MiB of encoded fields per frame
constexpr uint32_t kMaxString = 64u << 10;  // one string field
constexpr uint32_t kMaxBlob = kMaxBody;     // one byte-blob field
constexpr uint32_t kMaxCount = 1u << 16;    // elements of one array field

// Thrown for malformed input; the receiver closes that connection with the message logged.
struct ProtoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  template <class T>
  void put(T v) {
    static_assert(std::is_integral_v<T>);
    using U = std::make_unsigned_t<T>;
    U u = static_cast<U>(v);
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<uint8_t>(u >> (8 * i)));
  }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }

 private:
  std::vector<uint8_t>& out_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  template <class T>
  T get() {
    static_assert(std::is_integral_v<T>);
    need(sizeof(T));
    using U = std::make_unsigned_t<T>;
    U u = 0;
    for (size_t i = 0; i < sizeof(T); ++i) u |= static_cast<U>(static_cast<U>(p_[i]) << (8 * i));
    p_ += sizeof(T);
    return static_cast<T>(u);
  }
  const uint8_t* take(size_t n) {
    need(n);
    const uint8_t* r = p_;
    p_ += n;
    return r;
  }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  void expect_end() const {
    if (p_ != end_) throw ProtoError("trailing bytes after message fields");
  }

 private:
  void need(size_t n) const {
    if (static_cast<size_t>(end_ - p_) < n) throw ProtoError("message truncated");
  }
  const uint8_t* p_;
  const uint8_t* end_;
};

// RGPU_FIELDS(a, b, c) inside a struct declares its wire fields, in order.
#define RGPU_FIELDS(...)    \
  template <class F>        \
  void visit(F&& f) {       \
    f(__VA_ARGS__);         \
  }                         \
  template <class F>        \
  void visit(F&& f) const { \
    f(__VA_ARGS__);         \
  }
#define RGPU_NO_FIELDS \
  template <class F>   \
  void visit(F&&) const {}

template <class T, class = void>
struct has_visit : std::false_type {};
template <class T>
struct has_visit<T, std::void_t<decltype(std::declval<T&>().visit([](auto&...) {}))>>
    : std::true_type {};

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

template <class T>
struct is_byte_array : std::false_type {};
template <size_t N>
struct is_byte_array<std::array<uint8_t, N>> : std::true_type {};

template <class T>
void encode_field(Writer& w, const T& v);
template <class T>
void decode_field(Reader& r, T& v);

template <class T>
void encode_fields(Writer& w, const T& msg) {
  msg.visit([&](const auto&... f) { (encode_field(w, f), ...); });
}
template <class T>
void decode_fields(Reader& r, T& msg) {
  msg.visit([&](auto&... f) { (decode_field(r, f), ...); });
}

// Minimum encoded size of one element, used to reject absurd counts before allocating.
template <class T>
constexpr size_t min_encoded_size() {
  if constexpr (std::is_same_v<T, bool>)
    return 1;
  else if constexpr (std::is_integral_v<T>)
    return sizeof(T);
  else
    return 1;
}

template <class T>
void encode_field(Writer& w, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    w.put<uint8_t>(v ? 1 : 0);
  } else if constexpr (std::is_integral_v<T>) {
    w.put<T>(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (v.size() > kMaxString) throw ProtoError("string field too long to encode");
    w.put<uint32_t>(static_cast<uint32_t>(v.size()));
    w.bytes(v.data(), v.size());
  } else if constexpr (is_byte_array<T>::value) {
    w.bytes(v.data(), v.size());
  } else if constexpr (std::is_same_v<T, std::vector<uint8_t>>) {
    if (v.size() > kMaxBlob) throw ProtoError("blob field too long to encode");
    w.put<uint32_t>(static_cast<uint32_t>(v.size()));
    w.bytes(v.data(), v.size());
  } else if constexpr (is_vector<T>::value) {
    if (v.size() > kMaxCount) throw ProtoError("array field too long to encode");
    w.put<uint32_t>(static_cast<uint32_t>(v.size()));
    for (const auto& e : v) encode_field(w, e);
  } else {
    static_assert(has_visit<T>::value, "wire field type has no encoding");
    encode_fields(w, v);
  }
}

template <class T>
void decode_field(Reader& r, T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    uint8_t b = r.get<uint8_t>();
    if (b > 1) throw ProtoError("bool field is neither 0 nor 1");
    v = b != 0;
  } else if constexpr (std::is_integral_v<T>) {
    v = r.get<T>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    uint32_t n = r.get<uint32_t>();
    if (n > kMaxString) throw ProtoError("string field longer than its limit");
    const uint8_t* p = r.take(n);
    v.assign(reinterpret_cast<const char*>(p), n);
  } else if constexpr (is_byte_array<T>::value) {
    const uint8_t* p = r.take(v.size());
    memcpy(v.data(), p, v.size());
  } else if constexpr (std::is_same_v<T, std::vector<uint8_t>>) {
    uint32_t n = r.get<uint32_t>();
    if (n > kMaxBlob) throw ProtoError("blob field longer than its limit");
    const uint8_t* p = r.take(n);
    v.assign(p, p + n);
  } else if constexpr (is_vector<T>::value) {
    using E = typename T::value_type;
    uint32_t n = r.get<uint32_t>();
    if (n > kMaxCount) throw ProtoError("array field has more elements than its limit");
    if (static_cast<uint64_t>(n) * min_encoded_size<E>() > r.left())
      throw ProtoError("array field count exceeds the bytes present");
    v.clear();
    v.resize(n);
    for (auto& e : v) decode_field(r, e);
  } else {
    static_assert(has_visit<T>::value, "wire field type has no decoding");
    decode_fields(r, v);
  }
}

template <class T>
std::vector<uint8_t> encode_message(const T& msg) {
  std::vector<uint8_t> out;
  Writer w(out);
  encode_fields(w, msg);
  return out;
}

template <class T>
T decode_message(const uint8_t* p, size_t n) {
  T msg{};
  Reader r(p, n);
  decode_fields(r, msg);
  r.expect_end();
  return msg;
}

// For the handshake's messages only (Hello and its reply), which may gain fields at their end in
// later versions: the fields this side knows are decoded, later ones ignored, and fields an older
// peer does not send (the message ends before them) keep their defaults.
template <class T>
T decode_message_prefix(const uint8_t* p, size_t n) {
  T msg{};
  Reader r(p, n);
  msg.visit([&](auto&... f) { ((r.left() ? decode_field(r, f) : void()), ...); });
  return msg;
}

}  // namespace rgpu::proto
