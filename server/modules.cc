// Modules and kernels of a session: fat binaries by content hash (this session's, then the shared
// on-disk cache), kernel lookup with parameter layouts checked against the driver, launches,
// function attributes, and forwarding of what kernels print.  Loading an image is bounded: its
// headers are checked against the per-image decompression budget first, only the entry this
// GPU loads is decompressed, under one of the daemon's decompression slots, and the module's
// code and variables are charged to the session's quota (server/quota.h) until it goes.
#include <algorithm>
#include <chrono>

#include "common/log.h"
#include "proto/auth.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {

constexpr uint64_t kMaxModule = 1ull << 30;
constexpr uint32_t kMaxModuleNames = 1u << 20;  // a client's index of a name in its module
constexpr CudaError kInvalidKernelImage = 200;
constexpr CudaError kSymbolNotFound = 500;
constexpr CudaError kInvalidDeviceFunction = 98;
constexpr uint32_t kAttrCcMajor = 75, kAttrCcMinor = 76;  // cudaDevAttrComputeCapability*

std::string describe_layout(const fatbin::KernelLayout& l) {
  std::string s = "(";
  for (size_t i = 0; i < l.params.size(); ++i)
    s += (i ? ", " : "") + std::to_string(l.params[i].offset) + ":" +
         std::to_string(l.params[i].size);
  return s + ")";
}

// What the server says about an image it cannot parse.
std::string parse_error(const std::vector<uint8_t>& image, const fatbin::FatbinError& e) {
  const bool fat = image.size() >= 4 && image[0] == 0x50 && image[1] == 0xED;
  return std::string(fat ? "cannot parse the fat binary: " : "cannot parse the module image: ") +
         e.what();
}

}  // namespace

uint64_t Session::layout_bytes(const fatbin::KernelLayout& l) {
  uint64_t end = 0;
  for (auto& p : l.params) end = std::max<uint64_t>(end, uint64_t(p.offset) + p.size);
  return end;
}

void Session::forward_output() { forward_output(current_->header.request_id); }

void Session::forward_output(uint64_t request_id) {
  // The dispatcher and waiters: one taker at a time, so no output is sent twice.
  std::lock_guard<std::mutex> lock(output_mu_);  // no backend call, no wait (Block::Never)
  if (config_.output) {
    std::string out = config_.output->take();
    if (!out.empty()) {
      DeviceOutputMsg m;
      m.bytes.assign(out.begin(), out.end());
      push_frame(static_cast<uint16_t>(MsgId::DeviceOutput), 0, request_id, encode_message(m));
    }
  }
  if (config_.errors) {  // device assert messages (devmem)
    std::string out = config_.errors->take();
    if (!out.empty()) {
      DeviceStderrMsg m;
      m.bytes.assign(out.begin(), out.end());
      push_frame(static_cast<uint16_t>(MsgId::DeviceStderr), 0, request_id, encode_message(m));
    }
  }
}

void Session::unload_modules(int dev) {
  if (!modules_[dev].empty()) settle_peer_copies("unloading modules");
  for (Module& m : modules_[dev]) exec_.module_unload(dev, m.handle);
  modules_[dev].clear();
  module_ids_[dev].clear();
  quota_.release_all(Hold::ModuleGlobals, static_cast<uint32_t>(dev));
  quota_.release_all(Hold::ModuleCode, static_cast<uint32_t>(dev));
}

Image Session::find_image(const Hash& hash, Status& s) {
  if (auto it = images_.find(hash); it != images_.end()) return it->second;
  Image image = config_.module_cache ? config_.module_cache->get(hash) : nullptr;
  if (!image) {
    s = Status::fail(kSymbolNotFound, "module not cached on the server");
    return nullptr;
  }
  s = keep_image(hash, image);
  return s.ok() ? image : nullptr;
}

Image Session::receive_image(const Hash& hash, uint64_t size, Status& s) {
  if (size == 0 || size > kMaxModule) {
    s = Status::fail(err::InvalidValue, "module image size out of range");
    return nullptr;
  }
  if (!images_.count(hash) && images_bytes_ + size > kMaxSessionImages) {
    s = Status::fail(err::MemoryAllocation, "this session already holds " +
                                                std::to_string(images_bytes_ >> 20) +
                                                " MiB of module images (at most " +
                                                std::to_string(kMaxSessionImages >> 20) + " MiB)");
    return nullptr;
  }
  auto image = std::make_shared<std::vector<uint8_t>>();
  image->reserve(std::min<uint64_t>(size, 64u << 20));  // grows with what arrives
  if (current_->payload->gather(*image) != size) {
    s = Status::fail(err::InvalidValue, "the client went away in the middle of the module");
    return nullptr;
  }
  if (sha256(image->data(), image->size()) != hash) {
    s = Status::fail(err::InvalidValue, "module image does not match its hash");
    return nullptr;
  }
  if (auto it = images_.find(hash); it != images_.end()) return it->second;  // sent twice
  return image;
}

Status Session::on(ModuleHaveMsg, const ModuleHaveReq& q, ModuleHaveRep& rep) {
  rep.held.reserve(q.hashes.size());
  for (const Hash& h : q.hashes)
    rep.held.push_back(images_.count(h) || (config_.module_cache && config_.module_cache->has(h)));
  return Status::success();
}

Status Session::find_and_resolve(const ModuleResolveReq& q, bool by_name, ModuleSlotsRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  Status s;
  Image image = find_image(q.hash, s);
  if (!image) return s;
  return resolve_module(q.device, q.hash, image, q.functions, q.variables, by_name, rep);
}

Status Session::ship_and_resolve(const ModuleShipReq& q, bool by_name, ModuleSlotsRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  Status s;
  Image image = receive_image(q.hash, q.image_size, s);
  if (!image) return s;
  const bool fresh = !images_.count(q.hash);
  // Only an image that parses and loads reaches the shared cache (or this session's images).
  if (Status l = load_module(q.device, q.hash, image); !l.ok()) return l;
  if (fresh) {
    if (config_.module_cache) config_.module_cache->put(q.hash, *image, /*hash_checked=*/true);
    if (Status k = keep_image(q.hash, image); !k.ok()) return k;
  }
  return resolve_module(q.device, q.hash, image, q.functions, q.variables, by_name, rep);
}

Status Session::on(ModuleResolveMsg, const ModuleResolveReq& q, ModuleSlotsRep& rep) {
  return find_and_resolve(q, true, rep);
}

Status Session::on(ModuleShipMsg, const ModuleShipReq& q, ModuleSlotsRep& rep) {
  return ship_and_resolve(q, true, rep);
}

// ModuleLookup and ModuleLoad (clients before lazy modules): every name, at its position.
namespace {
void indexed(const std::vector<std::string>& functions, const std::vector<VarName>& variables,
             std::vector<NameAt>& f, std::vector<NameAt>& v) {
  for (size_t i = 0; i < functions.size(); ++i)
    f.push_back(NameAt{static_cast<uint32_t>(i), functions[i], 0});
  for (size_t i = 0; i < variables.size(); ++i)
    v.push_back(NameAt{static_cast<uint32_t>(i), variables[i].name, variables[i].size});
}

Status legacy_reply(Status s, ModuleSlotsRep& from, ModuleRep& rep) {
  rep.module = from.module;
  rep.kernels = std::move(from.kernels);
  rep.variables = std::move(from.variables);
  return s;
}
}  // namespace

Status Session::on(ModuleLookupMsg, const ModuleLookupReq& q, ModuleRep& rep) {
  ModuleResolveReq r{q.device, q.hash, {}, {}};
  indexed(q.functions, q.variables, r.functions, r.variables);
  ModuleSlotsRep slots;
  return legacy_reply(find_and_resolve(r, false, slots), slots, rep);
}

Status Session::on(ModuleLoadMsg, const ModuleLoadReq& q, ModuleRep& rep) {
  ModuleShipReq r{q.device, q.hash, q.image_size, {}, {}};
  indexed(q.functions, q.variables, r.functions, r.variables);
  ModuleSlotsRep slots;
  return legacy_reply(ship_and_resolve(r, false, slots), slots, rep);
}

Status Session::keep_image(const Hash& hash, const Image& image) {
  if (images_.count(hash)) return Status::success();
  if (images_bytes_ + image->size() > kMaxSessionImages)
    return Status::fail(err::MemoryAllocation,
                        "this session already holds " + std::to_string(images_bytes_ >> 20) +
                            " MiB of module images (at most " +
                            std::to_string(kMaxSessionImages >> 20) + " MiB)");
  images_bytes_ += image->size();
  images_[hash] = image;
  return Status::success();
}

uint32_t Session::device_arch(uint32_t dev) {
  if (archs_[dev]) return archs_[dev];
  backend::DeviceInfo info;
  if (!exec_.device_info(static_cast<int>(dev), info).ok()) return 0;  // every entry, then
  int32_t major = 0, minor = 0;
  for (const auto& [attr, value] : info.attrs) {
    if (attr == kAttrCcMajor) major = value;
    if (attr == kAttrCcMinor) minor = value;
  }
  if (major > 0 && minor >= 0) archs_[dev] = static_cast<uint32_t>(major * 10 + minor);
  return archs_[dev];
}

Status Session::describe_module(uint32_t dev, const Image& image, fatbin::ModuleInfo& info,
                                DecompressionSlot& slot) {
  fatbin::ImagePlan plan;
  try {
    plan = fatbin::plan_image(image->data(), image->size(), device_arch(dev));
  } catch (const fatbin::FatbinError& e) {
    return Status::fail(kInvalidKernelImage, parse_error(*image, e));
  }
  // Checked on the headers, before anything is decompressed: every entry counts (the driver
  // picks the one it loads), so a few kilobytes cannot make the GPU's driver inflate gigabytes.
  const uint64_t budget = fatbin::decompression_budget(image->size(), config_.image_floor);
  if (plan.declared > budget)
    return Status::fail(err::MemoryAllocation,
                        "the module image of " + std::to_string(image->size()) +
                            " bytes decompresses to " + std::to_string(plan.declared) +
                            " bytes, beyond rgpud's budget of " + std::to_string(budget) +
                            " bytes for it (--max-image-mb " +
                            std::to_string(config_.image_floor >> 20) + ", or " +
                            std::to_string(fatbin::kMaxExpansion) + "x the image)");
  // The code the GPU will hold counts against the session's quota before it is inflated.
  if (Status s = charge_memory(
          Hold::ModuleCode, dev, plan.chosen_bytes,
          "loading a module of " + std::to_string(plan.chosen_bytes) + " bytes of code");
      !s.ok())
    return s;
  if (plan.decompresses()) {
    auto start = std::chrono::steady_clock::now();
    bool by_user = false;
    if (!slot.take(config_.decompressions, config_.decompression_wait_ms, config_.user,
                   config_.decompressions_per_user, &by_user)) {
      quota_.release(Hold::ModuleCode, dev, plan.chosen_bytes);
      return Status::fail(err::MemoryAllocation,
                          "no decompression slot came free within " +
                              std::to_string(config_.decompression_wait_ms) + " ms: " +
                              (by_user ? "the user's sessions already decompressed " +
                                             std::to_string(config_.decompressions_per_user) +
                                             " module images, the most one user may at once "
                                             "(--max-decompressions-per-user)"
                                       : "rgpud decompresses at most " +
                                             std::to_string(config_.decompressions->slots()) +
                                             " module images at once (--max-decompressions)"));
    }
    if (slot.held())
      LOG_INFO("decompression slot %d taken after %lld ms", slot.index(),
               static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::steady_clock::now() - start)
                                          .count()));
  }
  try {
    info = fatbin::describe_image(image->data(), image->size(), plan);
  } catch (const fatbin::FatbinError& e) {
    quota_.release(Hold::ModuleCode, dev, plan.chosen_bytes);
    return Status::fail(kInvalidKernelImage, parse_error(*image, e));
  }
  info.code_bytes = plan.chosen_bytes;  // what was charged (equal: declared sizes are checked)
  return Status::success();
}

Status Session::load_module(uint32_t dev, const Hash& hash, const Image& image) {
  if (module_ids_[dev].count(hash)) return Status::success();
  const int d = static_cast<int>(dev);
  // Loading a module or its functions may synchronize the GPU's context (lazy loading).
  settle_peer_copies("loading a module");
  Module m;
  DecompressionSlot slot;  // held while the backend loads (its driver decompresses too)
  if (Status s = describe_module(dev, image, m.info, slot); !s.ok()) return s;
  m.code_bytes = m.info.code_bytes;
  auto refuse = [&](Status s) {
    quota_.release(Hold::ModuleCode, dev, m.code_bytes);
    quota_.release(Hold::ModuleGlobals, dev, m.global_bytes);
    return s;
  };
  // Its variables, as the image says, before the backend allocates them.
  uint64_t globals = m.info.global_bytes;
  for (const auto& [name, var] : m.info.globals)  // named ones outside those sections, if any
    globals = std::max(globals, var.size);
  if (Status s = charge_memory(
          Hold::ModuleGlobals, dev, globals,
          "loading a module whose variables take " + std::to_string(globals) + " bytes");
      !s.ok())
    return refuse(s);
  m.global_bytes = globals;
  if (Status s = exec_.module_load(d, image->data(), image->size(), m.info, m.handle); !s.ok())
    return refuse(s);
  // And as the backend reports it, when it set aside more (rounding, alignment).
  if (uint64_t reported = exec_.module_bytes(d, m.handle); reported > m.global_bytes) {
    if (Status s = charge_memory(
            Hold::ModuleGlobals, dev, reported - m.global_bytes,
            "loading a module whose variables take " + std::to_string(reported) + " bytes");
        !s.ok()) {
      exec_.module_unload(d, m.handle);
      return refuse(s);
    }
    m.global_bytes = reported;
  }
  slot.reset();
  module_ids_[dev].emplace(hash, static_cast<uint32_t>(modules_[dev].size()));
  modules_[dev].push_back(std::move(m));
  LOG_INFO("module %s loaded on GPU %u", hex(hash.data(), 8).c_str(), dev);
  return Status::success();
}

Status Session::resolve_module(uint32_t dev, const Hash& hash, const Image& image,
                               const std::vector<NameAt>& functions,
                               const std::vector<NameAt>& variables, bool by_name,
                               ModuleSlotsRep& rep) {
  const int d = static_cast<int>(dev);
  for (const std::vector<NameAt>* names : {&functions, &variables})
    for (const NameAt& n : *names)
      if (n.index >= kMaxModuleNames)
        return Status::fail(err::InvalidValue, "module name index out of range");
  if (Status s = load_module(dev, hash, image); !s.ok()) return s;
  auto it = module_ids_[dev].find(hash);
  Module& m = modules_[dev][it->second];
  rep.module = it->second;
  for (const NameAt& f : functions) {
    uint32_t at = f.index;
    if (by_name) {
      auto [slot, added] = m.slots.emplace(f.name, static_cast<uint32_t>(m.slots.size()));
      if (added && slot->second >= kMaxModuleNames) {
        m.slots.erase(slot);
        return Status::fail(err::InvalidValue, "too many functions asked for in one module");
      }
      at = slot->second;
    }
    if (at >= m.kernels.size()) {
      m.kernels.resize(at + 1, 0);
      m.layouts.resize(at + 1);
    }
    rep.slots.push_back(at);
    KernelDesc desc;
    if (by_name && m.kernels[at]) {  // resolved before, for this or another client module
      desc.found = true;
      for (auto& p : m.layouts[at].params) desc.params.push_back({p.offset, p.size});
      rep.kernels.push_back(std::move(desc));
      continue;
    }
    m.kernels[at] = 0;
    uint64_t k = 0;
    std::optional<fatbin::KernelLayout> driver;
    if (exec_.kernel_get(d, m.handle, f.name, k, driver).ok()) {
      auto parsed = m.info.kernels.find(f.name);
      if (driver && parsed != m.info.kernels.end() && *driver != parsed->second)
        return Status::fail(kInvalidKernelImage,
                            "parameter layout of kernel " + f.name +
                                " differs: the fat binary says " + describe_layout(parsed->second) +
                                ", the driver says " + describe_layout(*driver));
      if (driver || parsed != m.info.kernels.end()) {
        m.kernels[at] = k;
        m.layouts[at] = driver ? *driver : parsed->second;
        desc.found = true;
        for (auto& p : m.layouts[at].params) desc.params.push_back({p.offset, p.size});
      }
    }
    rep.kernels.push_back(std::move(desc));
  }
  for (const NameAt& v : variables) {
    VarDesc desc;
    if (exec_.global_get(d, m.handle, v.name, desc.addr, desc.size).ok()) {
      desc.found = true;
      allocs_[dev].add(desc.addr, desc.size, /*freeable=*/false);
    }
    rep.variables.push_back(desc);
  }
  return Status::success();
}

Status Session::find_kernel(const FuncReq& f, uint64_t& kernel) const {
  if (Status s = check_device(f.device); !s.ok()) return s;
  if (f.module >= modules_[f.device].size())
    return Status::fail(err::InvalidValue, "no such module in this session");
  const Module& m = modules_[f.device][f.module];
  if (f.kernel >= m.kernels.size() || !m.kernels[f.kernel])
    return Status::fail(kInvalidDeviceFunction, "no such kernel in the module");
  kernel = m.kernels[f.kernel];
  return Status::success();
}

Status Session::prepare_launch(const LaunchReq& q, LaunchTarget& t) {
  if (Status s = find_kernel(FuncReq{q.device, q.module, q.kernel}, t.kernel); !s.ok()) return s;
  t.layout = &modules_[q.device][q.module].layouts[q.kernel];
  if (q.args.size() != layout_bytes(*t.layout))
    return Status::fail(err::InvalidValue, "kernel argument buffer does not match the layout");
  if (Status s = stream_of(q.device, q.stream, t.stream); !s.ok()) return s;
  t.dims.grid[0] = q.gx, t.dims.grid[1] = q.gy, t.dims.grid[2] = q.gz;
  t.dims.block[0] = q.bx, t.dims.block[1] = q.by, t.dims.block[2] = q.bz;
  t.dims.shared_mem = q.shared_mem;
  return Status::success();
}

Status Session::on(LaunchMsg, const LaunchReq& q, Empty&) {
  LaunchTarget t;
  if (Status s = prepare_launch(q, t); !s.ok()) return s;
  launched_ = true;
  return exec_.launch(static_cast<int>(q.device), t.kernel, t.dims, q.args.data(), q.args.size(),
                      *t.layout, t.stream);
}

Status Session::on(FuncGetAttributesMsg, const FuncReq& q, FuncGetAttributesRep& rep) {
  uint64_t kernel = 0;
  if (Status s = find_kernel(q, kernel); !s.ok()) return s;
  return exec_.func_attributes(static_cast<int>(q.device), kernel, rep.values);
}

Status Session::on(FuncSetAttributeMsg, const FuncSetAttributeReq& q, Empty&) {
  uint64_t kernel = 0;
  if (Status s = find_kernel(q.func, kernel); !s.ok()) return s;
  return exec_.func_set_attribute(static_cast<int>(q.func.device), kernel, q.attr, q.value);
}

Status Session::on(FuncSetCacheConfigMsg, const FuncSetCacheConfigReq& q, Empty&) {
  uint64_t kernel = 0;
  if (Status s = find_kernel(q.func, kernel); !s.ok()) return s;
  return exec_.func_set_cache_config(static_cast<int>(q.func.device), kernel, q.config);
}

Status Session::on(OccupancyMsg, const OccupancyReq& q, OccupancyRep& rep) {
  uint64_t kernel = 0;
  if (Status s = find_kernel(q.func, kernel); !s.ok()) return s;
  return exec_.occupancy(static_cast<int>(q.func.device), kernel, q.block_size, q.dynamic_smem,
                         q.flags, rep.blocks);
}

}  // namespace rgpu::server
