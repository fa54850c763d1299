// Cubin ELF images: kernel parameter layouts from `.nv.info.<kernel>` records (EIATTR_KPARAM_INFO
// and, beyond 4 KiB of parameters, EIATTR_KPARAM_INFO_V2), and global variables from the symbol
// table (__device__ in .nv.global / .nv.global.init, __constant__ in .nv.constant3).
#include <algorithm>
#include <cstring>

#include "fatbin/fatbin.h"

namespace rgpu::fatbin {
namespace {

constexpr uint16_t kEmCuda = 190;
constexpr uint8_t kFmtSval = 4;
constexpr uint8_t kAttrKparamInfo = 0x17;
constexpr uint8_t kAttrKparamInfoV2 = 0x45;
constexpr uint32_t kShtSymtab = 2;
constexpr uint32_t kShtNobits = 8;

class Elf {
 public:
  Elf(const uint8_t* p, size_t n) : p_(p), n_(n) {
    if (n < 64 || memcmp(p,
                         "\x7f"
                         "ELF",
                         4) != 0)
      throw FatbinError("cubin is not an ELF image");
    if (p[4] != 2 || p[5] != 1) throw FatbinError("cubin is not a 64-bit little-endian ELF");
    if (u16(18) != kEmCuda) throw FatbinError("ELF image is not a CUDA cubin");
    shoff_ = u64(0x28);
    shentsize_ = u16(0x3A);
    shnum_ = u16(0x3C);
    shstrndx_ = u16(0x3E);
    if (shentsize_ < 64 || shoff_ > n || uint64_t(shnum_) * shentsize_ > n - shoff_)
      throw FatbinError("cubin section table out of bounds");
    if (shstrndx_ >= shnum_) throw FatbinError("cubin has no section name table");
  }
  struct Section {
    std::string name;
    uint32_t type;
    uint64_t offset, size;
    uint32_t link, info;
    uint64_t entsize;
  };
  Section section(uint32_t i) const {
    if (i >= shnum_) throw FatbinError("section index out of range");
    uint64_t h = shoff_ + uint64_t(i) * shentsize_;
    Section s;
    s.type = u32(h + 4);
    s.offset = u64(h + 24);
    s.size = u64(h + 32);
    s.link = u32(h + 40);
    s.info = u32(h + 44);
    s.entsize = u64(h + 56);
    if (s.type != kShtNobits && (s.offset > n_ || s.size > n_ - s.offset))
      throw FatbinError("cubin section out of bounds");
    s.name = string_at(shstrndx_, u32(h));
    return s;
  }
  std::string string_at(uint32_t strtab, uint32_t off) const {
    uint64_t h = shoff_ + uint64_t(strtab) * shentsize_;
    uint64_t base = u64(h + 24), size = u64(h + 32);
    if (base > n_ || size > n_ - base || off >= size)
      throw FatbinError("bad string offset in cubin");
    const char* s = reinterpret_cast<const char*>(p_ + base + off);
    return std::string(s, strnlen(s, size - off));
  }
  uint32_t count() const { return shnum_; }
  const uint8_t* at(uint64_t off) const { return p_ + off; }
  uint16_t u16(uint64_t o) const { return get<uint16_t>(o); }
  uint32_t u32(uint64_t o) const { return get<uint32_t>(o); }
  uint64_t u64(uint64_t o) const { return get<uint64_t>(o); }

 private:
  template <class T>
  T get(uint64_t o) const {
    if (o > n_ || sizeof(T) > n_ - o) throw FatbinError("cubin read out of bounds");
    T v;
    memcpy(&v, p_ + o, sizeof v);
    return v;
  }
  const uint8_t* p_;
  size_t n_;
  uint64_t shoff_;
  uint16_t shentsize_, shnum_, shstrndx_;
};

KernelLayout parse_info(const Elf& elf, const Elf::Section& s) {
  std::vector<std::pair<uint16_t, Param>> params;  // (ordinal, param)
  uint64_t off = s.offset, end = s.offset + s.size;
  while (off + 4 <= end) {
    uint8_t fmt = elf.at(off)[0];
    uint8_t attr = elf.at(off)[1];
    uint16_t val = elf.u16(off + 2);
    uint64_t len = fmt == kFmtSval ? val : 0;
    if (len > end - off - 4) throw FatbinError("truncated .nv.info record");
    uint64_t d = off + 4;
    if (fmt == kFmtSval && attr == kAttrKparamInfo && len >= 12) {
      uint16_t ordinal = elf.u16(d + 4);
      uint16_t offset = elf.u16(d + 6);
      uint32_t word = elf.u32(d + 8);
      params.push_back({ordinal, Param{offset, word >> 18}});
    } else if (fmt == kFmtSval && attr == kAttrKparamInfoV2 && len >= 12) {
      uint16_t ordinal = elf.u16(d + 4);
      uint16_t offset = elf.u16(d + 6);
      uint16_t size = elf.u16(d + 8);
      params.push_back({ordinal, Param{offset, size}});
    }
    off = d + len;
  }
  std::sort(params.begin(), params.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  KernelLayout layout;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].first != i) throw FatbinError("kernel parameter ordinals are not 0..n-1");
    layout.params.push_back(params[i].second);
  }
  return layout;
}

}  // namespace

ModuleInfo parse_cubin(const uint8_t* p, size_t size) {
  Elf elf(p, size);
  ModuleInfo info;
  std::vector<Elf::Section> sections;
  for (uint32_t i = 0; i < elf.count(); ++i) sections.push_back(elf.section(i));
  for (const auto& s : sections) {
    static const std::string prefix = ".nv.info.";
    if (s.name.rfind(prefix, 0) == 0 && s.name.size() > prefix.size())
      info.kernels[s.name.substr(prefix.size())] = parse_info(elf, s);
  }
  for (const auto& s : sections) {
    if (s.type != kShtSymtab) continue;
    if (s.entsize != 24) throw FatbinError("unexpected symbol size in cubin");
    for (uint64_t o = s.offset; o + 24 <= s.offset + s.size; o += 24) {
      uint32_t name = elf.u32(o);
      uint8_t info_byte = elf.at(o + 4)[0];
      uint16_t shndx = elf.u16(o + 6);
      uint64_t value = elf.u64(o + 8), sym_size = elf.u64(o + 16);
      if ((info_byte & 0xf) != 1 || shndx == 0 || shndx >= sections.size()) continue;  // objects
      const Elf::Section& home = sections[shndx];
      bool constant = home.name.rfind(".nv.constant", 0) == 0;
      bool global = home.name == ".nv.global" || home.name == ".nv.global.init";
      if (!constant && !global) continue;
      GlobalVar var;
      var.size = sym_size;
      var.constant = constant;
      if (home.type != kShtNobits) {
        if (value > home.size || sym_size > home.size - value)
          throw FatbinError("global variable outside its section");
        const uint8_t* d = elf.at(home.offset + value);
        var.init.assign(d, d + sym_size);
      }
      info.globals[elf.string_at(s.link, name)] = std::move(var);
    }
  }
  return info;
}

}  // namespace rgpu::fatbin
