// Fat binaries as nvcc embeds them (see shared/reference/cuda-abi.md §3): the wrapper
// (__fatBinC_Wrapper_t, magic 0x466243B1), the fatbin header (magic 0xBA55ED50) and its entries
// (cubin ELF or PTX, possibly ZSTD- or LZ4-compressed), and what rgpu learns from them: every
// kernel's parameter layout and every global variable.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace rgpu::fatbin {

struct FatbinError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr uint32_t kWrapperMagic = 0x466243B1;
constexpr uint32_t kFatbinMagic = 0xBA55ED50;

enum class EntryKind : uint16_t { Ptx = 1, Elf = 2 };

struct Entry {
  EntryKind kind = EntryKind::Elf;
  uint32_t arch = 0;  // SM number (90 for sm_90 / compute_90)
  uint64_t flags = 0;
  std::vector<uint8_t> data;  // decompressed: an ELF image, or PTX text without trailing NULs
};

// Size in bytes of the fatbin starting at `p` (header + entries), after checking its header.
// `available` bounds the read; throws FatbinError.
size_t fatbin_size(const uint8_t* p, size_t available);

// The fatbin a wrapper points at (nvcc's registration argument).  Throws FatbinError.
struct WrappedFatbin {
  const uint8_t* data = nullptr;
  size_t size = 0;
};
WrappedFatbin unwrap(const void* wrapper);

// Every entry of one fatbin, decompressed.  Throws FatbinError on malformed input.
std::vector<Entry> parse_entries(const uint8_t* p, size_t size);

struct Param {
  uint32_t offset = 0;
  uint32_t size = 0;
  bool operator==(const Param&) const = default;
};
struct KernelLayout {
  std::vector<Param> params;
  bool operator==(const KernelLayout&) const = default;
};

struct GlobalVar {
  uint64_t size = 0;
  bool constant = false;      // __constant__
  std::vector<uint8_t> init;  // initial bytes (empty: zero-filled)
};

struct ModuleInfo {
  std::map<std::string, KernelLayout> kernels;  // by mangled name
  std::map<std::string, GlobalVar> globals;     // by name
};

// Kernels and globals of one cubin ELF image.
ModuleInfo parse_cubin(const uint8_t* p, size_t size);
// Kernel layouts from PTX `.entry` parameter lists.
std::map<std::string, KernelLayout> parse_ptx(const std::string& text);
// What a whole fatbin says: the kernels and globals of its cubins, with PTX filling in kernels
// no cubin describes.
ModuleInfo describe(const uint8_t* p, size_t size);

}  // namespace rgpu::fatbin
