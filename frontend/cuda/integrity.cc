#include "frontend/cuda/integrity.h"

#include <cstring>

namespace rgpu::cuda_fe {

namespace {

// RFC 1319's substitution table (a permutation of 0..255 built from the digits of pi).
constexpr uint8_t kPi[256] = {
    41,  46,  67,  201, 162, 216, 124, 1,   61,  54,  84,  161, 236, 240, 6,   19,  98,  167, 5,
    243, 192, 199, 115, 140, 152, 147, 43,  217, 188, 76,  130, 202, 30,  155, 87,  60,  253, 212,
    224, 22,  103, 66,  111, 24,  138, 23,  229, 18,  190, 78,  196, 214, 218, 158, 222, 73,  160,
    251, 245, 142, 187, 47,  238, 122, 169, 104, 121, 145, 21,  178, 7,   63,  148, 194, 16,  137,
    11,  34,  95,  33,  128, 127, 93,  154, 90,  144, 50,  39,  53,  62,  204, 231, 191, 247, 151,
    3,   255, 25,  48,  179, 72,  165, 181, 209, 215, 94,  146, 42,  172, 86,  170, 198, 79,  184,
    56,  210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4,   241, 69,  157, 112, 89,  100,
    113, 135, 32,  134, 91,  207, 101, 230, 45,  168, 2,   27,  96,  37,  173, 174, 176, 185, 246,
    28,  70,  97,  105, 52,  64,  126, 15,  85,  71,  163, 35,  221, 81,  175, 58,  195, 92,  249,
    206, 186, 197, 234, 38,  44,  83,  13,  110, 133, 40,  132, 9,   211, 223, 205, 244, 65,  129,
    77,  82,  106, 220, 55,  200, 108, 193, 171, 250, 36,  225, 123, 8,   12,  189, 177, 74,  120,
    136, 149, 139, 227, 99,  232, 109, 233, 203, 213, 254, 59,  0,   29,  57,  242, 239, 183, 14,
    102, 88,  208, 228, 166, 119, 114, 248, 235, 117, 75,  10,  49,  68,  80,  180, 143, 237, 31,
    26,  219, 153, 141, 51,  159, 17,  131, 20};

// The fixed HMAC key NVIDIA's runtime uses (observed; see cuda-abi.md 5.3).
constexpr uint8_t kKey[16] = {0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52,
                              0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F};

}  // namespace

void Md2::transform() {
  uint8_t t = 0;
  for (int round = 0; round < 18; ++round) {
    for (uint8_t& b : x_) t = b ^= kPi[t];
    t = static_cast<uint8_t>(t + round);
  }
}

void Md2::update(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t c = p[i];
    x_[16 + count_] = c;
    x_[32 + count_] = x_[count_] ^ c;
    last_ = sum_[count_] ^= kPi[c ^ last_];
    if (++count_ == 16) {
      count_ = 0;
      transform();
    }
  }
}

std::array<uint8_t, 16> Md2::finish() {
  const uint8_t pad = static_cast<uint8_t>(16 - count_);
  uint8_t padding[16];
  std::memset(padding, pad, sizeof padding);
  update(padding, pad);
  uint8_t sum[16];
  std::memcpy(sum, sum_, sizeof sum);
  update(sum, sizeof sum);
  std::array<uint8_t, 16> digest;
  std::memcpy(digest.data(), x_, 16);
  return digest;
}

std::array<uint8_t, 16> hmac_md2(const uint8_t key[16], const void* message, size_t n) {
  uint8_t pad[16];
  Md2 inner;
  for (int i = 0; i < 16; ++i) pad[i] = key[i] ^ 0x36;
  inner.update(pad, sizeof pad);
  inner.update(message, n);
  const std::array<uint8_t, 16> first = inner.finish();
  Md2 outer;
  for (int i = 0; i < 16; ++i) pad[i] = key[i] ^ 0x5c;
  outer.update(pad, sizeof pad);
  outer.update(first.data(), first.size());
  return outer.finish();
}

std::array<uint64_t, 2> integrity_answer(const IntegrityInput& in) {
  switch (in.check_version % 10) {
    case 0:
      return {0x3341181c03cb675cull, 0x8ed383aa1f4cd1e8ull};
    case 1:
      return {0x1841181c03cb675cull, 0x8ed383aa1f4cd1e8ull};
    default:
      break;
  }
  // The record, laid out as the runtime lays it out on x86-64 (little-endian, 8-byte pointers).
  std::vector<uint8_t> msg;
  auto put = [&msg](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    msg.insert(msg.end(), b, b + n);
  };
  put(&in.driver_version, 4);
  put(&in.check_version, 4);
  put(&in.pid, 4);
  put(&in.thread, 4);
  const uintptr_t pointers[3] = {reinterpret_cast<uintptr_t>(in.cudart_table),
                                 reinterpret_cast<uintptr_t>(in.integrity_table),
                                 reinterpret_cast<uintptr_t>(in.check_function)};
  put(pointers, sizeof pointers);
  put(&in.unix_seconds, 8);
  for (const IntegrityDevice& d : in.devices) {
    put(d.uuid, 16);
    put(&d.pci_domain, 4);
    put(&d.pci_bus, 4);
    put(&d.pci_device, 4);
  }
  const std::array<uint8_t, 16> mac = hmac_md2(kKey, msg.data(), msg.size());
  std::array<uint64_t, 2> out;
  std::memcpy(out.data(), mac.data(), 16);
  return out;
}

}  // namespace rgpu::cuda_fe
