// The client's module store: raw images (fat binary, cubin, PTX) sized without a length, the same
// bytes giving the same module, functions and globals by name, unloading by reference, a device
// reset retiring what was resolved (and bumping the epoch that drops resolutions in flight), and
// the store used from many threads at once, as a program registering libraries while others
// resolve does.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>

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

// A device reset retires what a module resolved there (KernelInfo pointers handed out stay
// readable) and bumps the module's epoch for that device: Client::module_on keeps no answer from
// a round trip that a reset overtook.
TEST(ModuleStore, ForgetDeviceRetiresAndBumpsTheEpoch) {
  ModuleStore store;
  std::vector<uint8_t> image = FatbinBuilder::wrap(test::basic_cubin().build());
  Module* m = store.add_embedded(image.data(), image.size());
  ASSERT_NE(store.function(m, "k"), nullptr);
  const KernelInfo* k = nullptr;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    LoadedModule& lm = m->loaded[0];
    lm.id = 7;
    lm.kernels.push_back(std::make_unique<KernelInfo>());
    lm.kernels[0]->found = true;
    lm.kernels[0]->arg_bytes = 24;
    k = lm.kernels[0].get();
    m->loaded[1].id = 8;
    m->broken[0] = 200;
  }
  store.forget_device(0);
  std::lock_guard<std::mutex> lock(m->mu);
  EXPECT_EQ(m->loaded.count(0), 0u);
  EXPECT_EQ(m->loaded.count(1), 1u);  // other devices keep theirs
  EXPECT_EQ(m->broken.count(0), 0u);
  ASSERT_EQ(m->retired.size(), 1u);
  EXPECT_EQ(m->retired[0].kernels[0].get(), k);
  EXPECT_EQ(k->arg_bytes, 24u);
  EXPECT_EQ(m->epoch[0], 1u);
  EXPECT_EQ(m->epoch[1], 0u);
}

// Libraries registering fat binaries, functions and variables on some threads while others check
// handles, ask which images are unasked and reset devices: every name keeps one index, the index
// of its place in the module's list (what launches name on the server).  Meant for sanitizer
// builds too (RGPU_SANITIZE).
TEST(ModuleStore, RegistrationAndLookupsFromManyThreads) {
  ModuleStore store;
  std::vector<uint8_t> image = FatbinBuilder::wrap(test::basic_cubin().build());
  constexpr int kModules = 64, kNames = 32, kWriters = 4, kReaders = 4;
  std::vector<Module*> modules(kModules);
  for (Module*& m : modules) m = store.add_embedded(image.data(), image.size());
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w)
    threads.emplace_back([&, w] {
      for (int i = 0; i < kModules * kNames; ++i) {
        Module* m = modules[(i + w * 7) % kModules];
        const std::string name = "k" + std::to_string((i * 13 + w) % kNames);
        Function* f = store.function(m, name);
        ASSERT_NE(f, nullptr);
        EXPECT_EQ(f, store.function(m, name));
        ASSERT_NE(store.variable(m, "g" + std::to_string(i % 5), 4), nullptr);
        if (i % 97 == 0) store.add_embedded(image.data(), image.size());  // a library loads
      }
    });
  for (int r = 0; r < kReaders; ++r)
    threads.emplace_back([&, r] {
      // Bounded rounds: glibc's rwlock prefers readers, so readers that never pause would keep
      // the registering writers out for good (a test artefact: no program checks handles in a
      // loop that never ends).
      int link = 0;
      for (int round = 0; round < 300 && !done.load(); ++round) {
        for (Module* m : modules) EXPECT_TRUE(store.valid(m));
        store.unasked(&link, modules[r], 4096);
        if (r == 0) store.forget_device(0);
        std::this_thread::yield();
      }
    });
  for (int w = 0; w < kWriters; ++w) threads[w].join();
  done = true;
  for (size_t t = kWriters; t < threads.size(); ++t) threads[t].join();
  for (Module* m : modules) {
    std::lock_guard<std::mutex> lock(m->mu);
    ASSERT_EQ(m->functions.size(), m->function_index.size());
    for (const auto& [name, f] : m->function_index) {
      ASSERT_LT(f->index, m->functions.size());
      EXPECT_EQ(m->functions[f->index], name);
      EXPECT_EQ(f->module, m);
    }
    EXPECT_EQ(m->globals.size(), 5u);
  }
}

}  // namespace
}  // namespace rgpu::client
