// Builders of small cubin ELF images and fat binaries for tests: well-formed by default, with
// every field a test may want to falsify (offsets, sizes, types, links, declared sizes) settable.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace rgpu::test {

inline void put_bytes(std::vector<uint8_t>& b, size_t at, const void* p, size_t n) {
  if (b.size() < at + n) b.resize(at + n);
  memcpy(b.data() + at, p, n);
}
template <class T>
void put(std::vector<uint8_t>& b, size_t at, T v) {
  put_bytes(b, at, &v, sizeof v);
}

struct CubinBuilder {
  static constexpr uint32_t kProgbits = 1, kSymtab = 2, kStrtab = 3, kNobits = 8;
  struct Section {
    std::string name;
    uint32_t type = kProgbits;
    std::vector<uint8_t> data;
    uint64_t size = UINT64_MAX;    // declared size (default: data.size())
    uint64_t offset = UINT64_MAX;  // declared offset (default: where the data is)
    uint32_t link = 0;
    uint64_t entsize = 0;
  };
  std::vector<Section> sections;  // index 0 (the null section) is added by build()
  std::vector<uint8_t> strtab{0};

  // Index (1-based, as in the ELF) of a new section.
  uint32_t add(Section s) {
    sections.push_back(std::move(s));
    return static_cast<uint32_t>(sections.size());
  }
  uint32_t name(const std::string& n) {
    uint32_t at = static_cast<uint32_t>(strtab.size());
    strtab.insert(strtab.end(), n.begin(), n.end());
    strtab.push_back(0);
    return at;
  }
  static std::vector<uint8_t> symbol(uint32_t name, uint16_t shndx, uint64_t value, uint64_t size) {
    std::vector<uint8_t> s(24);
    put<uint32_t>(s, 0, name);
    s[4] = 1;  // STT_OBJECT
    put<uint16_t>(s, 6, shndx);
    put<uint64_t>(s, 8, value);
    put<uint64_t>(s, 16, size);
    return s;
  }
  // An EIATTR_KPARAM_INFO record: parameter `ordinal` at `offset`, `size` bytes.
  static std::vector<uint8_t> kparam(uint16_t ordinal, uint16_t offset, uint32_t size) {
    std::vector<uint8_t> r(16);
    r[0] = 4, r[1] = 0x17;
    put<uint16_t>(r, 2, 12);
    put<uint16_t>(r, 8, ordinal);
    put<uint16_t>(r, 10, offset);
    put<uint32_t>(r, 12, size << 18);
    return r;
  }

  std::vector<uint8_t> build() const {
    std::vector<uint8_t> shstr{0};
    std::vector<uint32_t> names;
    auto add_name = [&](const std::string& n) {
      names.push_back(static_cast<uint32_t>(shstr.size()));
      shstr.insert(shstr.end(), n.begin(), n.end());
      shstr.push_back(0);
    };
    for (auto& s : sections) add_name(s.name);
    add_name(".shstrtab");
    std::vector<uint8_t> img(64);
    std::vector<uint64_t> offs;
    for (auto& s : sections) {
      offs.push_back(img.size());
      img.insert(img.end(), s.data.begin(), s.data.end());
    }
    uint64_t shstr_off = img.size();
    img.insert(img.end(), shstr.begin(), shstr.end());
    while (img.size() % 8) img.push_back(0);
    uint64_t shoff = img.size();
    uint16_t shnum = static_cast<uint16_t>(sections.size() + 2);
    img.resize(shoff + 64ull * shnum);
    auto header = [&](size_t i, uint32_t name, uint32_t type, uint64_t off, uint64_t size,
                      uint32_t link, uint64_t entsize) {
      size_t h = shoff + 64 * i;
      put<uint32_t>(img, h, name);
      put<uint32_t>(img, h + 4, type);
      put<uint64_t>(img, h + 24, off);
      put<uint64_t>(img, h + 32, size);
      put<uint32_t>(img, h + 40, link);
      put<uint64_t>(img, h + 56, entsize);
    };
    for (size_t i = 0; i < sections.size(); ++i) {
      const Section& s = sections[i];
      header(i + 1, names[i], s.type, s.offset == UINT64_MAX ? offs[i] : s.offset,
             s.size == UINT64_MAX ? s.data.size() : s.size, s.link, s.entsize);
    }
    header(shnum - 1, names.back(), kStrtab, shstr_off, shstr.size(), 0, 0);
    memcpy(img.data(),
           "\x7f"
           "ELF",
           4);
    img[4] = 2, img[5] = 1, img[6] = 1;
    put<uint16_t>(img, 16, 2);    // ET_EXEC
    put<uint16_t>(img, 18, 190);  // EM_CUDA
    put<uint64_t>(img, 0x28, shoff);
    put<uint16_t>(img, 0x34, 64);
    put<uint16_t>(img, 0x3A, 64);
    put<uint16_t>(img, 0x3C, shnum);
    put<uint16_t>(img, 0x3E, static_cast<uint16_t>(shnum - 1));
    return img;
  }
};

// A fatbin: header (16 bytes) and entries of 64-byte headers.
struct FatbinBuilder {
  struct Entry {
    uint16_t kind = 2;  // 1 PTX, 2 ELF
    uint32_t arch = 90;
    uint64_t flags = 0;  // 0x2000 LZ4, 0x8000 ZSTD
    std::vector<uint8_t> data;
    uint64_t uncompressed = 0;  // declared decompressed size (compressed entries)
  };
  std::vector<Entry> entries;

  std::vector<uint8_t> build() const {
    std::vector<uint8_t> out(16);
    for (auto& e : entries) {
      size_t h = out.size();
      out.resize(h + 64);
      put<uint16_t>(out, h, e.kind);
      put<uint16_t>(out, h + 2, 0x0101);
      put<uint32_t>(out, h + 4, 64);
      put<uint32_t>(out, h + 8, static_cast<uint32_t>(e.data.size()));
      put<uint32_t>(out, h + 16, static_cast<uint32_t>(e.data.size()));
      put<uint32_t>(out, h + 28, e.arch);
      put<uint64_t>(out, h + 40, e.flags);
      put<uint64_t>(out, h + 56, e.uncompressed);
      out.insert(out.end(), e.data.begin(), e.data.end());
    }
    put<uint32_t>(out, 0, 0xBA55ED50);
    put<uint16_t>(out, 4, 1);
    put<uint16_t>(out, 6, 16);
    put<uint64_t>(out, 8, out.size() - 16);
    return out;
  }
  static std::vector<uint8_t> wrap(const std::vector<uint8_t>& cubin) {
    FatbinBuilder b;
    b.entries.push_back(Entry{2, 90, 0, cubin, 0});
    return b.build();
  }
};

// A zstd frame holding `n` bytes from `byte_at` (RLE blocks where a 128 KiB block repeats one byte,
// raw blocks elsewhere), written without a compressor: runs of one byte shrink 32768-fold, so a
// few kilobytes declare hundreds of megabytes, as a decompression bomb would.
template <class ByteAt>
std::vector<uint8_t> zstd_frame(uint64_t n, ByteAt byte_at) {
  constexpr uint64_t kBlock = 128u << 10;
  std::vector<uint8_t> z = {0x28, 0xB5, 0x2F, 0xFD, 0xE0};  // magic; single segment, 8-byte size
  for (int i = 0; i < 8; ++i) z.push_back(static_cast<uint8_t>(n >> (8 * i)));
  if (n == 0) z.insert(z.end(), {1, 0, 0});  // one empty last raw block
  for (uint64_t at = 0; at < n; at += kBlock) {
    const uint64_t len = n - at < kBlock ? n - at : kBlock;
    const uint8_t first = byte_at(at);
    bool run = true;
    for (uint64_t i = 1; i < len && run; ++i) run = byte_at(at + i) == first;
    const uint32_t header = static_cast<uint32_t>(len << 3) | (run ? 2u : 0u) |
                            (at + len == n ? 1u : 0u);  // size, type (1: RLE), last block
    for (int i = 0; i < 3; ++i) z.push_back(static_cast<uint8_t>(header >> (8 * i)));
    if (run) {
      z.push_back(first);
    } else {
      for (uint64_t i = 0; i < len; ++i) z.push_back(byte_at(at + i));
    }
  }
  return z;
}
inline std::vector<uint8_t> zstd_frame(const std::vector<uint8_t>& data) {
  return zstd_frame(data.size(), [&](uint64_t i) { return data[i]; });
}
inline std::vector<uint8_t> zstd_zeros(uint64_t n) {
  return zstd_frame(n, [](uint64_t) { return uint8_t{0}; });
}

// A cubin with one kernel `k` of parameters (ptr, int) and the globals the caller adds.
inline CubinBuilder basic_cubin() {
  CubinBuilder c;
  std::vector<uint8_t> info = CubinBuilder::kparam(0, 0, 8);
  std::vector<uint8_t> p1 = CubinBuilder::kparam(1, 8, 4);
  info.insert(info.end(), p1.begin(), p1.end());
  c.add({".nv.info.k", 0x70000000, info});
  return c;
}

}  // namespace rgpu::test
