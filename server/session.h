// One client's session, run in its own process: the handshake (version, authentication), then
// requests executed in order until the client leaves.  Everything the client allocated is released
// when the session ends, however the connection ends.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/executor.h"
#include "proto/auth.h"
#include "proto/frame.h"
#include "server/allocation_table.h"
#include "server/module_cache.h"
#include "server/output_capture.h"
#include "transport/connection.h"

namespace rgpu::server {

struct SessionConfig {
  std::optional<std::string> token;  // when set, clients must prove they hold it
  std::string server_info;           // "rgpud 0.1.0 on host"
  size_t staging_bytes = 8u << 20;   // one staging buffer for copies through host memory
  const ModuleCache* module_cache = nullptr;  // shared fat binaries by hash (may be null)
  OutputCapture* output = nullptr;            // kernels' stdout, forwarded at sync points
};

class Session {
 public:
  Session(transport::Connection& conn, backend::Executor& exec, SessionConfig config);
  ~Session();
  // Serves the client until it disconnects or breaks the protocol.  Never throws.
  void run();

 private:
  bool handshake();
  void serve(const proto::FrameHeader& h, const std::vector<uint8_t>& body);
  template <class M>
  void dispatch(const proto::FrameHeader& h, const std::vector<uint8_t>& body);

  // Handlers, one per catalogue message (tagged by its Msg type).
  using Status = backend::Status;
  Status on(proto::PingMsg, const proto::PingReq&, proto::PingRep&);
  Status on(proto::GetDeviceInfoMsg, const proto::DeviceReq&, proto::GetDeviceInfoRep&);
  Status on(proto::DeviceSynchronizeMsg, const proto::DeviceReq&, proto::Empty&);
  Status on(proto::DeviceResetMsg, const proto::DeviceReq&, proto::Empty&);
  Status on(proto::MemGetInfoMsg, const proto::DeviceReq&, proto::MemGetInfoRep&);
  Status on(proto::MallocMsg, const proto::MallocReq&, proto::MallocRep&);
  Status on(proto::FreeMsg, const proto::FreeReq&, proto::Empty&);
  Status on(proto::MemcpyHtoDMsg, const proto::MemcpyHtoDReq&, proto::Empty&);
  Status on(proto::MemcpyDtoHMsg, const proto::MemcpyDtoHReq&, proto::Empty&);
  Status on(proto::MemcpyDtoDMsg, const proto::MemcpyDtoDReq&, proto::Empty&);
  Status on(proto::MemsetMsg, const proto::MemsetReq&, proto::Empty&);
  Status on(proto::Memcpy2DHtoDMsg, const proto::Memcpy2DHtoDReq&, proto::Empty&);
  Status on(proto::Memcpy2DDtoHMsg, const proto::Memcpy2DDtoHReq&, proto::Empty&);
  Status on(proto::Memcpy2DDtoDMsg, const proto::Memcpy2DDtoDReq&, proto::Empty&);
  Status on(proto::ModuleLookupMsg, const proto::ModuleLookupReq&, proto::ModuleRep&);
  Status on(proto::ModuleLoadMsg, const proto::ModuleLoadReq&, proto::ModuleRep&);
  Status on(proto::LaunchMsg, const proto::LaunchReq&, proto::Empty&);
  Status on(proto::FuncGetAttributesMsg, const proto::FuncReq&, proto::FuncGetAttributesRep&);
  Status on(proto::FuncSetAttributeMsg, const proto::FuncSetAttributeReq&, proto::Empty&);
  Status on(proto::FuncSetCacheConfigMsg, const proto::FuncSetCacheConfigReq&, proto::Empty&);
  Status on(proto::OccupancyMsg, const proto::OccupancyReq&, proto::OccupancyRep&);
  // Handshake messages arriving after the handshake are protocol errors.
  Status on(proto::HelloMsg, const proto::HelloReq&, proto::HelloRep&);
  Status on(proto::AuthMsg, const proto::AuthReq&, proto::Empty&);

  Status check_device(uint32_t dev) const;
  Status check_range(uint32_t dev, uint64_t ptr, uint64_t pitch, uint64_t width,
                     uint64_t height) const;
  // Bulk payloads: receive `height` rows of `width` bytes into device memory / send them back.
  Status receive_rows(uint32_t dev, uint64_t dst, uint64_t dpitch, uint64_t width, uint64_t height);
  Status send_rows(uint32_t dev, uint64_t src, uint64_t spitch, uint64_t width, uint64_t height);
  void drain_payload();
  // Loads (once per GPU) and resolves a module for the client's kernel and variable names.
  Status resolve_module(uint32_t dev, const proto::Hash& hash, const Image& image,
                        const std::vector<std::string>& functions,
                        const std::vector<proto::VarName>& variables, proto::ModuleRep& rep);
  Status find_kernel(const proto::FuncReq& f, uint64_t& kernel) const;
  void unload_modules(int dev);
  void forward_output();
  void* staging();

  void send_frame(uint16_t type, uint16_t flags, uint64_t id, const std::vector<uint8_t>& body);
  void send_error(const proto::FrameHeader& h, const Status& s);

  transport::Connection& conn_;
  backend::Executor& exec_;
  SessionConfig config_;
  std::vector<AllocationTable> allocs_;
  proto::Nonce challenge_{};
  proto::FrameHeader current_{};  // the request being served
  uint64_t payload_left_ = 0;  // bytes of the current request's payload not yet consumed
  bool reply_sent_ = false;    // the current handler already sent its reply (payload out)
  CudaError sticky_ = err::Success;
  struct Module {
    uint64_t handle = 0;
    fatbin::ModuleInfo info;
    std::vector<uint64_t> kernels;  // backend handles, by the client's function index (0: missing)
    std::vector<fatbin::KernelLayout> layouts;
  };
  std::vector<std::vector<Module>> modules_;                 // per GPU, by module id
  std::vector<std::map<proto::Hash, uint32_t>> module_ids_;  // per GPU
  std::map<proto::Hash, Image> images_;                      // this session's fat binaries
  bool launched_ = false;  // a kernel ran: forward its output at sync points
  void* staging_ = nullptr;
};

}  // namespace rgpu::server
