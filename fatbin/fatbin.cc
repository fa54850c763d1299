#include "fatbin/fatbin.h"

#include <lz4.h>
#include <lz4frame.h>
#include <zstd.h>

#include <cstring>

namespace rgpu::fatbin {
namespace {

constexpr uint64_t kFlagLz4 = 0x2000;
constexpr uint64_t kFlagZstd = 0x8000;
constexpr size_t kMaxDecompressed = 1ull << 31;  // refuse absurd sizes from a malformed header

template <class T>
T rd(const uint8_t* p) {
  T v;
  memcpy(&v, p, sizeof v);  // fatbins are little-endian, like every host rgpu runs on
  return v;
}

std::vector<uint8_t> decompress(const uint8_t* src, size_t n, uint64_t flags, uint64_t out_size) {
  if (out_size == 0 || out_size > kMaxDecompressed)
    throw FatbinError("compressed fatbin entry with an implausible size");
  std::vector<uint8_t> out(out_size);
  if (flags & kFlagZstd) {
    size_t r = ZSTD_decompress(out.data(), out.size(), src, n);
    if (ZSTD_isError(r)) throw FatbinError(std::string("zstd: ") + ZSTD_getErrorName(r));
    out.resize(r);
    return out;
  }
  if (n >= 4 && rd<uint32_t>(src) == 0x184D2204) {  // an LZ4 frame
    LZ4F_dctx* ctx = nullptr;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&ctx, LZ4F_VERSION)))
      throw FatbinError("lz4: cannot create a context");
    size_t dst_len = out.size(), src_len = n;
    size_t r = LZ4F_decompress(ctx, out.data(), &dst_len, src, &src_len, nullptr);
    LZ4F_freeDecompressionContext(ctx);
    if (LZ4F_isError(r)) throw FatbinError(std::string("lz4: ") + LZ4F_getErrorName(r));
    out.resize(dst_len);
    return out;
  }
  int r =
      LZ4_decompress_safe(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(out.data()),
                          static_cast<int>(n), static_cast<int>(out.size()));
  if (r < 0) throw FatbinError("lz4: corrupt block");
  out.resize(static_cast<size_t>(r));
  return out;
}

}  // namespace

std::vector<Entry> parse_entries(const uint8_t* p, size_t size) {
  size_t total = fatbin_size(p, size);
  uint16_t header = rd<uint16_t>(p + 6);
  std::vector<Entry> out;
  size_t off = header;
  while (off < total) {
    if (total - off < 64) throw FatbinError("truncated fatbin entry header");
    const uint8_t* e = p + off;
    uint16_t kind = rd<uint16_t>(e);
    uint32_t eh = rd<uint32_t>(e + 4);
    uint64_t payload = rd<uint32_t>(e + 8);
    uint32_t compressed = rd<uint32_t>(e + 16);
    uint32_t arch = rd<uint32_t>(e + 28);
    uint64_t flags = rd<uint64_t>(e + 40);
    uint64_t uncompressed = rd<uint64_t>(e + 56);
    if (eh < 64 || eh > total - off || payload > total - off - eh)
      throw FatbinError("fatbin entry runs past the end of the fatbin");
    const uint8_t* data = e + eh;
    if (kind == static_cast<uint16_t>(EntryKind::Ptx) ||
        kind == static_cast<uint16_t>(EntryKind::Elf)) {
      Entry entry;
      entry.kind = static_cast<EntryKind>(kind);
      entry.arch = arch;
      entry.flags = flags;
      if (flags & (kFlagLz4 | kFlagZstd)) {
        if (compressed > payload) throw FatbinError("compressed size exceeds the entry");
        entry.data = decompress(data, compressed, flags, uncompressed);
      } else {
        entry.data.assign(data, data + payload);
      }
      if (entry.kind == EntryKind::Ptx)
        while (!entry.data.empty() && entry.data.back() == 0) entry.data.pop_back();
      out.push_back(std::move(entry));
    }
    off += eh + payload;
  }
  return out;
}

ModuleInfo describe(const uint8_t* p, size_t size) {
  ModuleInfo info;
  std::vector<Entry> entries = parse_entries(p, size);
  for (const Entry& e : entries) {
    if (e.kind != EntryKind::Elf) continue;
    ModuleInfo c = parse_cubin(e.data.data(), e.data.size());
    for (auto& [name, layout] : c.kernels) info.kernels.emplace(name, layout);
    for (auto& [name, var] : c.globals) info.globals.emplace(name, var);
  }
  for (const Entry& e : entries) {
    if (e.kind != EntryKind::Ptx) continue;
    auto kernels = parse_ptx(std::string(e.data.begin(), e.data.end()));
    for (auto& [name, layout] : kernels) info.kernels.emplace(name, layout);
  }
  return info;
}

}  // namespace rgpu::fatbin
