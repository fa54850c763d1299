// PTX `.entry` parameter lists (for PTX-only fat binaries): scalars `.param .u32 name` have their
// natural size and alignment; aggregates are `.param .align N .b8 name[size]`; each offset is the
// previous end rounded up to the parameter's alignment.
#include <cctype>
#include <cstdlib>

#include "fatbin/fatbin.h"

namespace rgpu::fatbin {
namespace {

size_t skip_space(const std::string& s, size_t i) {
  while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

uint32_t scalar_size(const std::string& type) {
  // .u8 .s8 .b8 .u16 ... .f64 .pred
  size_t digits = type.find_first_of("0123456789");
  if (digits == std::string::npos) return 0;
  return static_cast<uint32_t>(atoi(type.c_str() + digits) / 8);
}

Param parse_param(const std::string& decl, uint32_t& cursor) {
  // decl: ".param .align 16 .b8 name[16]" or ".param .u64 name" (with optional .ptr attributes).
  uint32_t align = 0, size = 0;
  size_t a = decl.find(".align");
  if (a != std::string::npos) align = static_cast<uint32_t>(atoi(decl.c_str() + a + 6));
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
  if (elem == 0) throw FatbinError("unrecognised PTX parameter: " + decl);
  size = elem;
  if (bracket != std::string::npos)
    size = elem * static_cast<uint32_t>(atoi(decl.c_str() + bracket + 1));
  if (align == 0) align = elem;
  cursor = (cursor + align - 1) / align * align;
  Param p{cursor, size};
  cursor += size;
  return p;
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
