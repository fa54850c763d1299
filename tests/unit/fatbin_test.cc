// Fat binary parsing on binaries nvcc built during this build (tests/fatbin/kernels.cu): every
// kernel's parameter layout equals the host ABI's, for cubins and PTX, compressed (ZSTD, LZ4) or
// not, with several -gencode targets; globals are found with their sizes and initial values.
#include "fatbin/fatbin.h"

#include <gtest/gtest.h>
#include <lz4.h>
#include <sys/resource.h>
#include <zstd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "tests/fatbin/kernel_types.h"
#include "tests/unit/image_builder.h"

using namespace rgpu::fatbin;

namespace {

std::vector<uint8_t> read_file(const std::string& name) {
  std::ifstream in(std::string(RGPU_FATBIN_DIR) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// The layout the host ABI gives a parameter list: each at the previous end rounded up to its
// alignment.
template <class... Ts>
KernelLayout host_layout() {
  KernelLayout l;
  uint32_t cursor = 0;
  auto add = [&](uint32_t size, uint32_t align) {
    cursor = (cursor + align - 1) / align * align;
    l.params.push_back(Param{cursor, size});
    cursor += size;
  };
  (add(sizeof(Ts), alignof(Ts)), ...);
  (void)add;
  return l;
}

std::map<std::string, KernelLayout> expected() {
  return {
      {"k_empty", host_layout<>()},
      {"k_basic", host_layout<float*, int, double, const int*>()},
      {"k_struct", host_layout<float*, int, double, Padded, const int*>()},
      {"k_vectors",
       host_layout<float4, int3, double2, bool, unsigned char, long, float*, int, WithArray>()},
      {"k_many",
       host_layout<int, char, double, short, float, long long, int, char, int, double, int, float,
                   char, int, short, int, double, char, int, float, int, int*>()},
      {"k_huge", host_layout<Big, int*, char>()},
      {"_Z10k_templateIiEvPT_S0_i", host_layout<int*, int, int>()},
      {"_Z10k_templateIdEvPT_S0_i", host_layout<double*, double, int>()},
      {"_Z10k_templateI6PaddedEvPT_S1_i", host_layout<Padded*, Padded, int>()},
  };
}

void expect_kernels(const std::map<std::string, KernelLayout>& got, const std::string& what) {
  for (const auto& [name, layout] : expected()) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << what << ": kernel " << name << " not found";
    EXPECT_EQ(it->second, layout) << what << ": layout of " << name;
  }
}

}  // namespace

TEST(Fatbin, HostAbiSanity) {
  // The cases the reference digest verified by hand.
  KernelLayout s = host_layout<float*, int, double, Padded, const int*>();
  std::vector<uint32_t> offsets;
  for (auto& p : s.params) offsets.push_back(p.offset);
  const std::vector<uint32_t> want = {0, 8, 16, 24, 48};
  EXPECT_EQ(offsets, want);
  EXPECT_EQ((host_layout<Big, int*, char>().params[2].offset), 4808u);  // past 4800 bytes of Big
  EXPECT_EQ(expected()["k_many"].params.size(), 22u);
}

TEST(Fatbin, SeveralTargetsCubinsAndPtxAgree) {
  auto bin = read_file("multi.fatbin");
  std::vector<Entry> entries = parse_entries(bin.data(), bin.size());
  int elf = 0, ptx = 0;
  std::vector<uint32_t> archs;
  for (const Entry& e : entries) {
    if (e.kind == EntryKind::Elf) {
      ++elf;
      archs.push_back(e.arch);
      expect_kernels(parse_cubin(e.data.data(), e.data.size()).kernels,
                     "cubin sm_" + std::to_string(e.arch));
    } else {
      ++ptx;
      expect_kernels(parse_ptx(std::string(e.data.begin(), e.data.end())),
                     "ptx compute_" + std::to_string(e.arch));
    }
  }
  EXPECT_EQ(elf, 2);
  EXPECT_EQ(ptx, 1);
  EXPECT_NE(std::find(archs.begin(), archs.end(), 80u), archs.end());
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90u), archs.end());
  expect_kernels(describe(bin.data(), bin.size()).kernels, "describe(multi)");
}

TEST(Fatbin, ZstdCompressedCubins) {
  auto bin = read_file("zstd.fatbin");
  std::vector<Entry> entries = parse_entries(bin.data(), bin.size());
  ASSERT_FALSE(entries.empty());
  bool compressed = false;
  for (const Entry& e : entries) compressed = compressed || (e.flags & 0x8000);
  EXPECT_TRUE(compressed);
  expect_kernels(describe(bin.data(), bin.size()).kernels, "zstd");
}

TEST(Fatbin, Lz4CompressedPtxOnly) {
  auto bin = read_file("lz4_ptx.fatbin");
  std::vector<Entry> entries = parse_entries(bin.data(), bin.size());
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].kind, EntryKind::Ptx);
  EXPECT_TRUE(entries[0].flags & 0x2000);
  expect_kernels(describe(bin.data(), bin.size()).kernels, "lz4 ptx");
}

TEST(Fatbin, UncompressedPtxOnly) {
  auto bin = read_file("plain_ptx.fatbin");
  std::vector<Entry> entries = parse_entries(bin.data(), bin.size());
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].flags & 0xA000, 0u);
  expect_kernels(describe(bin.data(), bin.size()).kernels, "plain ptx");
}

TEST(Fatbin, GlobalsWithSizesAndInitialValues) {
  auto bin = read_file("zstd.fatbin");
  ModuleInfo info = describe(bin.data(), bin.size());
  ASSERT_TRUE(info.globals.count("g_init"));
  ASSERT_TRUE(info.globals.count("g_zero"));
  ASSERT_TRUE(info.globals.count("g_const"));
  EXPECT_EQ(info.globals["g_init"].size, 4u);
  int v = 0;
  ASSERT_EQ(info.globals["g_init"].init.size(), 4u);
  memcpy(&v, info.globals["g_init"].init.data(), 4);
  EXPECT_EQ(v, 5);
  EXPECT_EQ(info.globals["g_zero"].size, 32u);
  EXPECT_FALSE(info.globals["g_zero"].constant);
  EXPECT_TRUE(info.globals["g_const"].constant);
  ASSERT_EQ(info.globals["g_const"].init.size(), 16u);
  float f[4];
  memcpy(f, info.globals["g_const"].init.data(), 16);
  EXPECT_EQ(f[3], 4.0f);
}

TEST(Fatbin, MalformedInputIsRejectedWithoutCrashing) {
  auto bin = read_file("multi.fatbin");
  EXPECT_THROW(parse_entries(bin.data(), 10), FatbinError);
  EXPECT_THROW(parse_entries(bin.data(), bin.size() - 1), FatbinError);
  std::vector<uint8_t> bad = bin;
  bad[0] ^= 0xff;
  EXPECT_THROW(parse_entries(bad.data(), bad.size()), FatbinError);
  std::mt19937 rng(1);
  for (int i = 0; i < 300; ++i) {
    std::vector<uint8_t> m = bin;
    for (int k = 0; k < 8; ++k) m[16 + rng() % (m.size() - 16)] = static_cast<uint8_t>(rng());
    try {
      describe(m.data(), m.size());
    } catch (const FatbinError&) {
    }
  }
  EXPECT_THROW(parse_cubin(bin.data(), bin.size()), FatbinError);  // not an ELF
}

TEST(Fatbin, WrapperUnwraps) {
  auto bin = read_file("multi.fatbin");
  struct {
    uint32_t magic, version;
    const void* data;
    const void* unused;
  } w{kWrapperMagic, 1, bin.data(), nullptr};
  WrappedFatbin f = unwrap(&w);
  EXPECT_EQ(f.data, bin.data());
  EXPECT_EQ(f.size, bin.size());
  w.magic = 1;
  EXPECT_THROW(unwrap(&w), FatbinError);
}

// ---- Crafted images: each is refused with a FatbinError naming what is wrong, never a fault ----

namespace {

using rgpu::test::CubinBuilder;
using rgpu::test::FatbinBuilder;

std::string refusal(const std::vector<uint8_t>& fatbin) {
  try {
    describe(fatbin.data(), fatbin.size());
  } catch (const FatbinError& e) {
    return e.what();
  }
  return "";
}

std::string cubin_refusal(const CubinBuilder& c) { return refusal(FatbinBuilder::wrap(c.build())); }

size_t max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<size_t>(u.ru_maxrss);
}

}  // namespace

TEST(FatbinCrafted, BuilderMakesAValidCubin) {
  CubinBuilder c = rgpu::test::basic_cubin();
  uint32_t g = c.name("g_var");
  uint32_t data = c.add({".nv.global.init", 1, std::vector<uint8_t>(16, 7)});
  uint32_t strtab = c.add({".strtab", CubinBuilder::kStrtab, {}});
  auto sym = CubinBuilder::symbol(g, static_cast<uint16_t>(data), 8, 8);
  c.add({".symtab", CubinBuilder::kSymtab, sym, UINT64_MAX, UINT64_MAX, strtab, 24});
  c.sections[strtab - 1].data = c.strtab;
  auto bin = FatbinBuilder::wrap(c.build());
  ModuleInfo info = describe(bin.data(), bin.size());
  ASSERT_EQ(info.kernels.count("k"), 1u);
  EXPECT_EQ(info.kernels["k"], (KernelLayout{{Param{0, 8}, Param{8, 4}}}));
  ASSERT_EQ(info.globals.count("g_var"), 1u);
  EXPECT_EQ(info.globals["g_var"].size, 8u);
  EXPECT_EQ(info.globals["g_var"].init, std::vector<uint8_t>(8, 7));
}

TEST(FatbinCrafted, NobitsNvInfoWithAWildOffset) {
  CubinBuilder c;
  c.add({".nv.info.k", CubinBuilder::kNobits, {}, 4096, 1ull << 40});
  std::string why = cubin_refusal(c);
  EXPECT_NE(why.find("NOBITS"), std::string::npos) << why;
  EXPECT_NE(why.find(".nv.info.k"), std::string::npos) << why;
}

TEST(FatbinCrafted, SectionsOutsideTheImage) {
  CubinBuilder c;
  c.add({".nv.info.k", 1, CubinBuilder::kparam(0, 0, 8), 16, 1ull << 62});
  EXPECT_NE(cubin_refusal(c).find("runs past the image"), std::string::npos);
  CubinBuilder d;
  d.add({".nv.info.k", 1, CubinBuilder::kparam(0, 0, 8), UINT64_MAX - 8});
  EXPECT_NE(cubin_refusal(d).find("runs past the image"), std::string::npos);
  // The section header table itself.
  auto img = rgpu::test::basic_cubin().build();
  rgpu::test::put<uint16_t>(img, 0x3C, 0xffff);
  EXPECT_NE(refusal(FatbinBuilder::wrap(img)).find("section header table"), std::string::npos);
  img = rgpu::test::basic_cubin().build();
  rgpu::test::put<uint64_t>(img, 0x28, UINT64_MAX - 10);
  EXPECT_NE(refusal(FatbinBuilder::wrap(img)).find("section header table"), std::string::npos);
  img = rgpu::test::basic_cubin().build();
  rgpu::test::put<uint16_t>(img, 0x3E, 0xffff);
  EXPECT_NE(refusal(FatbinBuilder::wrap(img)).find("no section name table"), std::string::npos);
}

TEST(FatbinCrafted, StringTableIndicesAndOffsets) {
  CubinBuilder c = rgpu::test::basic_cubin();
  uint32_t data = c.add({".nv.global.init", 1, std::vector<uint8_t>(16, 7)});
  auto sym = CubinBuilder::symbol(1, static_cast<uint16_t>(data), 0, 4);
  c.add({".symtab", CubinBuilder::kSymtab, sym, UINT64_MAX, UINT64_MAX, 999, 24});
  EXPECT_NE(cubin_refusal(c).find("string table index 999"), std::string::npos);
  // A symbol name offset past its table.
  CubinBuilder d = rgpu::test::basic_cubin();
  data = d.add({".nv.global.init", 1, std::vector<uint8_t>(16, 7)});
  uint32_t strtab = d.add({".strtab", CubinBuilder::kStrtab, d.strtab});
  sym = CubinBuilder::symbol(0x7fffffff, static_cast<uint16_t>(data), 0, 4);
  d.add({".symtab", CubinBuilder::kSymtab, sym, UINT64_MAX, UINT64_MAX, strtab, 24});
  EXPECT_NE(cubin_refusal(d).find("outside its table"), std::string::npos);
  // A NOBITS string table has no bytes to read names from.
  CubinBuilder e = rgpu::test::basic_cubin();
  data = e.add({".nv.global.init", 1, std::vector<uint8_t>(16, 7)});
  strtab = e.add({".strtab", CubinBuilder::kNobits, {}, 1 << 20, 1ull << 50});
  sym = CubinBuilder::symbol(1, static_cast<uint16_t>(data), 0, 4);
  e.add({".symtab", CubinBuilder::kSymtab, sym, UINT64_MAX, UINT64_MAX, strtab, 24});
  EXPECT_NE(cubin_refusal(e).find("NOBITS"), std::string::npos);
  // A name without its terminating NUL.
  CubinBuilder f = rgpu::test::basic_cubin();
  data = f.add({".nv.global.init", 1, std::vector<uint8_t>(16, 7)});
  strtab = f.add({".strtab", CubinBuilder::kStrtab, {0, 'a', 'b'}});
  sym = CubinBuilder::symbol(1, static_cast<uint16_t>(data), 0, 4);
  f.add({".symtab", CubinBuilder::kSymtab, sym, UINT64_MAX, UINT64_MAX, strtab, 24});
  EXPECT_NE(cubin_refusal(f).find("not terminated"), std::string::npos);
}

TEST(FatbinCrafted, NvInfoRecords) {
  CubinBuilder c;
  std::vector<uint8_t> rec = CubinBuilder::kparam(0, 0, 8);
  rgpu::test::put<uint16_t>(rec, 2, 0xfff0);  // claims more bytes than the section holds
  c.add({".nv.info.k", 1, rec});
  EXPECT_NE(cubin_refusal(c).find(".nv.info record"), std::string::npos);
  CubinBuilder d;
  std::vector<uint8_t> two = CubinBuilder::kparam(0, 0, 8);
  std::vector<uint8_t> dup = CubinBuilder::kparam(0, 8, 8);
  two.insert(two.end(), dup.begin(), dup.end());
  d.add({".nv.info.k", 1, two});
  EXPECT_NE(cubin_refusal(d).find("ordinals"), std::string::npos);
  CubinBuilder e;
  e.add({".nv.info.k", 1, CubinBuilder::kparam(0, 0xfff0, 0x3fff)});
  EXPECT_NE(cubin_refusal(e).find("kernel parameter beyond"), std::string::npos);
}

TEST(FatbinCrafted, HugeAndOverlappingGlobals) {
  auto with_global = [](uint32_t type, uint64_t section_size, uint64_t value, uint64_t size,
                        int symbols = 1) {
    CubinBuilder c = rgpu::test::basic_cubin();
    uint32_t g = c.name("g_huge");
    std::vector<uint8_t> bytes =
        type == CubinBuilder::kNobits ? std::vector<uint8_t>{} : std::vector<uint8_t>(4096, 1);
    uint32_t home = c.add({type == CubinBuilder::kNobits ? ".nv.global" : ".nv.global.init", type,
                           bytes, section_size});
    uint32_t strtab = c.add({".strtab", CubinBuilder::kStrtab, {}});
    std::vector<uint8_t> syms;
    for (int i = 0; i < symbols; ++i) {
      uint32_t n = c.name("g" + std::to_string(i));
      auto s = CubinBuilder::symbol(symbols == 1 ? g : n, static_cast<uint16_t>(home), value, size);
      syms.insert(syms.end(), s.begin(), s.end());
    }
    c.add({".symtab", CubinBuilder::kSymtab, syms, UINT64_MAX, UINT64_MAX, strtab, 24});
    c.sections[strtab - 1].data = c.strtab;
    return cubin_refusal(c);
  };
  // A __device__ variable whose size (and its rounding) would overflow.
  std::string why = with_global(CubinBuilder::kNobits, UINT64_MAX, 0, UINT64_MAX - 16);
  EXPECT_NE(why.find("exceeds the limit"), std::string::npos) << why;
  EXPECT_NE(why.find("g_huge"), std::string::npos) << why;
  // Outside its section.
  why = with_global(CubinBuilder::kNobits, 4096, 4000, 200);
  EXPECT_NE(why.find("outside its section"), std::string::npos) << why;
  why = with_global(1, 4096, UINT64_MAX - 4, 8);
  EXPECT_NE(why.find("outside its section"), std::string::npos) << why;
  // Within the limit: parsed (the backend decides whether it fits).
  EXPECT_EQ(with_global(CubinBuilder::kNobits, 8ull << 30, 0, 8ull << 30), "");
  // Thousands of symbols sharing the same 4 KiB of initial values cannot multiply memory.
  why = with_global(1, 4096, 0, 4096, 2000);
  EXPECT_NE(why.find("exceed the image"), std::string::npos) << why;
}

TEST(FatbinCrafted, SharedBytesCannotMultiplyWork) {
  // Many .nv.info sections over the same records: each is read once, together at most the image.
  CubinBuilder c;
  std::vector<uint8_t> recs;
  for (int i = 0; i < 256; ++i) {
    auto r = CubinBuilder::kparam(static_cast<uint16_t>(i), static_cast<uint16_t>(4 * i), 4);
    recs.insert(recs.end(), r.begin(), r.end());
  }
  c.add({".nv.info.k0", 1, recs});
  for (int i = 1; i < 64; ++i)
    c.add({".nv.info.k" + std::to_string(i), 1, {}, recs.size(), 64});  // the same bytes
  std::string why = cubin_refusal(c);
  EXPECT_NE(why.find("overlap"), std::string::npos) << why;
  // Globals named by suffixes of one long name: the names scanned are budgeted.
  CubinBuilder d = rgpu::test::basic_cubin();
  std::string long_name(60000, 'x');
  uint32_t base = d.name(long_name);
  uint32_t home = d.add({".nv.global", CubinBuilder::kNobits, {}, 1 << 20});
  uint32_t strtab = d.add({".strtab", CubinBuilder::kStrtab, d.strtab});
  std::vector<uint8_t> syms;
  for (uint32_t i = 0; i < 2000; ++i) {
    auto sym = CubinBuilder::symbol(base + i, static_cast<uint16_t>(home), 0, 4);
    syms.insert(syms.end(), sym.begin(), sym.end());
  }
  d.add({".symtab", CubinBuilder::kSymtab, syms, UINT64_MAX, UINT64_MAX, strtab, 24});
  why = cubin_refusal(d);
  EXPECT_NE(why.find("names add up"), std::string::npos) << why;
}

TEST(FatbinCrafted, FatbinHeaderAndEntries) {
  FatbinBuilder b;
  b.entries.push_back({2, 90, 0, rgpu::test::basic_cubin().build(), 0});
  auto bin = b.build();
  rgpu::test::put<uint64_t>(bin, 8, UINT64_MAX - 8);
  EXPECT_NE(refusal(bin).find("impossible size"), std::string::npos);
  bin = b.build();
  rgpu::test::put<uint32_t>(bin, 16 + 8, 0xfffffff0);  // payload past the end
  EXPECT_NE(refusal(bin).find("runs past the end"), std::string::npos);
  bin = b.build();
  rgpu::test::put<uint32_t>(bin, 16 + 4, 8);  // entry header smaller than itself
  EXPECT_NE(refusal(bin).find("runs past the end"), std::string::npos);
  // Too many entries (empty ones of an unknown kind cost nothing else).
  FatbinBuilder many;
  for (size_t i = 0; i <= kMaxEntries; ++i) many.entries.push_back({7, 90, 0, {}, 0});
  bin = many.build();
  EXPECT_NE(refusal(bin).find("more than " + std::to_string(kMaxEntries) + " entries"),
            std::string::npos);
}

TEST(FatbinCrafted, CompressedEntriesCannotDeclareTheirWayToGigabytes) {
  // A few bytes claiming a terabyte.
  FatbinBuilder b;
  b.entries.push_back({2, 90, 0x8000, std::vector<uint8_t>(40, 0x11), 1ull << 40});
  std::string why = refusal(b.build());
  EXPECT_NE(why.find("declares 1099511627776 bytes"), std::string::npos) << why;
  b.entries[0].flags = 0x2000;
  EXPECT_NE(refusal(b.build()).find("limit"), std::string::npos);

  // A real zstd frame of 4 KiB of zeros: a declared size other than what it holds is an error,
  // and a large declared size does not allocate it.
  std::vector<uint8_t> plain(4096, 0), z(ZSTD_compressBound(plain.size()));
  z.resize(ZSTD_compress(z.data(), z.size(), plain.data(), plain.size(), 3));
  b.entries[0] = {1, 90, 0x8000, z, plain.size()};
  EXPECT_EQ(refusal(b.build()), "");  // PTX of zeros: no kernels, but valid
  b.entries[0].uncompressed = plain.size() - 1;
  EXPECT_NE(refusal(b.build()).find("declares"), std::string::npos);
  // Without the content size in the frame header, the mismatch shows at the end.
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
  std::vector<uint8_t> z2(ZSTD_compressBound(plain.size()));
  z2.resize(ZSTD_compress2(cctx, z2.data(), z2.size(), plain.data(), plain.size()));
  ZSTD_freeCCtx(cctx);
  size_t rss = max_rss_kib();
  b.entries[0] = {1, 90, 0x8000, z2, 200ull << 20};
  why = refusal(b.build());
  EXPECT_NE(why.find("decompresses to 4096 bytes but declares 209715200"), std::string::npos)
      << why;
  b.entries[0].uncompressed = 100;
  EXPECT_NE(refusal(b.build()).find("more than its declared 100"), std::string::npos);
  EXPECT_LT(max_rss_kib() - rss, 64u << 10) << "a 200 MiB declared size was allocated";
  // A truncated frame.
  z.resize(z.size() - 3);
  b.entries[0] = {1, 90, 0x8000, z, plain.size()};
  EXPECT_NE(refusal(b.build()).find("zstd"), std::string::npos);

  // LZ4 block (what nvcc writes): the declared size must be what comes out.
  std::vector<uint8_t> l(LZ4_compressBound(4096));
  l.resize(static_cast<size_t>(LZ4_compress_default(reinterpret_cast<const char*>(plain.data()),
                                                    reinterpret_cast<char*>(l.data()), 4096,
                                                    static_cast<int>(l.size()))));
  b.entries[0] = {1, 90, 0x2000, l, plain.size()};
  EXPECT_EQ(refusal(b.build()), "");
  b.entries[0].uncompressed = plain.size() + 1;
  EXPECT_NE(refusal(b.build()).find("lz4 entry decompresses to 4096 bytes"), std::string::npos);
  b.entries[0].uncompressed = plain.size() - 1;
  EXPECT_NE(refusal(b.build()).find("lz4"), std::string::npos);
  // LZ4 block: a declared size the block cannot reach is refused before allocating.
  b.entries[0] = {1, 90, 0x2000, std::vector<uint8_t>(10, 0), 100u << 20};
  EXPECT_NE(refusal(b.build()).find("cannot hold"), std::string::npos);
}

TEST(FatbinCrafted, PtxParameterLists) {
  auto ptx = [](const std::string& params) {
    return ".visible .entry k(\n" + params + "\n)\n{\n ret;\n}\n";
  };
  EXPECT_EQ(parse_ptx(ptx(".param .u64 a, .param .align 16 .b8 b[24]"))["k"],
            (KernelLayout{{Param{0, 8}, Param{16, 24}}}));
  EXPECT_THROW(parse_ptx(ptx(".param .align 8 .b8 b[99999999999999999999]")), FatbinError);
  EXPECT_THROW(parse_ptx(ptx(".param .align 3 .b8 b[4]")), FatbinError);
  EXPECT_THROW(parse_ptx(ptx(".param .align 4294967296 .b8 b[4]")), FatbinError);
  EXPECT_THROW(parse_ptx(ptx(".param .b8 b[40000], .param .b8 c[40000]")), FatbinError);
  EXPECT_THROW(parse_ptx(ptx(".param .u99999999999 a")), FatbinError);
  EXPECT_THROW(parse_ptx(".entry k( .param .u32 a"), FatbinError);
  EXPECT_NO_THROW(parse_ptx(".entry"));
  EXPECT_NO_THROW(parse_ptx(".entry k"));
}

// ---- What an image costs, known from its headers (plan_image), and only the entry used ----

TEST(FatbinPlan, ChoosesTheEntryTheGpuLoads) {
  auto bin = read_file("multi.fatbin");  // sm_80 and sm_90 cubins, compute_90 PTX
  auto chosen = [&](uint32_t arch) {
    ImagePlan plan = plan_image(bin.data(), bin.size(), arch);
    std::string s;
    for (size_t i : plan.chosen)
      s += (s.empty() ? "" : " ") +
           std::string(plan.entries[i].kind == EntryKind::Elf ? "sm_" : "compute_") +
           std::to_string(plan.entries[i].arch);
    return s;
  };
  EXPECT_EQ(chosen(90), "sm_90");
  EXPECT_EQ(chosen(89), "sm_80");   // same major version, not newer
  EXPECT_EQ(chosen(100), "sm_90");  // no sm_10x: the newest cubin describes what the PTX holds
  EXPECT_EQ(chosen(75), "sm_80 sm_90 compute_90");  // nothing fits: every entry
  EXPECT_EQ(chosen(0), "sm_80 sm_90 compute_90");
  auto ptx = read_file("lz4_ptx.fatbin");
  ImagePlan p = plan_image(ptx.data(), ptx.size(), 90);
  ASSERT_EQ(p.chosen.size(), 1u);
  EXPECT_EQ(p.entries[p.chosen[0]].kind, EntryKind::Ptx);
  EXPECT_TRUE(p.decompresses());
  // Describing the chosen cubin alone gives every kernel, the variables and what they take.
  ModuleInfo info = describe_image(bin.data(), bin.size(), plan_image(bin.data(), bin.size(), 90));
  expect_kernels(info.kernels, "describe_image(multi, sm_90)");
  EXPECT_TRUE(info.globals.count("g_init"));
  EXPECT_GE(info.global_bytes, 4u + 32u + 16u);  // g_init, g_zero, g_const
  EXPECT_EQ(info.code_bytes, plan_image(bin.data(), bin.size(), 90).chosen_bytes);
}

TEST(FatbinPlan, WhatNvccWritesIsWellWithinTheBudget) {
  // The measured ratios (fatbin.h): decompressed bytes over stored bytes of each test image.
  for (const char* name : {"multi.fatbin", "zstd.fatbin", "lz4_ptx.fatbin", "plain_ptx.fatbin"}) {
    auto bin = read_file(name);
    ImagePlan plan = plan_image(bin.data(), bin.size(), 90);
    EXPECT_LE(plan.declared, 16 * bin.size()) << name;
    EXPECT_LE(plan.declared, decompression_budget(bin.size())) << name;
  }
  EXPECT_EQ(decompression_budget(33 << 10), kDefaultImageFloor);
  EXPECT_EQ(decompression_budget(2 << 20), 128ull << 20);
  EXPECT_EQ(decompression_budget(1ull << 40), kMaxImageBytes);  // no overflow
  EXPECT_EQ(decompression_budget(1 << 20, 512ull << 20), 512ull << 20);
}

TEST(FatbinPlan, OnlyTheChosenEntryIsDecompressed) {
  // An sm_90 cubin, and an sm_80 entry of garbage declaring 200 MiB: a GPU of compute
  // capability 9.0 never looks inside the latter.
  FatbinBuilder b;
  auto cubin = rgpu::test::basic_cubin().build();
  b.entries.push_back({2, 90, 0x8000, rgpu::test::zstd_frame(cubin), cubin.size()});
  b.entries.push_back({2, 80, 0x8000, std::vector<uint8_t>(64, 0x11), 200ull << 20});
  auto bin = b.build();
  size_t rss = max_rss_kib();
  ModuleInfo info = describe_image(bin.data(), bin.size(), plan_image(bin.data(), bin.size(), 90));
  EXPECT_TRUE(info.kernels.count("k"));
  EXPECT_EQ(info.code_bytes, cubin.size());
  EXPECT_NE(refusal(bin).find("zstd"), std::string::npos);  // every entry: the garbage is read
  EXPECT_LT(max_rss_kib() - rss, 64u << 10);
}

TEST(FatbinPlan, ABombIsPricedFromItsHeaders) {
  // 33 KB declaring 1 GiB (four 256 MiB entries of zeros, the largest each may declare): the
  // plan reads 4 headers, allocates nothing and says what decompressing would cost.
  FatbinBuilder b;
  auto zeros = rgpu::test::zstd_zeros(kMaxEntryBytes);
  for (uint32_t arch : {90u, 80u, 75u, 70u})
    b.entries.push_back({2, arch, 0x8000, zeros, kMaxEntryBytes});
  auto bin = b.build();
  EXPECT_LT(bin.size(), 40u << 10);
  size_t rss = max_rss_kib();
  auto start = std::chrono::steady_clock::now();
  ImagePlan plan = plan_image(bin.data(), bin.size(), 90);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
  EXPECT_EQ(plan.declared, 4 * kMaxEntryBytes);
  EXPECT_GT(plan.declared, decompression_budget(bin.size()));
  EXPECT_EQ(plan.chosen_bytes, kMaxEntryBytes);  // a GPU would inflate one of them
  EXPECT_LT(max_rss_kib() - rss, 16u << 10);
  // The hand-written frames are real zstd: one of 1 MiB of zeros decompresses.
  FatbinBuilder one;
  auto ptx_text = std::string(".version 8.0\n.target sm_90\n") + std::string(1 << 20, ' ');
  std::vector<uint8_t> ptx(ptx_text.begin(), ptx_text.end());
  one.entries.push_back({1, 90, 0x8000, rgpu::test::zstd_frame(ptx), ptx.size()});
  auto small = one.build();
  EXPECT_EQ(refusal(small), "");
  EXPECT_EQ(describe(small.data(), small.size()).code_bytes, ptx.size());
}

TEST(FatbinCrafted, VariablesAreCountedBySectionsNotSymbols) {
  // 900 MiB of .nv.global that no symbol names, and a constant bank: what the driver allocates.
  CubinBuilder c = rgpu::test::basic_cubin();
  c.add({".nv.global", CubinBuilder::kNobits, {}, 900ull << 20});
  c.add({".nv.constant3", 1, std::vector<uint8_t>(256, 0)});
  auto img = c.build();
  ModuleInfo info = parse_cubin(img.data(), img.size());
  EXPECT_TRUE(info.globals.empty());
  EXPECT_EQ(info.global_bytes, (900ull << 20) + 256);
  c.add({".nv.global.init", CubinBuilder::kNobits, {}, UINT64_MAX - 1});  // saturates
  img = c.build();
  EXPECT_EQ(parse_cubin(img.data(), img.size()).global_bytes, UINT64_MAX);
}
