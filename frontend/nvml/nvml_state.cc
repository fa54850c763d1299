#include "frontend/nvml/nvml_state.h"

#include <algorithm>

#include "common/log.h"

namespace rgpu::nvml {

State& State::get() {
  static State* s = new State;  // never destroyed: handles and links outlive static destructors
  return *s;
}

nvmlReturn_t to_nvml(CudaError e) {
  switch (e) {
    case err::Success:
      return NVML_SUCCESS;
    case err::NotSupported:
      return NVML_ERROR_NOT_SUPPORTED;  // e.g. an older rgpud
    case err::NotPermitted:
      return NVML_ERROR_NO_PERMISSION;  // the token was refused
    case err::InsufficientDriver:
      return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
    case err::InvalidDevice:
      return NVML_ERROR_NOT_FOUND;  // the server lacks the GPU named
    case err::InvalidValue:
      return NVML_ERROR_INVALID_ARGUMENT;
    default:
      return NVML_ERROR_GPU_IS_LOST;  // the link failed or the server is gone
  }
}

nvmlReturn_t State::init() {
  std::lock_guard<std::mutex> lock(mu_);
  if (refs_++ > 0) return NVML_SUCCESS;
  log::init("rgpu-nvml");
  client::Config cfg = client::load_config();
  for (size_t i = 0; i < cfg.devices.size(); ++i) {
    if (i == records_.size()) records_.push_back(std::make_unique<Device>());
    Device& d = *records_[i];
    std::lock_guard<std::mutex> dl(d.mu);
    d.index = static_cast<unsigned>(i);
    d.spec = cfg.devices[i];
    d.known = false;
    d.identity = {};
    const std::string key = d.spec.host + ":" + std::to_string(d.spec.port);
    auto& link = links_[key];
    if (!link)
      link = std::make_unique<client::ServerLink>(d.spec.host, d.spec.port, cfg.token,
                                                  cfg.timeout_s, proto::LinkPurpose::Queries);
    d.link = link.get();
  }
  active_ = static_cast<unsigned>(cfg.devices.size());
  return NVML_SUCCESS;
}

nvmlReturn_t State::shutdown() {
  std::map<std::string, std::unique_ptr<client::ServerLink>> closing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (refs_ == 0) return NVML_ERROR_UNINITIALIZED;
    if (--refs_ > 0) return NVML_SUCCESS;
    active_ = 0;
    for (auto& r : records_) {
      std::lock_guard<std::mutex> dl(r->mu);
      r->link = nullptr;
      retired_.push_back(std::move(r));
    }
    records_.clear();
    closing.swap(links_);
  }
  return NVML_SUCCESS;  // `closing` ends the links (and their threads) outside the lock
}

nvmlReturn_t State::count(unsigned* n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (refs_ == 0) return NVML_ERROR_UNINITIALIZED;  // before the argument, as NVIDIA's library
  if (!n) return NVML_ERROR_INVALID_ARGUMENT;
  *n = active_;
  return NVML_SUCCESS;
}

nvmlReturn_t State::by_index(unsigned index, Device** out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (refs_ == 0) return NVML_ERROR_UNINITIALIZED;
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (index >= active_) return NVML_ERROR_INVALID_ARGUMENT;
  *out = records_[index].get();
  return NVML_SUCCESS;
}

nvmlReturn_t State::from_handle(nvmlDevice_t h, Device** out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (refs_ == 0) return NVML_ERROR_UNINITIALIZED;
  for (unsigned i = 0; i < active_; ++i)
    if (reinterpret_cast<nvmlDevice_t>(records_[i].get()) == h) {
      *out = records_[i].get();
      return NVML_SUCCESS;
    }
  return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t State::ask(Device& d, uint32_t want, proto::NvmlDeviceRep& out) {
  client::ServerLink* link;
  {
    std::lock_guard<std::mutex> lock(mu_);
    link = d.link;
  }
  if (!link) return NVML_ERROR_UNINITIALIZED;
  proto::NvmlDeviceReq req{d.spec.gpu, want};
  CudaError e = link->call<proto::NvmlDeviceMsg>(req, &out);
  if (e != err::Success) {
    LOG_INFO("NVML query of device %u (%s) failed: %s", d.index, d.spec.text.c_str(),
             cuda_error_name(e));
    return to_nvml(e);
  }
  return NVML_SUCCESS;
}

nvmlReturn_t State::identity(Device& d, const proto::NvmlDeviceRep** out) {
  {
    std::lock_guard<std::mutex> lock(d.mu);
    if (d.known) {
      *out = &d.identity;
      return NVML_SUCCESS;
    }
  }
  proto::NvmlDeviceRep rep;
  nvmlReturn_t r = ask(d, proto::kNvmlIdentity | proto::kNvmlPeers, rep);
  if (r != NVML_SUCCESS) return r;
  if (!(rep.have & proto::kNvmlIdentity)) return NVML_ERROR_UNKNOWN;
  std::lock_guard<std::mutex> lock(d.mu);
  if (!d.known) {
    d.identity = std::move(rep);
    d.known = true;
  }
  *out = &d.identity;  // never changes again until the next nvmlInit
  return NVML_SUCCESS;
}

nvmlReturn_t State::system(proto::NvmlSystemRep& out) {
  client::ServerLink* link = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (refs_ == 0) return NVML_ERROR_UNINITIALIZED;
    if (active_ == 0) return NVML_ERROR_NOT_FOUND;  // RGPU_SERVERS names no device
    link = records_[0]->link;
  }
  return to_nvml(link->call<proto::NvmlSystemMsg>(proto::NvmlSystemReq{}, &out));
}

}  // namespace rgpu::nvml
