// Modules and kernels of a session: fat binaries by content hash (this session's, then the shared
// on-disk cache), kernel lookup with parameter layouts checked against the driver, launches,
// function attributes, and forwarding of what kernels print.
#include <algorithm>

#include "common/log.h"
#include "proto/auth.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {

constexpr uint64_t kMaxModule = 1ull << 30;
constexpr CudaError kInvalidKernelImage = 200;
constexpr CudaError kSymbolNotFound = 500;
constexpr CudaError kInvalidDeviceFunction = 98;

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
}

Status Session::on(ModuleLookupMsg, const ModuleLookupReq& q, ModuleRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  Image image;
  if (auto it = images_.find(q.hash); it != images_.end()) image = it->second;
  if (!image && config_.module_cache) image = config_.module_cache->get(q.hash);
  if (!image) return Status::fail(kSymbolNotFound, "module not cached on the server");
  if (Status s = keep_image(q.hash, image); !s.ok()) return s;
  return resolve_module(q.device, q.hash, image, q.functions, q.variables, rep);
}

Status Session::on(ModuleLoadMsg, const ModuleLoadReq& q, ModuleRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (q.image_size == 0 || q.image_size > kMaxModule)
    return Status::fail(err::InvalidValue, "module image size out of range");
  if (!images_.count(q.hash) && images_bytes_ + q.image_size > kMaxSessionImages)
    return Status::fail(err::MemoryAllocation,
                        "this session already holds " + std::to_string(images_bytes_ >> 20) +
                            " MiB of module images (at most " +
                            std::to_string(kMaxSessionImages >> 20) + " MiB)");
  auto image = std::make_shared<std::vector<uint8_t>>();
  image->reserve(std::min<uint64_t>(q.image_size, 64u << 20));  // grows with what arrives
  if (current_->payload->gather(*image) != q.image_size)
    return Status::fail(err::InvalidValue, "the client went away in the middle of the module");
  if (sha256(image->data(), image->size()) != q.hash)
    return Status::fail(err::InvalidValue, "module image does not match its hash");
  // Only an image that parses reaches the shared cache (or this session's images).
  try {
    fatbin::describe_image(image->data(), image->size());
  } catch (const fatbin::FatbinError& e) {
    return Status::fail(kInvalidKernelImage, parse_error(*image, e));
  }
  if (config_.module_cache) config_.module_cache->put(q.hash, *image);
  if (Status s = keep_image(q.hash, image); !s.ok()) return s;
  return resolve_module(q.device, q.hash, image, q.functions, q.variables, rep);
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

Status Session::resolve_module(uint32_t dev, const Hash& hash, const Image& image,
                               const std::vector<std::string>& functions,
                               const std::vector<VarName>& variables, ModuleRep& rep) {
  const int d = static_cast<int>(dev);
  // Loading a module or its functions may synchronize the GPU's context (lazy loading).
  settle_peer_copies("loading a module");
  auto it = module_ids_[dev].find(hash);
  if (it == module_ids_[dev].end()) {
    Module m;
    try {
      m.info = fatbin::describe_image(image->data(), image->size());
    } catch (const fatbin::FatbinError& e) {
      return Status::fail(kInvalidKernelImage, parse_error(*image, e));
    }
    if (Status s = exec_.module_load(d, image->data(), image->size(), m.info, m.handle); !s.ok())
      return s;
    it = module_ids_[dev].emplace(hash, static_cast<uint32_t>(modules_[dev].size())).first;
    modules_[dev].push_back(std::move(m));
    LOG_INFO("module %s loaded on GPU %u", hex(hash.data(), 8).c_str(), dev);
  }
  Module& m = modules_[dev][it->second];
  rep.module = it->second;
  m.kernels.assign(functions.size(), 0);
  m.layouts.assign(functions.size(), {});
  for (size_t i = 0; i < functions.size(); ++i) {
    const std::string& name = functions[i];
    KernelDesc desc;
    uint64_t k = 0;
    std::optional<fatbin::KernelLayout> driver;
    if (exec_.kernel_get(d, m.handle, name, k, driver).ok()) {
      auto parsed = m.info.kernels.find(name);
      if (driver && parsed != m.info.kernels.end() && *driver != parsed->second)
        return Status::fail(kInvalidKernelImage,
                            "parameter layout of kernel " + name +
                                " differs: the fat binary says " + describe_layout(parsed->second) +
                                ", the driver says " + describe_layout(*driver));
      if (driver || parsed != m.info.kernels.end()) {
        m.kernels[i] = k;
        m.layouts[i] = driver ? *driver : parsed->second;
        desc.found = true;
        for (auto& p : m.layouts[i].params) desc.params.push_back({p.offset, p.size});
      }
    }
    rep.kernels.push_back(std::move(desc));
  }
  for (const VarName& v : variables) {
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
