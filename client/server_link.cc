#include "client/server_link.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "common/log.h"
#include "proto/auth.h"
#include "transport/tcp/tcp.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {

std::string client_arch() {
  utsname u{};
  uname(&u);
  return std::string(u.machine) + "-le-lp64";
}

std::string client_info() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string prog;
  std::ifstream("/proc/self/comm") >> prog;
  return std::string(host) + " pid " + std::to_string(getpid()) + " " + prog;
}

}  // namespace

ServerLink::ServerLink(std::string host, uint16_t port, std::optional<std::string> token)
    : host_(std::move(host)), port_(port), token_(std::move(token)) {}

ServerLink::~ServerLink() = default;

CudaError ServerLink::ensure_connected() {
  std::lock_guard<std::mutex> lock(mu_);
  return connect_locked();
}

CudaError ServerLink::fail_link(const std::string& why) {
  if (state_ == err::Success) LOG_ERROR("lost the connection to rgpud at %s: %s", address().c_str(), why.c_str());
  state_ = err::DevicesUnavailable;
  if (conn_) conn_->shutdown();
  return state_;
}

void ServerLink::read_frame(FrameHeader& h, std::vector<uint8_t>& body) {
  uint8_t raw[kHeaderSize];
  conn_->recv(raw, sizeof raw);
  h = decode_header(raw);
  body.resize(h.body_len);
  if (h.body_len) conn_->recv(body.data(), body.size());
}

CudaError ServerLink::connect_locked() {
  if (tried_) return state_;
  tried_ = true;
  try {
    conn_ = transport::tcp_connect(host_, port_);
  } catch (const transport::TransportError& e) {
    LOG_ERROR("cannot reach rgpud: %s", e.what());
    return state_ = err::DevicesUnavailable;
  }
  try {
    HelloReq hello;
    hello.arch = client_arch();
    hello.client_info = client_info();
    std::vector<uint8_t> body = encode_message(hello);
    FrameHeader h{static_cast<uint16_t>(MsgId::Hello), 0, static_cast<uint32_t>(body.size()), 0, 0};
    uint8_t raw[kHeaderSize];
    encode_header(h, raw);
    iovec v[2] = {{raw, sizeof raw}, {body.data(), body.size()}};
    conn_->send_all(v, 2);
    FrameHeader rh;
    std::vector<uint8_t> reply;
    read_frame(rh, reply);
    HelloRep rep;
    std::string msg;
    int32_t e = decode_reply(reply, rep, msg);
    if (e != err::Success) {
      LOG_ERROR("rgpud at %s refused the connection: %s", address().c_str(), msg.c_str());
      conn_.reset();
      return state_ = e;
    }
    if (rep.magic != kMagic || rep.version != kProtocolVersion) {
      LOG_ERROR("rgpud at %s speaks rgpu protocol version %u, this library speaks version %u",
                address().c_str(), rep.version, kProtocolVersion);
      conn_.reset();
      return state_ = err::InsufficientDriver;
    }
    if (rep.auth_required) {
      if (!token_) {
        LOG_ERROR("rgpud at %s requires authentication: set RGPU_TOKEN to its token",
                  address().c_str());
        conn_.reset();
        return state_ = err::NotPermitted;
      }
      AuthReq auth;
      auth.mac = auth_mac(*token_, rep.challenge);
      body = encode_message(auth);
      h = FrameHeader{static_cast<uint16_t>(MsgId::Auth), 0, static_cast<uint32_t>(body.size()), 0, 0};
      encode_header(h, raw);
      iovec a[2] = {{raw, sizeof raw}, {body.data(), body.size()}};
      conn_->send_all(a, 2);
      read_frame(rh, reply);
      Empty ok;
      e = decode_reply(reply, ok, msg);
      if (e != err::Success) {
        LOG_ERROR("rgpud at %s: %s", address().c_str(), msg.c_str());
        conn_.reset();
        return state_ = err::NotPermitted;
      }
    }
    hello_ = ServerHello{rep.gpu_count, rep.driver_version, rep.backend, rep.server_info};
    LOG_INFO("connected to %s at %s (%u GPU(s), %s backend)", rep.server_info.c_str(),
             address().c_str(), rep.gpu_count, rep.backend.c_str());
    return state_ = err::Success;
  } catch (const std::exception& ex) {
    LOG_ERROR("handshake with rgpud at %s failed: %s", address().c_str(), ex.what());
    conn_.reset();
    return state_ = err::DevicesUnavailable;
  }
}

CudaError ServerLink::transact(uint16_t type, const char* name, bool sync,
                               const std::vector<uint8_t>& body, const iovec* out, int n_out,
                               const iovec* in, int n_in, Decoder decode, void* rep) {
  std::lock_guard<std::mutex> lock(mu_);
  if (CudaError e = connect_locked(); e != err::Success) return e;
  if (!conn_) return state_;
  uint64_t payload = 0, expect_in = 0;
  for (int i = 0; i < n_out; ++i) payload += out[i].iov_len;
  for (int i = 0; i < n_in; ++i) expect_in += in[i].iov_len;
  const uint64_t id = next_id_++;
  try {
    FrameHeader h{type, 0, static_cast<uint32_t>(body.size()), id, payload};
    uint8_t raw[kHeaderSize];
    encode_header(h, raw);
    std::vector<iovec> v;
    v.reserve(2 + n_out);
    v.push_back({raw, sizeof raw});
    v.push_back({const_cast<uint8_t*>(body.data()), body.size()});
    v.insert(v.end(), out, out + n_out);
    conn_->send_all(v.data(), static_cast<int>(v.size()));
    if (!sync) return err::Success;

    std::vector<uint8_t> reply;
    for (;;) {
      FrameHeader rh;
      read_frame(rh, reply);
      if (rh.type == static_cast<uint16_t>(MsgId::AsyncError) && !(rh.flags & kFlagReply)) {
        AsyncErrorMsg m = decode_message<AsyncErrorMsg>(reply.data(), reply.size());
        const char* what = msg_name(m.msg_type);
        LOG_WARN("asynchronous %s failed: %s", what ? what : "request", m.message.c_str());
        if (pending_ == err::Success) pending_ = m.error;
        continue;
      }
      if (rh.type == static_cast<uint16_t>(MsgId::DeviceOutput) && !(rh.flags & kFlagReply)) {
        // What kernels printed: onto this process's stdout, before the call returns.
        DeviceOutputMsg m = decode_message<DeviceOutputMsg>(reply.data(), reply.size());
        fwrite(m.bytes.data(), 1, m.bytes.size(), stdout);
        fflush(stdout);
        continue;
      }
      if (!(rh.flags & kFlagReply) || rh.request_id != id || rh.type != type)
        throw ProtoError("unexpected frame from the server");
      std::string msg;
      int32_t e = decode(rep, reply, msg);
      if (rh.payload_len) {
        if (e != err::Success || rh.payload_len != expect_in)
          throw ProtoError("reply payload does not match the request");
        conn_->recv_all(in, n_in);
      }
      if (rh.flags & kFlagTrailer) {
        uint8_t t[4];
        conn_->recv(t, 4);
        Reader tr(t, 4);
        e = tr.get<int32_t>();
      }
      if (e != err::Success) {
        LOG_INFO("%s failed: %s", name, msg.c_str());
        return e;
      }
      if (pending_ != err::Success) {
        CudaError p = pending_;
        pending_ = err::Success;
        return p;
      }
      return err::Success;
    }
  } catch (const std::exception& ex) {
    return fail_link(ex.what());
  }
}

}  // namespace rgpu::client
