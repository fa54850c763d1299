// Lazy modules: nothing travels when an image is registered or loaded.  The first time a function
// or global of a module is needed on a virtual device, every name of the module asked for since
// its last resolution there is resolved in one round trip: by hash when the server holds the
// image (this session's, or its module cache's), else with the image as payload, which is then
// sent once per server.  Whether servers hold images is asked in batches: one ModuleHave for every
// hashed image whose answer is not known yet.
#include <algorithm>

#include "client/client.h"
#include "common/log.h"
#include "proto/auth.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {

constexpr size_t kMaxHaveBatch = 4096;  // hashes in one ModuleHave (32 bytes each)
// Resolutions a look-up makes before it gives up: each may be retired at once by a device reset.
constexpr int kMaxTries = 4;

// Failures the same image gives again on the same device: it is not sent again.
bool refused_image(CudaError e) {
  constexpr CudaError kInvalidKernelImage = 200, kNoKernelImageForDevice = 209, kInvalidPtx = 218,
                      kUnsupportedPtxVersion = 222;
  return e == kInvalidKernelImage || e == kNoKernelImageForDevice || e == kInvalidPtx ||
         e == kUnsupportedPtxVersion;
}

// Keeps what `rep` answered for `functions` and `variables` on `dev` (m->mu held); module
// variables found join `map` (copies to them are recognised).
void commit(Module* m, int dev, const ModuleSlotsRep& rep, const std::vector<NameAt>& functions,
            const std::vector<NameAt>& variables, AddressMap& map) {
  LoadedModule& lm = m->loaded[dev];
  lm.id = rep.module;
  for (size_t i = 0; i < functions.size(); ++i) {
    auto info = std::make_unique<KernelInfo>();
    info->found = rep.kernels[i].found;
    // The server's index of the function (a server from before lazy modules: our own).
    info->slot = rep.slots.size() == functions.size() ? rep.slots[i] : functions[i].index;
    for (const ParamDesc& p : rep.kernels[i].params) {
      info->params.push_back(ParamLayout{p.offset, p.size});
      info->arg_bytes = std::max(info->arg_bytes, p.offset + p.size);
    }
    const uint32_t at = functions[i].index;
    if (at >= lm.kernels.size()) lm.kernels.resize(at + 1);
    if (!lm.kernels[at]) lm.kernels[at] = std::move(info);  // one already handed out stays
  }
  for (size_t i = 0; i < variables.size(); ++i) {
    const VarDesc& v = rep.variables[i];
    const uint32_t at = variables[i].index;
    if (at >= lm.globals.size()) lm.globals.resize(at + 1);
    if (lm.globals[at]) continue;
    lm.globals[at] = GlobalInfo{v.found, v.addr, v.size};
    if (v.found && !map.add_device(DeviceRange{v.addr, v.size, dev, false}))
      LOG_ERROR(
          "device %d: module variable at 0x%llx (%llu bytes) overlaps memory this process "
          "already knows; copies to it are refused",
          dev, static_cast<unsigned long long>(v.addr), static_cast<unsigned long long>(v.size));
  }
}

}  // namespace

int Client::held_on(ServerLink* l, Module* m) {
  {
    std::lock_guard<std::mutex> lock(m->mu);
    if (auto it = m->held.find(l); it != m->held.end()) return it->second ? 1 : 0;
  }
  std::vector<Module*> batch = modules_.unasked(l, m, kMaxHaveBatch);
  if (batch.size() < 2) return -1;  // ModuleResolve asks as well, and resolves when held
  ModuleHaveReq q;
  for (Module* x : batch) {
    std::lock_guard<std::mutex> lock(x->mu);
    q.hashes.push_back(x->hash);
  }
  ModuleHaveRep rep;
  l->stats().note_hashes_asked(q.hashes.size());
  if (l->call<ModuleHaveMsg>(q, &rep) != err::Success || rep.held.size() != batch.size()) return -1;
  for (size_t i = 0; i < batch.size(); ++i) {
    std::lock_guard<std::mutex> lock(batch[i]->mu);
    batch[i]->held.emplace(l, rep.held[i] != 0);
  }
  return rep.held[0] ? 1 : 0;
}

CudaError Client::fetch_module(ServerLink* l, Module* m, uint32_t gpu, bool legacy,
                               const std::vector<NameAt>& functions,
                               const std::vector<NameAt>& variables, ModuleSlotsRep* rep,
                               std::string* why) {
  const std::string name = hex(m->hash.data(), 8);
  if (legacy) {  // every name, at its position, by hash or with the image
    std::vector<std::string> fs;
    std::vector<VarName> vs;
    for (const NameAt& f : functions) fs.push_back(f.name);
    for (const NameAt& v : variables) vs.push_back(VarName{v.name, v.size});
    ModuleRep r;
    CudaError e = l->call<ModuleLookupMsg>(ModuleLookupReq{gpu, m->hash, fs, vs}, &r, nullptr, 0,
                                           nullptr, 0, why);
    if (e == errc::NotFound) {
      iovec image{const_cast<uint8_t*>(m->image), m->size};
      e = l->call<ModuleLoadMsg>(ModuleLoadReq{gpu, m->hash, m->size, fs, vs}, &r, &image, 1,
                                 nullptr, 0, why);
    }
    rep->module = r.module;
    rep->kernels = std::move(r.kernels);
    rep->variables = std::move(r.variables);
    return e;
  }
  auto note_held = [&] {
    std::lock_guard<std::mutex> lock(m->mu);
    m->held[l] = true;
  };
  if (held_on(l, m) != 0) {
    l->stats().note_hashes_asked(1);
    CudaError e = l->call<ModuleResolveMsg>(ModuleResolveReq{gpu, m->hash, functions, variables},
                                            rep, nullptr, 0, nullptr, 0, why);
    if (e != errc::NotFound) {
      if (e == err::Success) {
        note_held();
        LOG_INFO("module %s: found on %s by hash", name.c_str(), l->address().c_str());
      }
      return e;
    }
  }
  iovec image{const_cast<uint8_t*>(m->image), m->size};
  CudaError e = l->call<ModuleShipMsg>(ModuleShipReq{gpu, m->hash, m->size, functions, variables},
                                       rep, &image, 1, nullptr, 0, why);
  LOG_INFO("module %s: sent %zu bytes to %s", name.c_str(), m->size, l->address().c_str());
  if (e == err::Success) note_held();
  return e;
}

CudaError Client::module_on(Module* m, int dev) {
  std::lock_guard<std::mutex> one_at_a_time(m->load_mu);  // a second thread finds it done
  // m->mu is not held across the round trip: a device reset (forget_device) may retire the
  // device's entry meanwhile.  What the server answered before the reset names modules it has
  // since unloaded (and whose ids it hands out again), so it is kept only when the device's epoch
  // is unchanged; otherwise the names are resolved again.
  for (;;) {
    std::vector<NameAt> functions, variables;
    uint64_t epoch = 0;
    {
      std::lock_guard<std::mutex> lock(m->mu);
      if (m->unloaded) return errc::InvalidResourceHandle;
      if (auto b = m->broken.find(dev); b != m->broken.end()) return b->second;
      epoch = m->epoch[dev];
      auto it = m->loaded.find(dev);
      const LoadedModule* lm = it == m->loaded.end() ? nullptr : &it->second;
      for (uint32_t i = 0; i < m->functions.size(); ++i)
        if (!lm || i >= lm->kernels.size() || !lm->kernels[i])
          functions.push_back(NameAt{i, m->functions[i], 0});
      for (uint32_t i = 0; i < m->globals.size(); ++i)
        if (!lm || i >= lm->globals.size() || !lm->globals[i])
          variables.push_back(NameAt{i, m->globals[i].name, m->globals[i].size});
      if (lm && functions.empty() && variables.empty()) return err::Success;
    }
    CudaError e;
    ServerLink* l = link(dev, &e);
    if (!l) return e;
    if (!m->hashed) {  // written under load_mu (held) and mu, read under either
      const ImageHash h = sha256(m->image, m->size);
      std::lock_guard<std::mutex> lock(m->mu);
      m->hash = h;
      m->hashed = true;
    }
    // A server from before lazy modules resolves every name, each time.
    const bool legacy = !l->knows(MsgId::ModuleResolve);
    if (legacy) {
      functions.clear();
      variables.clear();
      std::lock_guard<std::mutex> lock(m->mu);
      for (uint32_t i = 0; i < m->functions.size(); ++i)
        functions.push_back(NameAt{i, m->functions[i], 0});
      for (uint32_t i = 0; i < m->globals.size(); ++i)
        variables.push_back(NameAt{i, m->globals[i].name, m->globals[i].size});
    }
    ModuleSlotsRep rep;
    std::string why;
    e = fetch_module(l, m, devices_[dev].spec.gpu, legacy, functions, variables, &rep, &why);
    if (e != err::Success) {
      {
        std::lock_guard<std::mutex> lock(m->mu);
        if (m->epoch[dev] != epoch) continue;  // reset meanwhile: ask the device as it is now
        if (refused_image(e)) m->broken[dev] = e;
      }
      LOG_ERROR("device %d: cannot load module %s (%zu bytes) from %s: %s", dev,
                hex(m->hash.data(), 8).c_str(), m->size, l->address().c_str(),
                why.empty() ? (cuda_error_name(e) ? cuda_error_name(e) : "error") : why.c_str());
      return e;
    }
    if (rep.kernels.size() != functions.size() || rep.variables.size() != variables.size() ||
        (!rep.slots.empty() && rep.slots.size() != functions.size()))
      return err::Unknown;
    std::lock_guard<std::mutex> lock(m->mu);
    if (m->epoch[dev] != epoch) continue;
    commit(m, dev, rep, functions, variables, map_);
    return err::Success;
  }
}

bool Client::kernel_resolved(const Function* f, int dev) {
  std::lock_guard<std::mutex> lock(f->module->mu);
  auto it = f->module->loaded.find(dev);
  return it != f->module->loaded.end() && f->index < it->second.kernels.size() &&
         it->second.kernels[f->index] && it->second.kernels[f->index]->found;
}

CudaError Client::resolved_kernel(const Function* f, int dev, uint32_t* module,
                                  const KernelInfo** out) {
  if (!f) return errc::InvalidResourceHandle;
  Module* m = f->module;
  for (int tries = 0;; ++tries) {
    {
      std::lock_guard<std::mutex> lock(m->mu);
      if (m->unloaded) return errc::InvalidResourceHandle;
      auto it = m->loaded.find(dev);
      if (it != m->loaded.end() && f->index < it->second.kernels.size() &&
          it->second.kernels[f->index]) {
        *module = it->second.id;
        *out = it->second.kernels[f->index].get();
        return err::Success;
      }
    }
    if (tries == kMaxTries) return err::Unknown;  // forgotten again and again (device resets)
    if (CudaError e = module_on(m, dev); e != err::Success) return e;
  }
}

CudaError Client::resolved_global(const Variable* v, int dev, GlobalInfo* out) {
  if (!v) return errc::InvalidSymbol;
  Module* m = v->module;
  for (int tries = 0;; ++tries) {
    {
      std::lock_guard<std::mutex> lock(m->mu);
      if (m->unloaded) return errc::InvalidResourceHandle;
      auto it = m->loaded.find(dev);
      if (it != m->loaded.end() && v->index < it->second.globals.size() &&
          it->second.globals[v->index]) {
        *out = *it->second.globals[v->index];
        return err::Success;
      }
    }
    if (tries == kMaxTries) return err::Unknown;
    if (CudaError e = module_on(m, dev); e != err::Success) return e;
  }
}

}  // namespace rgpu::client
