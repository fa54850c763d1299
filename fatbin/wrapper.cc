// The wrapper nvcc registers, the size of the fatbin it points at and the headers a driver checks
// when an image is loaded: what the client library needs, without the decompressors the full
// parser uses.
#include <cstring>

#include "fatbin/fatbin.h"

namespace rgpu::fatbin {
namespace {

template <class T>
T rd(const uint8_t* p) {
  T v;
  memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

size_t fatbin_size(const uint8_t* p, size_t available) {
  if (available < 16) throw FatbinError("fatbin shorter than its header");
  if (rd<uint32_t>(p) != kFatbinMagic) throw FatbinError("not a fatbin (bad magic)");
  uint16_t header = rd<uint16_t>(p + 6);
  uint64_t body = rd<uint64_t>(p + 8);
  if (header < 16 || body > available || header > available - body)
    throw FatbinError("fatbin header gives an impossible size");
  return header + body;
}

void check_header(const uint8_t* p, size_t size) {
  if (size >= 4 && rd<uint32_t>(p) == kFatbinMagic)
    plan_image(p, size, 0);  // every entry's header, nothing decompressed
  else if (size >= 4 && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F')
    check_elf_header(p, size);
  else
    ptx_text(p, size);
}

WrappedFatbin unwrap(const void* wrapper) {
  const auto* w = static_cast<const uint8_t*>(wrapper);
  if (rd<uint32_t>(w) != kWrapperMagic) throw FatbinError("not a fatbin wrapper (bad magic)");
  uint32_t version = rd<uint32_t>(w + 4);
  if (version != 1 && version != 2) throw FatbinError("unknown fatbin wrapper version");
  const auto* data = rd<const uint8_t*>(w + 8);
  if (!data) throw FatbinError("fatbin wrapper without data");
  // The header bounds the size; the wrapper gives no limit of its own.
  size_t size = fatbin_size(data, SIZE_MAX / 2);
  return {data, size};
}

}  // namespace rgpu::fatbin
