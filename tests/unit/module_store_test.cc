// The client's module store: raw images (fat binary, cubin, PTX) sized without a length, the same
// bytes giving the same module, functions and globals by name, and unloading by reference.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "client/modules.h"
#include "tests/unit/image_builder.h"

namespace rgpu::client {
namespace {

using test::CubinBuilder;
using test::FatbinBuilder;

TEST(ModuleStore, ImageSizeOfEachKind) {
  std::vector<uint8_t> cubin = test::basic_cubin().build();
  // Bytes after the image must not count.
  std::vector<uint8_t> padded = cubin;
  padded.resize(cubin.size() + 100, 0xAB);
  EXPECT_EQ(image_size(padded.data()), cubin.size());
  std::vector<uint8_t> fat = FatbinBuilder::wrap(cubin);
  padded = fat;
  padded.resize(fat.size() + 64, 0xCD);
  EXPECT_EQ(image_size(padded.data()), fat.size());
  const char* ptx = ".version 8.0\n.target sm_90\n.visible .entry k(.param .u64 p)\n{\nret;\n}\n";
  EXPECT_EQ(image_size(ptx), std::strlen(ptx) + 1);
  EXPECT_EQ(image_size(nullptr), 0u);
  const char empty[4] = {0, 0, 0, 0};
  EXPECT_EQ(image_size(empty), 0u);
}

TEST(ModuleStore, SameBytesSameModuleCopiedAndCounted) {
  ModuleStore store;
  std::vector<uint8_t> image = FatbinBuilder::wrap(test::basic_cubin().build());
  Module* a = nullptr;
  Module* b = nullptr;
  ASSERT_EQ(store.load_image(image.data(), 0, &a), errc::Success);
  std::vector<uint8_t> copy = image;  // other memory, same bytes
  ASSERT_EQ(store.load_image(copy.data(), copy.size(), &b), errc::Success);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a->refs, 2u);
  EXPECT_NE(a->image, image.data());  // copied: the caller may free its buffer
  EXPECT_EQ(a->size, image.size());
  EXPECT_TRUE(a->hashed);
  image.assign(image.size(), 0);
  EXPECT_NE(a->owned[0], 0);

  std::vector<uint8_t> other = FatbinBuilder::wrap(CubinBuilder().build());
  Module* c = nullptr;
  ASSERT_EQ(store.load_image(other.data(), 0, &c), errc::Success);
  EXPECT_NE(c, a);

  const char junk[] = "";
  Module* d = nullptr;
  EXPECT_EQ(store.load_image(junk, 0, &d), errc::InvalidValue);
  EXPECT_EQ(store.load_image(nullptr, 10, &d), errc::InvalidValue);
}

TEST(ModuleStore, FunctionsAndGlobalsByName) {
  ModuleStore store;
  std::vector<uint8_t> image = FatbinBuilder::wrap(test::basic_cubin().build());
  Module* m = nullptr;
  ASSERT_EQ(store.load_image(image.data(), 0, &m), errc::Success);
  Function* k = store.function(m, "k");
  Function* k2 = store.function(m, "k");
  Function* j = store.function(m, "j");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k, k2);
  EXPECT_NE(k, j);
  EXPECT_EQ(k->index, 0u);
  EXPECT_EQ(j->index, 1u);
  EXPECT_EQ(m->functions, (std::vector<std::string>{"k", "j"}));
  Variable* g = store.variable(m, "g", 16);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(store.variable(m, "g"), g);
  EXPECT_EQ(g->size, 16u);
  EXPECT_EQ(m->globals.size(), 1u);
}

TEST(ModuleStore, UnloadByReference) {
  ModuleStore store;
  std::vector<uint8_t> image = FatbinBuilder::wrap(test::basic_cubin().build());
  Module* a = nullptr;
  ASSERT_EQ(store.load_image(image.data(), 0, &a), errc::Success);
  ASSERT_EQ(store.load_image(image.data(), 0, &a), errc::Success);
  EXPECT_EQ(store.unload(a), errc::Success);
  EXPECT_TRUE(store.valid(a));
  EXPECT_EQ(store.unload(a), errc::Success);
  EXPECT_FALSE(store.valid(a));
  EXPECT_EQ(store.function(a, "k"), nullptr);
  EXPECT_EQ(store.unload(a), errc::InvalidResourceHandle);
  EXPECT_EQ(store.unload(reinterpret_cast<Module*>(0x40)), errc::InvalidResourceHandle);
  // Loading the same bytes again gives a fresh module.
  Module* b = nullptr;
  ASSERT_EQ(store.load_image(image.data(), 0, &b), errc::Success);
  EXPECT_NE(a, b);
  EXPECT_TRUE(store.valid(b));
}

TEST(ModuleStore, EmbeddedImagesAreNotCopied) {
  ModuleStore store;
  std::vector<uint8_t> image = FatbinBuilder::wrap(test::basic_cubin().build());
  Module* m = store.add_embedded(image.data(), image.size());
  EXPECT_EQ(m->image, image.data());
  EXPECT_FALSE(m->hashed);
  EXPECT_TRUE(store.valid(m));
  EXPECT_EQ(store.unload(m), errc::InvalidResourceHandle);  // part of the program
}

// What the driver front-end asks of a CUfunction: NVIDIA's runtime passes unregistered host
// pointers through, which must be refused without being dereferenced.
TEST(ModuleStore, FunctionHandlesAreChecked) {
  ModuleStore store;
  std::vector<uint8_t> image = FatbinBuilder::wrap(test::basic_cubin().build());
  Module* m = nullptr;
  ASSERT_EQ(store.load_image(image.data(), 0, &m), errc::Success);
  Function* k = store.function(m, "k");
  ASSERT_NE(k, nullptr);
  EXPECT_TRUE(store.valid_function(k));
  int not_a_function = 0;
  EXPECT_FALSE(store.valid_function(reinterpret_cast<Function*>(&not_a_function)));
  EXPECT_FALSE(store.valid_function(nullptr));
  EXPECT_EQ(store.unload(m), errc::Success);
  EXPECT_FALSE(store.valid_function(k));  // its module is gone
}

}  // namespace
}  // namespace rgpu::client
