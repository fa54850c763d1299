// Fuzz target: PTX text (`.entry` parameter lists), through fatbin::parse_ptx.  Layouts it returns
// stay within the parameter limit.
#include <cstdlib>
#include <string>

#include "fatbin/fatbin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto kernels = rgpu::fatbin::parse_ptx(std::string(reinterpret_cast<const char*>(data), size));
    for (auto& [name, layout] : kernels)
      for (auto& p : layout.params)
        if (uint64_t(p.offset) + p.size > rgpu::fatbin::kMaxParamBytes) abort();
  } catch (const rgpu::fatbin::FatbinError&) {
  }
  return 0;
}
