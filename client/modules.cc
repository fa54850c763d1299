#include "client/modules.h"

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "fatbin/fatbin.h"
#include "proto/auth.h"

namespace rgpu::client {

namespace {

constexpr Error kInvalidKernelImage = 200;  // cudaErrorInvalidKernelImage, CUDA_ERROR_INVALID_IMAGE

template <typename T>
T read(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

// A 64-bit little-endian ELF image's extent: its headers and every section with file contents.
size_t elf_size(const uint8_t* p) {
  const uint64_t phoff = read<uint64_t>(p, 0x20), shoff = read<uint64_t>(p, 0x28);
  const uint16_t phentsize = read<uint16_t>(p, 0x36), phnum = read<uint16_t>(p, 0x38);
  const uint16_t shentsize = read<uint16_t>(p, 0x3a), shnum = read<uint16_t>(p, 0x3c);
  if (shentsize < 0x40 || shoff > fatbin::kMaxImageBytes || phoff > fatbin::kMaxImageBytes)
    return 0;
  uint64_t end = std::max<uint64_t>(0x40, shoff + uint64_t(shnum) * shentsize);
  end = std::max(end, phoff + uint64_t(phnum) * phentsize);
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint8_t* sh = p + shoff + uint64_t(i) * shentsize;
    constexpr uint32_t kNoBits = 8;
    if (read<uint32_t>(sh, 4) == kNoBits) continue;
    const uint64_t off = read<uint64_t>(sh, 0x18), size = read<uint64_t>(sh, 0x20);
    if (off > fatbin::kMaxImageBytes || size > fatbin::kMaxImageBytes) return 0;
    end = std::max(end, off + size);
  }
  return end <= fatbin::kMaxImageBytes ? static_cast<size_t>(end) : 0;
}

}  // namespace

namespace {
// Compares byte by byte and stops at the first difference, so a short NUL-terminated text (PTX)
// is never read past its end: neither magic contains a NUL.
bool starts_with(const uint8_t* p, const uint8_t* magic, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != magic[i]) return false;
  return true;
}
}  // namespace

size_t image_size(const void* image) {
  if (!image) return 0;
  const auto* p = static_cast<const uint8_t*>(image);
  static constexpr uint8_t kFatbin[4] = {static_cast<uint8_t>(fatbin::kFatbinMagic),
                                         static_cast<uint8_t>(fatbin::kFatbinMagic >> 8),
                                         static_cast<uint8_t>(fatbin::kFatbinMagic >> 16),
                                         static_cast<uint8_t>(fatbin::kFatbinMagic >> 24)};
  static constexpr uint8_t kElf[4] = {0x7f, 'E', 'L', 'F'};
  if (starts_with(p, kFatbin, 4)) {
    try {
      return fatbin::fatbin_size(p, fatbin::kMaxImageBytes);
    } catch (const fatbin::FatbinError&) {
      return 0;
    }
  }
  if (starts_with(p, kElf, 4)) return p[4] == 2 && p[5] == 1 ? elf_size(p) : 0;
  const size_t n = strnlen(reinterpret_cast<const char*>(p), fatbin::kMaxImageBytes);
  return n > 0 && n < fatbin::kMaxImageBytes ? n + 1 : 0;  // PTX text and its NUL
}

Module* ModuleStore::add_embedded(const void* image, size_t size) {
  auto m = std::make_unique<Module>();
  m->image = static_cast<const uint8_t*>(image);
  m->size = size;
  std::unique_lock lock(mu_);
  modules_.push_back(std::move(m));
  return modules_.back().get();
}

Error ModuleStore::load_image(const void* image, size_t size, Module** out) {
  if (!image || !out) return errc::InvalidValue;
  if (size == 0) size = image_size(image);
  if (size == 0) return errc::InvalidValue;
  try {
    fatbin::check_header(static_cast<const uint8_t*>(image), size);
  } catch (const fatbin::FatbinError& e) {
    LOG_WARN("cannot load a module: %s", e.what());
    return kInvalidKernelImage;
  }
  const ImageHash hash = proto::sha256(image, size);
  std::unique_lock lock(mu_);
  if (auto it = by_hash_.find(hash); it != by_hash_.end()) {
    std::lock_guard<std::mutex> ml(it->second->mu);
    ++it->second->refs;
    *out = it->second;
    return errc::Success;
  }
  auto m = std::make_unique<Module>();
  const auto* p = static_cast<const uint8_t*>(image);
  m->owned.assign(p, p + size);
  m->image = m->owned.data();
  m->size = size;
  m->hash = hash;
  m->hashed = true;
  m->refs = 1;
  by_hash_[hash] = m.get();
  modules_.push_back(std::move(m));
  *out = modules_.back().get();
  return errc::Success;
}

Error ModuleStore::unload(Module* m) {
  std::unique_lock lock(mu_);
  if (!m || std::none_of(modules_.begin(), modules_.end(),
                         [&](const std::unique_ptr<Module>& x) { return x.get() == m; }))
    return errc::InvalidResourceHandle;
  std::lock_guard<std::mutex> ml(m->mu);
  if (m->unloaded || m->refs == 0) return errc::InvalidResourceHandle;
  if (--m->refs == 0) {
    m->unloaded = true;
    by_hash_.erase(m->hash);
  }
  return errc::Success;
}

Function* ModuleStore::function(Module* m, const std::string& name) {
  std::unique_lock lock(mu_);
  std::lock_guard<std::mutex> ml(m->mu);
  if (m->unloaded) return nullptr;
  if (auto it = m->function_index.find(name); it != m->function_index.end()) return it->second;
  functions_.push_back(
      std::make_unique<Function>(Function{m, static_cast<uint32_t>(m->functions.size()), name}));
  m->functions.push_back(name);
  m->function_index[name] = functions_.back().get();
  function_set_.insert(functions_.back().get());
  return functions_.back().get();
}

Variable* ModuleStore::variable(Module* m, const std::string& name, uint64_t size) {
  std::unique_lock lock(mu_);
  std::lock_guard<std::mutex> ml(m->mu);
  if (m->unloaded) return nullptr;
  if (auto it = m->global_index.find(name); it != m->global_index.end()) return it->second;
  variables_.push_back(std::make_unique<Variable>(
      Variable{m, static_cast<uint32_t>(m->globals.size()), name, size}));
  m->globals.push_back(Module::GlobalName{name, size});
  m->global_index[name] = variables_.back().get();
  return variables_.back().get();
}

bool ModuleStore::valid_function(const Function* f) const {
  {
    std::shared_lock lock(mu_);
    if (!function_set_.count(f)) return false;
  }
  return valid(f->module);
}

bool ModuleStore::valid(const Module* m) const {
  std::shared_lock lock(mu_);
  for (auto& x : modules_) {
    if (x.get() != m) continue;
    std::lock_guard<std::mutex> ml(x->mu);
    return !x->unloaded;
  }
  return false;
}

void ModuleStore::forget_device(int device) {
  std::shared_lock lock(mu_);
  for (auto& m : modules_) {
    std::lock_guard<std::mutex> ml(m->mu);
    if (auto it = m->loaded.find(device); it != m->loaded.end()) {
      m->retired.push_back(std::move(it->second));
      m->loaded.erase(it);
    }
    m->broken.erase(device);
    ++m->epoch[device];
  }
}

std::vector<Module*> ModuleStore::unasked(const void* link, Module* first, size_t max) const {
  std::vector<Module*> out{first};
  std::shared_lock lock(mu_);
  for (auto& m : modules_) {
    if (out.size() >= max) break;
    if (m.get() == first) continue;
    std::lock_guard<std::mutex> ml(m->mu);
    if (m->hashed && !m->unloaded && !m->held.count(link)) out.push_back(m.get());
  }
  return out;
}

}  // namespace rgpu::client
