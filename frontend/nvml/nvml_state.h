// The state of rgpu's libnvidia-ml.so.1: its devices are the entries of RGPU_SERVERS, in order,
// as the CUDA front-ends see them (client/config.h parses it); each server is asked over a query
// link of its own (proto::LinkPurpose::Queries), which the server serves without a CUDA context.
// nvmlDevice_t handles point at per-device records that are never freed; the last nvmlShutdown
// retires them, so a handle kept across nvmlShutdown and nvmlInit is a valid pointer that names
// no device (NVML_ERROR_INVALID_ARGUMENT, as NVIDIA's library answers: seen on an H200).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client/config.h"
#include "client/server_link.h"
#include "frontend/nvml/nvml_abi.h"
#include "proto/messages.h"

namespace rgpu::nvml {

struct Device {
  unsigned index = 0;
  client::DeviceSpec spec;
  client::ServerLink* link = nullptr;  // owned by State (one per server)
  std::mutex mu;                       // guards the cached identity
  bool known = false;
  proto::NvmlDeviceRep identity;  // name, UUID, PCI, total memory, compute capability, peers
};

class State {
 public:
  static State& get();

  // Reference counted, as NVML's: the first nvmlInit reads RGPU_SERVERS (nothing is connected
  // until a question needs it); the last nvmlShutdown closes the links.
  nvmlReturn_t init();
  nvmlReturn_t shutdown();

  // UNINITIALIZED before nvmlInit.
  nvmlReturn_t count(unsigned* n);
  nvmlReturn_t by_index(unsigned index, Device** out);
  // The record `h` points at; INVALID_ARGUMENT when it is none of this library's (or null), and
  // UNINITIALIZED before nvmlInit.
  nvmlReturn_t from_handle(nvmlDevice_t h, Device** out);

  // One question about `d` to its server (`want`: proto::NvmlField bits).  A dead or silent server
  // is GPU_IS_LOST within RGPU_TIMEOUT.
  nvmlReturn_t ask(Device& d, uint32_t want, proto::NvmlDeviceRep& out);
  // The identity of `d` (asked once per nvmlInit, then kept).
  nvmlReturn_t identity(Device& d, const proto::NvmlDeviceRep** out);
  // What the first device's server says about itself.
  nvmlReturn_t system(proto::NvmlSystemRep& out);

 private:
  std::mutex mu_;
  int refs_ = 0;
  std::vector<std::unique_ptr<Device>> records_;  // this nvmlInit's devices
  std::vector<std::unique_ptr<Device>> retired_;  // earlier inits': handles stay valid pointers
  unsigned active_ = 0;                           // records_[0, active_) are RGPU_SERVERS' now
  std::map<std::string, std::unique_ptr<client::ServerLink>> links_;  // by "host:port"
};

// The NVML code for a failed request of the client core (a CUDA error number).
nvmlReturn_t to_nvml(CudaError e);

// Exported functions of this library.
#define RGPU_NVML_API extern "C" __attribute__((visibility("default")))

}  // namespace rgpu::nvml
