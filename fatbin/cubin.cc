// Cubin ELF images: kernel parameter layouts from `.nv.info.<kernel>` records (EIATTR_KPARAM_INFO
// and, beyond 4 KiB of parameters, EIATTR_KPARAM_INFO_V2), and global variables from the symbol
// table (__device__ in .nv.global / .nv.global.init, __constant__ in .nv.constant3), and the
// device memory those sections take, whatever their symbols say.
//
// The image comes from a client: every header field, offset, size, index and count is checked
// against the bytes present (a NOBITS section has none) and against the limits in fatbin.h before
// it is used.
#include <algorithm>
#include <cstring>
#include <string_view>

#include "fatbin/fatbin.h"

namespace rgpu::fatbin {
namespace {

constexpr uint16_t kEmCuda = 190;
constexpr uint8_t kFmtSval = 4;
constexpr uint8_t kAttrKparamInfo = 0x17;
constexpr uint8_t kAttrKparamInfoV2 = 0x45;
constexpr uint32_t kShtSymtab = 2;
constexpr uint32_t kShtNobits = 8;
constexpr uint64_t kEhdrSize = 64, kShdrSize = 64, kSymSize = 24;

// A little-endian field of the ELF header (within its first kEhdrSize bytes).
template <class T>
T at(const uint8_t* p, size_t o) {
  T v;
  memcpy(&v, p + o, sizeof v);
  return v;
}

class Elf {
 public:
  struct Section {
    std::string_view name;  // into the image's section name table
    uint32_t type = 0;
    uint64_t offset = 0, size = 0;  // size: declared; bytes in the file unless NOBITS
    uint32_t link = 0;
    uint64_t entsize = 0;
    bool nobits() const { return type == kShtNobits; }
  };

  Elf(const uint8_t* p, size_t n) : p_(p), n_(n) {
    check_elf_header(p, n);
    uint64_t shoff = u64(0x28);
    uint16_t shentsize = u16(0x3A), shnum = u16(0x3C), shstrndx = u16(0x3E);
    sections_.resize(shnum);
    for (uint32_t i = 0; i < shnum; ++i) {
      uint64_t h = shoff + uint64_t(i) * shentsize;
      Section& s = sections_[i];
      s.type = u32(h + 4);
      s.offset = u64(h + 24);
      s.size = u64(h + 32);
      s.link = u32(h + 40);
      s.entsize = u64(h + 56);
      names_.push_back(u32(h));
      if (!s.nobits() && (s.offset > n || s.size > n - s.offset))
        throw FatbinError("cubin section " + std::to_string(i) + " (offset " +
                          std::to_string(s.offset) + ", size " + std::to_string(s.size) +
                          ") runs past the image's " + std::to_string(n) + " bytes");
    }
    for (uint32_t i = 0; i < shnum; ++i) sections_[i].name = string_at(shstrndx, names_[i]);
  }

  const std::vector<Section>& sections() const { return sections_; }

  // The bytes of a section present in the file (refused for NOBITS: it has none).
  const uint8_t* bytes(const Section& s, const char* what) const {
    if (s.nobits())
      throw FatbinError(std::string(what) + " section " + std::string(s.name) +
                        " has no bytes in the image (NOBITS)");
    return p_ + s.offset;  // offset + size checked in the constructor
  }

  // A NUL-terminated name in string table `strtab`, at most kMaxNameBytes long.  Names may share
  // bytes (one a suffix of another), so the bytes scanned for names are budgeted: twice the image
  // and 1 MiB, far more than a real cubin's tables, bounds both the time and what callers copy.
  std::string_view string_at(uint32_t strtab, uint32_t off) const {
    if (strtab >= sections_.size())
      throw FatbinError("cubin string table index " + std::to_string(strtab) + " out of range");
    const Section& t = sections_[strtab];
    const uint8_t* base = bytes(t, "string table");
    if (off >= t.size)
      throw FatbinError("cubin string offset " + std::to_string(off) + " outside its table of " +
                        std::to_string(t.size) + " bytes");
    const char* s = reinterpret_cast<const char*>(base + off);
    size_t max = std::min<uint64_t>(t.size - off, kMaxNameBytes + 1);
    size_t len = strnlen(s, max);
    if (len == max) throw FatbinError("cubin name not terminated within its limit");
    if (len + 1 > name_budget_)
      throw FatbinError("cubin names add up to more than twice the image's size");
    name_budget_ -= len + 1;
    return std::string_view(s, len);
  }

  // Sections are read once each: the bytes of the sections parsed (which could all overlap) may
  // not add up to more than the image.
  void charge_read(const Section& s) const {
    if (s.size > read_budget_)
      throw FatbinError("cubin sections overlap: " + std::string(s.name) +
                        " is read past the image's size in total");
    read_budget_ -= s.size;
  }

  // Little-endian reads at `o`, bounds-checked.
  uint16_t u16(uint64_t o) const { return get<uint16_t>(o); }
  uint32_t u32(uint64_t o) const { return get<uint32_t>(o); }
  uint64_t u64(uint64_t o) const { return get<uint64_t>(o); }
  uint8_t u8(uint64_t o) const { return get<uint8_t>(o); }

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
  std::vector<Section> sections_;
  std::vector<uint32_t> names_;
  mutable uint64_t name_budget_ = 2 * uint64_t(n_) + (1u << 20);
  mutable uint64_t read_budget_ = n_;
};

KernelLayout parse_info(const Elf& elf, const Elf::Section& s) {
  elf.bytes(s, ".nv.info");  // refuses NOBITS; offset + size are within the image
  elf.charge_read(s);
  std::vector<std::pair<uint16_t, Param>> params;  // (ordinal, param)
  const uint64_t end = s.offset + s.size;
  uint64_t off = s.offset;
  while (end - off >= 4) {
    uint8_t fmt = elf.u8(off);
    uint8_t attr = elf.u8(off + 1);
    uint16_t val = elf.u16(off + 2);
    uint64_t len = fmt == kFmtSval ? val : 0;
    if (len > end - off - 4)
      throw FatbinError(".nv.info record of " + std::to_string(len) + " bytes runs past " +
                        std::string(s.name));
    uint64_t d = off + 4;
    if (fmt == kFmtSval && (attr == kAttrKparamInfo || attr == kAttrKparamInfoV2) && len >= 12) {
      uint16_t ordinal = elf.u16(d + 4);
      uint16_t offset = elf.u16(d + 6);
      uint32_t size = attr == kAttrKparamInfo ? elf.u32(d + 8) >> 18 : elf.u16(d + 8);
      if (uint64_t(offset) + size > kMaxParamBytes)
        throw FatbinError("kernel parameter beyond " + std::to_string(kMaxParamBytes) +
                          " bytes in " + std::string(s.name));
      params.push_back({ordinal, Param{offset, size}});
    }
    off = d + len;
  }
  std::sort(params.begin(), params.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  KernelLayout layout;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].first != i)
      throw FatbinError("kernel parameter ordinals are not 0..n-1 in " + std::string(s.name));
    layout.params.push_back(params[i].second);
  }
  return layout;
}

void parse_symbols(const Elf& elf, const Elf::Section& s, ModuleInfo& info, uint64_t& init_bytes,
                   uint64_t image_size) {
  if (s.entsize != kSymSize) throw FatbinError("unexpected symbol size in cubin");
  elf.bytes(s, "symbol table");  // refuses NOBITS; offset + size are within the image
  elf.charge_read(s);
  const auto& sections = elf.sections();
  for (uint64_t o = s.offset; s.offset + s.size - o >= kSymSize; o += kSymSize) {
    uint32_t name = elf.u32(o);
    uint8_t info_byte = elf.u8(o + 4);
    uint16_t shndx = elf.u16(o + 6);
    uint64_t value = elf.u64(o + 8), sym_size = elf.u64(o + 16);
    if ((info_byte & 0xf) != 1 || shndx == 0 || shndx >= sections.size()) continue;  // objects
    const Elf::Section& home = sections[shndx];
    bool constant = home.name.substr(0, 12) == ".nv.constant";
    bool global = home.name == ".nv.global" || home.name == ".nv.global.init";
    if (!constant && !global) continue;
    std::string var_name(elf.string_at(s.link, name));
    if (sym_size > kMaxGlobalBytes)
      throw FatbinError("global variable " + var_name + " of " + std::to_string(sym_size) +
                        " bytes exceeds the limit of " + std::to_string(kMaxGlobalBytes));
    if (value > home.size || sym_size > home.size - value)
      throw FatbinError("global variable " + var_name + " lies outside its section " +
                        std::string(home.name));
    if (info.globals.size() >= kMaxGlobals && !info.globals.count(var_name))
      throw FatbinError("cubin has more than " + std::to_string(kMaxGlobals) + " global variables");
    GlobalVar var;
    var.size = sym_size;
    var.constant = constant;
    if (!home.nobits()) {
      // Symbols may overlap: bound the copies by the image, not by each symbol alone.
      init_bytes += sym_size;
      if (init_bytes > image_size)
        throw FatbinError("initial values of the cubin's globals exceed the image's size");
      const uint8_t* d = elf.bytes(home, "global variable") + value;
      var.init.assign(d, d + sym_size);
    }
    info.globals[std::move(var_name)] = std::move(var);
  }
}

}  // namespace

void check_elf_header(const uint8_t* p, size_t n) {
  if (n < kEhdrSize || memcmp(p,
                              "\x7f"
                              "ELF",
                              4) != 0)
    throw FatbinError("cubin is not an ELF image");
  if (p[4] != 2 || p[5] != 1) throw FatbinError("cubin is not a 64-bit little-endian ELF");
  if (at<uint16_t>(p, 18) != kEmCuda) throw FatbinError("ELF image is not a CUDA cubin");
  const uint64_t shoff = at<uint64_t>(p, 0x28);
  const uint16_t shentsize = at<uint16_t>(p, 0x3A), shnum = at<uint16_t>(p, 0x3C),
                 shstrndx = at<uint16_t>(p, 0x3E);
  if (shentsize < kShdrSize)
    throw FatbinError("cubin section header size " + std::to_string(shentsize) + " < 64");
  if (shoff > n || uint64_t(shnum) * shentsize > n - shoff)
    throw FatbinError("cubin section header table (offset " + std::to_string(shoff) + ", " +
                      std::to_string(shnum) + " entries) runs past the image's " +
                      std::to_string(n) + " bytes");
  if (shstrndx >= shnum) throw FatbinError("cubin has no section name table");
}

ModuleInfo parse_cubin(const uint8_t* p, size_t size) {
  Elf elf(p, size);
  ModuleInfo info;
  static constexpr std::string_view prefix = ".nv.info.";
  for (const auto& s : elf.sections())
    if (s.name.substr(0, prefix.size()) == prefix && s.name.size() > prefix.size())
      info.kernels[std::string(s.name.substr(prefix.size()))] = parse_info(elf, s);
  uint64_t init_bytes = 0;
  for (const auto& s : elf.sections()) {
    if (s.type == kShtSymtab) parse_symbols(elf, s, info, init_bytes, size);
    // What the driver allocates for the module's variables, named by symbols or not.
    if (s.name == ".nv.global" || s.name == ".nv.global.init" ||
        s.name.substr(0, 12) == ".nv.constant")
      info.global_bytes =
          s.size > UINT64_MAX - info.global_bytes ? UINT64_MAX : info.global_bytes + s.size;
  }
  return info;
}

}  // namespace rgpu::fatbin
