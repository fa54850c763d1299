// Fat binary parsing on binaries nvcc built during this build (tests/fatbin/kernels.cu): every
// kernel's parameter layout equals the host ABI's, for cubins and PTX, compressed (ZSTD, LZ4) or
// not, with several -gencode targets; globals are found with their sizes and initial values.
#include "fatbin/fatbin.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "tests/fatbin/kernel_types.h"

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
