// Fatbin entries: headers checked against the bytes present, at most kMaxEntries of them, and
// compressed entries (ZSTD, LZ4 frame or block) decompressed into output that grows with what
// the decompressor actually produces, never beyond the declared size, itself capped per entry
// (kMaxEntryBytes) and per image (kMaxImageBytes).  The declared size must be what comes out.
// Headers are read first (plan_image), so a caller knows what an image will cost before anything
// is decompressed, and only the entry a GPU would load needs to be.
#include "fatbin/fatbin.h"

#include <lz4.h>
#include <lz4frame.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace rgpu::fatbin {
namespace {

constexpr uint64_t kFlagLz4 = kEntryFlagLz4;
constexpr uint64_t kFlagZstd = kEntryFlagZstd;
constexpr uint64_t kEntryHeader = 64;
constexpr uint64_t kLz4MaxRatio = 255;  // an LZ4 block cannot expand more than this
constexpr size_t kFirstChunk = 1u << 20;

template <class T>
T rd(const uint8_t* p) {
  T v;
  memcpy(&v, p, sizeof v);  // fatbins are little-endian, like every host rgpu runs on
  return v;
}

// Output that grows (doubling) as the decompressor produces it, up to `limit` bytes, so memory
// follows what the compressed bytes really hold rather than what a header claims.
class Output {
 public:
  explicit Output(uint64_t limit) : limit_(limit) {}
  // Room for at least one more byte; false when `limit` bytes are already there.
  bool grow() {
    if (buf_.size() >= limit_) return false;
    size_t next = buf_.empty() ? kFirstChunk : buf_.size() * 2;
    buf_.resize(static_cast<size_t>(std::min<uint64_t>(next, limit_)));
    return true;
  }
  uint8_t* free_space() { return buf_.data() + used_; }
  size_t free_bytes() const { return buf_.size() - used_; }
  void produced(size_t n) { used_ += n; }
  size_t used() const { return used_; }
  std::vector<uint8_t> take() {
    buf_.resize(used_);
    return std::move(buf_);
  }

 private:
  uint64_t limit_;
  std::vector<uint8_t> buf_;
  size_t used_ = 0;
};

std::vector<uint8_t> zstd(const uint8_t* src, size_t n, uint64_t out_size) {
  unsigned long long declared = ZSTD_getFrameContentSize(src, n);
  if (declared == ZSTD_CONTENTSIZE_ERROR) throw FatbinError("zstd: not a zstd frame");
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != out_size)
    throw FatbinError("zstd frame holds " + std::to_string(declared) +
                      " bytes but the entry declares " + std::to_string(out_size));
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!ctx) throw FatbinError("zstd: cannot create a context");
  ZSTD_DCtx_setParameter(ctx.get(), ZSTD_d_windowLogMax, 28);  // 256 MiB = kMaxEntryBytes
  Output out(out_size + 1);  // one byte more shows a frame longer than declared
  ZSTD_inBuffer in{src, n, 0};
  size_t r = 1;
  while (r != 0) {
    if (out.free_bytes() == 0 && !out.grow())
      throw FatbinError("zstd entry decompresses to more than its declared " +
                        std::to_string(out_size) + " bytes");
    ZSTD_outBuffer o{out.free_space(), out.free_bytes(), 0};
    size_t before_in = in.pos;
    r = ZSTD_decompressStream(ctx.get(), &o, &in);
    if (ZSTD_isError(r)) throw FatbinError(std::string("zstd: ") + ZSTD_getErrorName(r));
    out.produced(o.pos);
    if (r != 0 && o.pos == 0 && before_in == in.pos) throw FatbinError("zstd: truncated frame");
  }
  if (out.used() != out_size)
    throw FatbinError("zstd entry decompresses to " + std::to_string(out.used()) +
                      " bytes but declares " + std::to_string(out_size));
  return out.take();
}

std::vector<uint8_t> lz4_frame(const uint8_t* src, size_t n, uint64_t out_size) {
  LZ4F_dctx* raw = nullptr;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&raw, LZ4F_VERSION)))
    throw FatbinError("lz4: cannot create a context");
  std::unique_ptr<LZ4F_dctx, size_t (*)(LZ4F_dctx*)> ctx(raw, LZ4F_freeDecompressionContext);
  Output out(out_size + 1);  // one byte more shows a frame longer than declared
  size_t pos = 0, r = 1;
  while (r != 0) {
    if (out.free_bytes() == 0 && !out.grow())
      throw FatbinError("lz4 entry decompresses to more than its declared " +
                        std::to_string(out_size) + " bytes");
    size_t dst_len = out.free_bytes(), src_len = n - pos;
    r = LZ4F_decompress(ctx.get(), out.free_space(), &dst_len, src + pos, &src_len, nullptr);
    if (LZ4F_isError(r)) throw FatbinError(std::string("lz4: ") + LZ4F_getErrorName(r));
    pos += src_len;
    out.produced(dst_len);
    if (r != 0 && dst_len == 0 && src_len == 0) throw FatbinError("lz4: truncated frame");
  }
  if (out.used() != out_size)
    throw FatbinError("lz4 entry decompresses to " + std::to_string(out.used()) +
                      " bytes but declares " + std::to_string(out_size));
  return out.take();
}

std::vector<uint8_t> lz4_block(const uint8_t* src, size_t n, uint64_t out_size) {
  if (n > INT32_MAX || out_size > INT32_MAX || out_size > n * kLz4MaxRatio + 64)
    throw FatbinError("lz4 block of " + std::to_string(n) + " bytes cannot hold the declared " +
                      std::to_string(out_size));
  std::vector<uint8_t> out(out_size);
  int r =
      LZ4_decompress_safe(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(out.data()),
                          static_cast<int>(n), static_cast<int>(out.size()));
  if (r < 0) throw FatbinError("lz4: corrupt block");
  if (static_cast<uint64_t>(r) != out_size)
    throw FatbinError("lz4 entry decompresses to " + std::to_string(r) + " bytes but declares " +
                      std::to_string(out_size));
  return out;
}

// `out_size`: the declared size, already checked against kMaxEntryBytes.
std::vector<uint8_t> decompress(const uint8_t* src, size_t n, uint64_t flags, uint64_t out_size) {
  if (flags & kFlagZstd) return zstd(src, n, out_size);
  if (n >= 4 && rd<uint32_t>(src) == 0x184D2204) return lz4_frame(src, n, out_size);
  return lz4_block(src, n, out_size);
}

// Every PTX and ELF entry's header, checked: within the fatbin, at most kMaxEntries entries, a
// compressed one declaring at most kMaxEntryBytes and all together at most kMaxImageBytes.
std::vector<EntryRef> scan_entries(const uint8_t* p, size_t size, uint64_t& declared) {
  size_t total = fatbin_size(p, size);
  uint16_t header = rd<uint16_t>(p + 6);
  std::vector<EntryRef> out;
  declared = 0;
  size_t off = header, count = 0;
  while (off < total) {
    if (total - off < kEntryHeader) throw FatbinError("truncated fatbin entry header");
    if (++count > kMaxEntries)
      throw FatbinError("fatbin has more than " + std::to_string(kMaxEntries) + " entries");
    const uint8_t* e = p + off;
    uint16_t kind = rd<uint16_t>(e);
    uint32_t eh = rd<uint32_t>(e + 4);
    uint64_t payload = rd<uint32_t>(e + 8);
    uint32_t compressed = rd<uint32_t>(e + 16);
    uint64_t flags = rd<uint64_t>(e + 40);
    uint64_t uncompressed = rd<uint64_t>(e + 56);
    if (eh < kEntryHeader || eh > total - off || payload > total - off - eh)
      throw FatbinError("fatbin entry runs past the end of the fatbin");
    if (kind == static_cast<uint16_t>(EntryKind::Ptx) ||
        kind == static_cast<uint16_t>(EntryKind::Elf)) {
      EntryRef r;
      r.kind = static_cast<EntryKind>(kind);
      r.arch = rd<uint32_t>(e + 28);
      r.flags = flags;
      r.offset = off + eh;
      r.compressed = (flags & (kFlagLz4 | kFlagZstd)) != 0;
      r.stored = r.size = payload;
      if (r.compressed) {
        if (compressed > payload) throw FatbinError("compressed size exceeds the entry");
        if (uncompressed == 0 || uncompressed > kMaxEntryBytes)
          throw FatbinError("compressed fatbin entry declares " + std::to_string(uncompressed) +
                            " bytes (limit " + std::to_string(kMaxEntryBytes) + ")");
        if (uncompressed > kMaxImageBytes - declared)
          throw FatbinError("fatbin entries decompress to more than the limit of " +
                            std::to_string(kMaxImageBytes) + " bytes");
        declared += uncompressed;
        r.stored = compressed;
        r.size = uncompressed;
      }
      out.push_back(r);
    }
    off += eh + payload;
  }
  return out;
}

Entry decode(const uint8_t* p, const EntryRef& r) {
  Entry entry;
  entry.kind = r.kind;
  entry.arch = r.arch;
  entry.flags = r.flags;
  const uint8_t* data = p + r.offset;
  if (r.compressed)
    entry.data = decompress(data, r.stored, r.flags, r.size);
  else
    entry.data.assign(data, data + r.stored);
  if (entry.kind == EntryKind::Ptx)
    while (!entry.data.empty() && entry.data.back() == 0) entry.data.pop_back();
  return entry;
}

// The newest entry of `kind` not newer than `arch` that `fits`; SIZE_MAX when none.
template <class Fits>
size_t newest(const std::vector<EntryRef>& entries, EntryKind kind, uint32_t arch, Fits fits) {
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < entries.size(); ++i) {
    const EntryRef& e = entries[i];
    if (e.kind != kind || e.arch > arch || !fits(e)) continue;
    if (best == SIZE_MAX || e.arch > entries[best].arch) best = i;
  }
  return best;
}

ModuleInfo describe_entries(const uint8_t* p, const ImagePlan& plan) {
  ModuleInfo info;
  std::vector<Entry> entries;
  for (size_t i : plan.chosen) entries.push_back(decode(p, plan.entries[i]));
  for (const Entry& e : entries) {
    info.code_bytes += e.data.size();
    if (e.kind != EntryKind::Elf) continue;
    ModuleInfo c = parse_cubin(e.data.data(), e.data.size());
    for (auto& [name, layout] : c.kernels) info.kernels.emplace(name, layout);
    for (auto& [name, var] : c.globals) info.globals.emplace(name, var);
    info.global_bytes = std::max(info.global_bytes, c.global_bytes);
  }
  for (const Entry& e : entries) {
    if (e.kind != EntryKind::Ptx) continue;
    auto kernels = parse_ptx(std::string(e.data.begin(), e.data.end()));
    for (auto& [name, layout] : kernels) info.kernels.emplace(name, layout);
  }
  return info;
}

bool is_fatbin(const uint8_t* p, size_t size) {
  return size >= 4 && p[0] == 0x50 && p[1] == 0xED && p[2] == 0x55 && p[3] == 0xBA;
}
bool is_elf(const uint8_t* p, size_t size) {
  return size >= 4 && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F';
}

}  // namespace

uint64_t decompression_budget(uint64_t image_bytes, uint64_t floor) {
  uint64_t scaled =
      image_bytes > kMaxImageBytes / kMaxExpansion ? kMaxImageBytes : image_bytes * kMaxExpansion;
  return std::max(floor, scaled);
}

bool ImagePlan::decompresses() const {
  for (size_t i : chosen)
    if (entries[i].compressed) return true;
  return false;
}

ImagePlan plan_image(const uint8_t* p, size_t size, uint32_t arch) {
  ImagePlan plan;
  if (!is_fatbin(p, size)) {
    plan.form = is_elf(p, size) ? ImagePlan::Form::Cubin : ImagePlan::Form::Ptx;
    plan.chosen_bytes = size;
    return plan;
  }
  plan.entries = scan_entries(p, size, plan.declared);
  const auto& entries = plan.entries;
  size_t pick = SIZE_MAX;
  if (arch) {
    pick = newest(entries, EntryKind::Elf, arch,
                  [&](const EntryRef& e) { return e.arch / 10 == arch / 10; });
    if (pick == SIZE_MAX) pick = newest(entries, EntryKind::Elf, arch, [](auto&) { return true; });
    if (pick == SIZE_MAX) pick = newest(entries, EntryKind::Ptx, arch, [](auto&) { return true; });
  }
  if (pick != SIZE_MAX) {
    plan.chosen = {pick};
  } else {
    for (size_t i = 0; i < entries.size(); ++i) plan.chosen.push_back(i);
  }
  for (size_t i : plan.chosen) plan.chosen_bytes += entries[i].size;
  return plan;
}

std::vector<Entry> parse_entries(const uint8_t* p, size_t size) {
  uint64_t declared = 0;
  std::vector<Entry> out;
  for (const EntryRef& r : scan_entries(p, size, declared)) out.push_back(decode(p, r));
  return out;
}

ModuleInfo describe(const uint8_t* p, size_t size) {
  return describe_entries(p, plan_image(p, size, 0));
}

ModuleInfo describe_image(const uint8_t* p, size_t size) {
  return describe_image(p, size, plan_image(p, size, 0));
}

ModuleInfo describe_image(const uint8_t* p, size_t size, const ImagePlan& plan) {
  if (plan.form == ImagePlan::Form::Fatbin) return describe_entries(p, plan);
  if (plan.form == ImagePlan::Form::Cubin) {
    ModuleInfo info = parse_cubin(p, size);
    info.code_bytes = size;
    return info;
  }
  ModuleInfo info;
  info.kernels = parse_ptx(std::string(ptx_text(p, size)));
  info.code_bytes = size;
  return info;
}

std::string_view ptx_text(const uint8_t* p, size_t size) {
  // Text, NUL-terminated as cuLibraryLoadData reads it, nothing after the NUL.
  size_t n = 0;
  while (n < size && p[n] != 0) ++n;
  if (n == 0 || n == size)
    throw FatbinError("the image is neither a fat binary, a cubin nor NUL-terminated PTX text");
  for (size_t i = n; i < size; ++i)
    if (p[i] != 0) throw FatbinError("PTX image with bytes after its terminating NUL");
  std::string_view text(reinterpret_cast<const char*>(p), n);
  if (text.find(".version") == std::string_view::npos ||
      text.find(".target") == std::string_view::npos)
    throw FatbinError("PTX image without .version and .target directives");
  return text;
}

}  // namespace rgpu::fatbin
