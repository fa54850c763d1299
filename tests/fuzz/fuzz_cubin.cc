// Fuzz target: one cubin ELF image (section table, .nv.info records, symbol and string tables,
// globals), through fatbin::parse_cubin.  Anything but a result or a FatbinError is a bug.
#include <cstdlib>

#include "fatbin/fatbin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    rgpu::fatbin::ModuleInfo info = rgpu::fatbin::parse_cubin(data, size);
    for (auto& [name, var] : info.globals)
      if (var.size > rgpu::fatbin::kMaxGlobalBytes || var.init.size() > var.size) abort();
    for (auto& [name, layout] : info.kernels)
      for (auto& p : layout.params)
        if (uint64_t(p.offset) + p.size > rgpu::fatbin::kMaxParamBytes) abort();
  } catch (const rgpu::fatbin::FatbinError&) {
  }
  return 0;
}
