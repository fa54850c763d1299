// PTX `.entry` parameter lists (for PTX-only fat binaries): scalars `.param .u32 name` have their
// natural size and alignment; aggregates are `.param .align N .b8 name[size]`; each offset is the
// previous end rounded up to the parameter's alignment.  The text comes from a client: numbers are
// bounded (kMaxParamBytes), alignments must be powers of two, and every search stays in the text.
#include <cctype>
#include <string>

#include "fatbin/fatbin.h"

namespace rgpu::fatbin {
namespace {

size_t skip_space(const std::string& s, size_t i) {
  while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

// A decimal number at `p` (after optional spaces), at most `limit`; throws otherwise.
uint64_t number(const std::string& s, size_t p, uint64_t limit, const char* what) {
  p = skip_space(s, p);
  if (p >= s.size() || !isdigit(static_cast<unsigned char>(s[p])))
    throw FatbinError(std::string("PTX parameter without a number for its ") + what);
  uint64_t v = 0;
  for (; p < s.size() && isdigit(static_cast<unsigned char>(s[p])); ++p) {
    v = v * 10 + static_cast<uint64_t>(s[p] - '0');
    if (v > limit)
      throw FatbinError(std::string("PTX parameter ") + what + " beyond " + std::to_string(limit));
  }
  return v;
}

uint32_t scalar_size(const std::string& type) {
  // .u8 .s8 .b8 .u16 ... .f64 .pred
  size_t digits = type.find_first_of("0123456789");
  if (digits == std::string::npos) return 0;
  uint64_t bits = number(type, digits, 1024, "type width");
  if (bits % 8 != 0) return 0;
  return static_cast<uint32_t>(bits / 8);
}

Param parse_param(const std::string& decl, uint32_t& cursor) {
  // decl: ".param .align 16 .b8 name[16]" or ".param .u64 name" (with optional .ptr attributes).
  uint32_t align = 0;
  size_t a = decl.find(".align");
  if (a != std::string::npos)
    align = static_cast<uint32_t>(number(decl, a + 6, kMaxParamBytes, "alignment"));
  size_t bracket = decl.find('[');
  std::string type;
  for (size_t i = 0; i < decl.size();) {
    i = skip_space(decl, i);
    size_t j = i;
    while (j < decl.size() && !isspace(static_cast<unsigned char>(decl[j]))) ++j;
    std::string tok = decl.substr(i, j - i);
    if (tok.size() > 1 && tok[0] == '.' && tok != ".param" && tok != ".align" &&
        tok.find_first_of("0123456789") != std::string::npos && type.empty() &&
        tok.rfind(".ptr", 0) != 0)
      type = tok;
    i = j;
  }
  uint32_t elem = scalar_size(type);
  if (elem == 0) throw FatbinError("unrecognised PTX parameter: " + decl.substr(0, 200));
  uint64_t size = elem;
  if (bracket != std::string::npos)
    size = elem * number(decl, bracket + 1, kMaxParamBytes, "array length");
  if (align == 0) align = elem;
  if ((align & (align - 1)) != 0)
    throw FatbinError("PTX parameter alignment " + std::to_string(align) +
                      " is not a power of two");
  uint64_t offset = (uint64_t(cursor) + align - 1) / align * align;
  if (offset + size > kMaxParamBytes)
    throw FatbinError("PTX parameters beyond " + std::to_string(kMaxParamBytes) + " bytes");
  cursor = static_cast<uint32_t>(offset + size);
  return Param{static_cast<uint32_t>(offset), static_cast<uint32_t>(size)};
}

}  // namespace

std::map<std::string, KernelLayout> parse_ptx(const std::string& text) {
  std::map<std::string, KernelLayout> out;
  size_t pos = 0;
  while ((pos = text.find(".entry", pos)) != std::string::npos) {
    pos += 6;
    if (pos >= text.size() || !isspace(static_cast<unsigned char>(text[pos]))) continue;
    size_t name_start = skip_space(text, pos);
    size_t name_end = name_start;
    while (name_end < text.size() && (isalnum(static_cast<unsigned char>(text[name_end])) ||
                                      text[name_end] == '_' || text[name_end] == '$'))
      ++name_end;
    std::string name = text.substr(name_start, name_end - name_start);
    if (name.empty()) continue;
    if (name.size() > kMaxNameBytes) throw FatbinError("PTX kernel name beyond its limit");
    size_t open = skip_space(text, name_end);
    KernelLayout layout;
    if (open < text.size() && text[open] == '(') {
      size_t close = text.find(')', open);
      if (close == std::string::npos) throw FatbinError("unterminated PTX parameter list");
      std::string list = text.substr(open + 1, close - open - 1);
      uint32_t cursor = 0;
      size_t start = 0;
      while (start < list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        std::string decl = list.substr(start, comma - start);
        if (decl.find(".param") != std::string::npos)
          layout.params.push_back(parse_param(decl, cursor));
        start = comma + 1;
      }
      pos = close;
    }
    out[name] = std::move(layout);
  }
  return out;
}

}  // namespace rgpu::fatbin
