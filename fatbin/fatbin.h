// Fat binaries as nvcc embeds them (see shared/reference/cuda-abi.md §3): the wrapper
// (__fatBinC_Wrapper_t, magic 0x466243B1), the fatbin header (magic 0xBA55ED50) and its entries
// (cubin ELF or PTX, possibly ZSTD- or LZ4-compressed), and what rgpu learns from them: every
// kernel's parameter layout and every global variable.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rgpu::fatbin {

struct FatbinError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Limits on what an image may make rgpu do.  Every image a client sends is parsed by the server, so
// every length, size, offset, index and count read from one is checked against the bytes present
// and against these limits before it is used; a violation is a FatbinError naming what was wrong.
constexpr size_t kMaxEntries = 1024;               // entries of one fatbin
constexpr uint64_t kMaxEntryBytes = 256ull << 20;  // one entry, decompressed
constexpr uint64_t kMaxImageBytes = 1ull << 30;    // all entries of one fatbin, decompressed
constexpr uint64_t kMaxGlobalBytes = 16ull << 30;  // one __device__ / __constant__ variable
constexpr size_t kMaxGlobals = 65536;              // variables of one cubin
constexpr size_t kMaxNameBytes = 64u << 10;        // a section, kernel or variable name
constexpr uint32_t kMaxParamBytes = 64u << 10;     // a kernel's parameter buffer (CUDA: 32764)

// What a server lets one client image decompress to (rgpud --max-image-mb sets the floor): the
// bytes every compressed entry declares, together, at most max(floor, kMaxExpansion x the image's
// stored bytes), the latter capped at kMaxImageBytes.  Measured (docs/architecture.md, "Module
// images"): nvcc's code entries compress 3-10x, and the ~4,800 fat binaries of CUDA 13's cuBLAS,
// cuBLASLt, cuSPARSE, cuSOLVER, cuRAND, cuDNN and NCCL 8.6-10.2x overall, 134x at worst (images
// far below the floor), NCCL's largest image declaring 590 MB in all: none comes near.  Zeros
// compress 10,000x (an initialized 16 MiB __device__ table is a 2 KB entry), so no ratio alone
// tells a bomb from data: the floor admits such tables up to its size.
constexpr uint64_t kDefaultImageFloor = 64ull << 20;
constexpr uint64_t kMaxExpansion = 64;
uint64_t decompression_budget(uint64_t image_bytes, uint64_t floor = kDefaultImageFloor);

constexpr uint32_t kWrapperMagic = 0x466243B1;
constexpr uint32_t kFatbinMagic = 0xBA55ED50;

enum class EntryKind : uint16_t { Ptx = 1, Elf = 2 };
constexpr uint64_t kEntryFlagLz4 = 0x2000;   // an entry's flags: LZ4-compressed
constexpr uint64_t kEntryFlagZstd = 0x8000;  // ZSTD-compressed

struct Entry {
  EntryKind kind = EntryKind::Elf;
  uint32_t arch = 0;  // SM number (90 for sm_90 / compute_90)
  uint64_t flags = 0;
  std::vector<uint8_t> data;  // decompressed: an ELF image, or PTX text without trailing NULs
};

// An entry's header, read (and checked against the image and the limits above) without
// decompressing anything.
struct EntryRef {
  EntryKind kind = EntryKind::Elf;
  uint32_t arch = 0;
  uint64_t flags = 0;
  size_t offset = 0;    // of its data in the fatbin
  uint64_t stored = 0;  // bytes of data in the image (compressed or not)
  uint64_t size = 0;    // bytes once decompressed (declared), or `stored`
  bool compressed = false;
};

// What describing an image costs, from its headers alone: every entry of a fat binary, those
// that will be described (`chosen`) and the decompressed bytes they declare.
struct ImagePlan {
  enum class Form { Fatbin, Cubin, Ptx } form = Form::Fatbin;
  std::vector<EntryRef> entries;  // of a fat binary; PTX and ELF entries only
  std::vector<size_t> chosen;     // indices into entries
  uint64_t declared = 0;          // decompressed bytes all compressed entries declare together
  uint64_t chosen_bytes = 0;      // bytes the chosen entries hold (decompressed)
  bool decompresses() const;      // a chosen entry is compressed
};

// Plans describing the image `p` for a GPU of compute capability `arch` (major * 10 + minor):
// only the entry that GPU's driver loads is chosen, the newest cubin of its major version not
// newer than it (else the newest cubin not newer, which describes the same kernels and
// variables as the PTX the driver would compile), else the newest PTX not newer; with `arch` 0,
// or when no entry fits, every entry.  Throws FatbinError on malformed headers.
ImagePlan plan_image(const uint8_t* p, size_t size, uint32_t arch = 0);

// Size in bytes of the fatbin starting at `p` (header + entries), after checking its header.
// `available` bounds the read; throws FatbinError.
size_t fatbin_size(const uint8_t* p, size_t available);

// What a driver checks when an image is loaded, without decompressing or parsing its contents:
// a fat binary's header and entry headers (at most kMaxEntries), a cubin's ELF header and section
// header table, PTX text's terminating NUL and .version/.target directives.  `size` is the image's
// (image_size for one without a length).  Throws FatbinError naming what is wrong; the rest of the
// image is checked by whoever parses it (describe_image).
void check_header(const uint8_t* p, size_t size);

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
  // Device memory the module's variables take when loaded: its cubin's .nv.global,
  // .nv.global.init and .nv.constant* sections (the largest of several cubins).  Saturates.
  uint64_t global_bytes = 0;
  // Bytes of code described: the chosen entries decompressed (a cubin or PTX image: its size).
  uint64_t code_bytes = 0;
};

// A cubin's ELF header and section header table: a 64-bit little-endian CUDA ELF whose table
// lies within its `size` bytes.  Throws FatbinError.
void check_elf_header(const uint8_t* p, size_t size);
// PTX text as cuLibraryLoadData reads it: NUL-terminated, nothing but NULs after it, with
// .version and .target directives.  Throws FatbinError.
std::string_view ptx_text(const uint8_t* p, size_t size);
// Kernels and globals of one cubin ELF image.  Throws FatbinError on malformed input.
ModuleInfo parse_cubin(const uint8_t* p, size_t size);
// Kernel layouts from PTX `.entry` parameter lists.  Throws FatbinError on malformed input.
std::map<std::string, KernelLayout> parse_ptx(const std::string& text);
// What a whole fatbin says: the kernels and globals of its cubins, with PTX filling in kernels
// no cubin describes.  Throws FatbinError on malformed input (never anything else for bad bytes).
ModuleInfo describe(const uint8_t* p, size_t size);
// Any image cuLibraryLoadData takes: a fat binary (describe), a cubin ELF (parse_cubin) or
// NUL-terminated PTX text (parse_ptx; PTX globals are not described).  Throws FatbinError.
ModuleInfo describe_image(const uint8_t* p, size_t size);
// The same for the entries `plan` (plan_image of this image) chose: only those are decompressed.
ModuleInfo describe_image(const uint8_t* p, size_t size, const ImagePlan& plan);

}  // namespace rgpu::fatbin
