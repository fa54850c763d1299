// Fuzz target: a whole fat binary as a client sends it in ModuleLoad (header, entries, ZSTD/LZ4
// decompression, every cubin's .nv.info and symbols, PTX), through fatbin::describe.  Anything but
// a result or a FatbinError is a bug.
#include "fatbin/fatbin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    rgpu::fatbin::describe(data, size);
  } catch (const rgpu::fatbin::FatbinError&) {
  }
  return 0;
}
