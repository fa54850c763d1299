// One connection from this process to one rgpud, opened on first use: handshake, then requests.
// Synchronous requests wait for their reply; asynchronous ones are sent and forgotten unless the
// server reports that they failed, which the next synchronous request on the link returns (CUDA
// reports asynchronous errors at the next synchronizing call).  Payloads go from and into the
// caller's buffers with scatter/gather I/O; nothing is copied on the way.
#pragma once

#include <sys/uio.h>

#include <memory>
#include <mutex>
#include <string>

#include "client/config.h"
#include "common/cuda_errors.h"
#include "proto/frame.h"
#include "transport/connection.h"

namespace rgpu::client {

struct ServerHello {
  uint32_t gpu_count = 0;
  int32_t driver_version = 0;
  std::string backend;
  std::string info;
};

class ServerLink {
 public:
  ServerLink(std::string host, uint16_t port, std::optional<std::string> token);
  ~ServerLink();

  // Connects (once) and returns the handshake's outcome.
  CudaError ensure_connected();
  const ServerHello& hello() const { return hello_; }
  std::string address() const { return host_ + ":" + std::to_string(port_); }

  // Sends request M; `out` is the request's payload, `in` receives the reply's payload.
  template <class M>
  CudaError call(const typename M::Req& req, typename M::Rep* rep = nullptr,
                 const iovec* out = nullptr, int n_out = 0, const iovec* in = nullptr,
                 int n_in = 0) {
    std::vector<uint8_t> body = proto::encode_message(req);
    Decoder decode = [](void* r, const std::vector<uint8_t>& reply, std::string& msg) -> int32_t {
      typename M::Rep tmp{};
      auto* target = r ? static_cast<typename M::Rep*>(r) : &tmp;
      return proto::decode_reply(reply, *target, msg);
    };
    return transact(static_cast<uint16_t>(M::id), M::name, M::mode == proto::Mode::Sync, body,
                    out, n_out, in, n_in, decode, rep);
  }

 private:
  using Decoder = int32_t (*)(void* rep, const std::vector<uint8_t>& body, std::string& message);
  CudaError transact(uint16_t type, const char* name, bool sync, const std::vector<uint8_t>& body,
                     const iovec* out, int n_out, const iovec* in, int n_in, Decoder decode,
                     void* rep);
  CudaError connect_locked();
  CudaError fail_link(const std::string& why);
  void read_frame(proto::FrameHeader& h, std::vector<uint8_t>& body);

  std::string host_;
  uint16_t port_;
  std::optional<std::string> token_;
  std::mutex mu_;
  std::unique_ptr<transport::Connection> conn_;
  bool tried_ = false;
  CudaError state_ = err::Success;  // sticky outcome of connecting / losing the link
  CudaError pending_ = err::Success;  // first asynchronous failure not yet reported
  uint64_t next_id_ = 1;
  ServerHello hello_;
};

}  // namespace rgpu::client
