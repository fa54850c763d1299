#include "server/session.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cstring>

#include "common/log.h"

namespace rgpu::server {

using namespace rgpu::proto;
using backend::Rect;
using Status = backend::Status;

namespace {

constexpr int kHandshakeTimeoutSec = 10;

void set_recv_timeout(int fd, int seconds) {
  timeval tv{seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

Status invalid(const char* what) { return Status::fail(err::InvalidValue, what); }

}  // namespace

Session::Session(transport::Connection& conn, backend::Executor& exec, SessionConfig config)
    : conn_(conn),
      exec_(exec),
      config_(std::move(config)),
      allocs_(exec.device_count()),
      modules_(exec.device_count()),
      module_ids_(exec.device_count()) {}

Session::~Session() {
  for (size_t d = 0; d < allocs_.size(); ++d)
    for (uint64_t p : allocs_[d].allocations()) exec_.mem_free(static_cast<int>(d), p);
  if (staging_) exec_.free_staging(staging_);
}

void Session::run() {
  try {
    if (!handshake()) return;
    std::vector<uint8_t> body;
    for (;;) {
      uint8_t raw[kHeaderSize];
      if (!conn_.recv_or_eof(raw, sizeof raw)) {
        LOG_INFO("client %s disconnected", conn_.peer().c_str());
        return;
      }
      FrameHeader h = decode_header(raw);
      body.resize(h.body_len);
      if (h.body_len) conn_.recv(body.data(), body.size());
      serve(h, body);
    }
  } catch (const ProtoError& e) {
    LOG_WARN("closing connection from %s: malformed message: %s", conn_.peer().c_str(), e.what());
  } catch (const transport::TransportError& e) {
    LOG_INFO("client %s gone: %s", conn_.peer().c_str(), e.what());
  } catch (const std::exception& e) {
    LOG_ERROR("closing connection from %s: %s", conn_.peer().c_str(), e.what());
  }
}

bool Session::handshake() {
  set_recv_timeout(conn_.fd(), kHandshakeTimeoutSec);
  uint8_t raw[kHeaderSize];
  if (!conn_.recv_or_eof(raw, sizeof raw)) return false;
  FrameHeader h = decode_header(raw);
  if (h.type != static_cast<uint16_t>(MsgId::Hello) || h.payload_len != 0)
    throw ProtoError("the first message is not Hello");
  std::vector<uint8_t> body(h.body_len);
  if (!body.empty()) conn_.recv(body.data(), body.size());
  // Magic and version come first in every protocol version.
  Reader r(body.data(), body.size());
  uint32_t magic = r.get<uint32_t>();
  uint32_t version = r.get<uint32_t>();
  if (magic != kMagic) throw ProtoError("bad magic in Hello");
  if (version != kProtocolVersion) {
    std::string msg = "protocol version mismatch: the client speaks rgpu protocol version " +
                      std::to_string(version) + ", this server (" + config_.server_info +
                      ") speaks version " + std::to_string(kProtocolVersion);
    LOG_WARN("refusing %s: %s", conn_.peer().c_str(), msg.c_str());
    send_error(h, Status::fail(err::InsufficientDriver, msg));
    return false;
  }
  HelloReq hello = decode_message<HelloReq>(body.data(), body.size());
  LOG_INFO("client %s: %s (%s)", conn_.peer().c_str(), hello.client_info.c_str(),
           hello.arch.c_str());

  HelloRep rep;
  rep.auth_required = config_.token.has_value();
  if (rep.auth_required) challenge_ = random_nonce();
  rep.challenge = challenge_;
  rep.gpu_count = static_cast<uint32_t>(exec_.device_count());
  rep.driver_version = exec_.driver_version();
  rep.backend = exec_.name();
  rep.server_info = config_.server_info;
  send_frame(h.type, kFlagReply, h.request_id, encode_ok_reply(rep));

  if (rep.auth_required) {
    if (!conn_.recv_or_eof(raw, sizeof raw)) return false;
    FrameHeader a = decode_header(raw);
    if (a.type != static_cast<uint16_t>(MsgId::Auth) || a.payload_len != 0)
      throw ProtoError("authentication required but the client sent no Auth");
    std::vector<uint8_t> abody(a.body_len);
    if (!abody.empty()) conn_.recv(abody.data(), abody.size());
    AuthReq auth = decode_message<AuthReq>(abody.data(), abody.size());
    if (!auth_verify(*config_.token, challenge_, auth.mac)) {
      LOG_WARN("refusing %s: authentication failed (wrong token)", conn_.peer().c_str());
      send_error(a, Status::fail(err::NotPermitted,
                                 "authentication failed: the server did not accept RGPU_TOKEN"));
      return false;
    }
    send_frame(a.type, kFlagReply, a.request_id, encode_ok_reply(Empty{}));
  }
  set_recv_timeout(conn_.fd(), 0);
  return true;
}

void Session::serve(const FrameHeader& h, const std::vector<uint8_t>& body) {
  if (h.flags & kFlagReply) throw ProtoError("client sent a reply frame");
  switch (h.type) {
#define RGPU_MSG(NAME, ID, MODE, PAYLOAD) \
  case ID:                                \
    dispatch<NAME##Msg>(h, body);         \
    return;
#include "proto/catalogue.def"
#undef RGPU_MSG
  }
  throw ProtoError("unknown message type " + std::to_string(h.type));
}

template <class M>
void Session::dispatch(const FrameHeader& h, const std::vector<uint8_t>& body) {
  typename M::Req req = decode_message<typename M::Req>(body.data(), body.size());
  uint64_t expect = 0;
  if constexpr (M::payload == Payload::In) expect = req.payload_bytes();
  if (h.payload_len != expect)
    throw ProtoError(std::string(M::name) + ": payload length does not match its fields");
  current_ = h;
  payload_left_ = h.payload_len;
  reply_sent_ = false;

  typename M::Rep rep{};
  Status s;
  if (sticky_ != err::Success && M::id != MsgId::Ping) {
    s = Status::fail(sticky_, "the device context is unusable after an earlier error");
  } else {
    s = on(M{}, req, rep);
  }
  if (payload_left_) drain_payload();
  if (!s.ok() && cuda_error_is_sticky(s.code)) sticky_ = s.code;
  if (M::mode == Mode::Sync && launched_) forward_output();
  if (reply_sent_) return;  // a payload-out handler answered itself
  if (M::mode == Mode::Sync) {
    if (s.ok())
      send_frame(h.type, kFlagReply, h.request_id, encode_ok_reply(rep));
    else
      send_error(h, s);
  } else if (!s.ok()) {
    LOG_INFO("%s (request %llu) failed: %s", M::name, static_cast<unsigned long long>(h.request_id),
             s.message.c_str());
    AsyncErrorMsg m{h.request_id, h.type, s.code, s.message};
    send_frame(static_cast<uint16_t>(MsgId::AsyncError), 0, h.request_id, encode_message(m));
  }
}

void Session::send_frame(uint16_t type, uint16_t flags, uint64_t id,
                         const std::vector<uint8_t>& body) {
  FrameHeader h{type, flags, static_cast<uint32_t>(body.size()), id, 0};
  uint8_t raw[kHeaderSize];
  encode_header(h, raw);
  iovec v[2] = {{raw, sizeof raw}, {const_cast<uint8_t*>(body.data()), body.size()}};
  conn_.send_all(v, 2);
}

void Session::send_error(const FrameHeader& h, const Status& s) {
  send_frame(h.type, kFlagReply, h.request_id, encode_error_reply(s.code, s.message));
}

void Session::drain_payload() {
  char buf[64 << 10];
  while (payload_left_) {
    size_t n = std::min<uint64_t>(payload_left_, sizeof buf);
    conn_.recv(buf, n);
    payload_left_ -= n;
  }
}

void* Session::staging() {
  if (!staging_) staging_ = exec_.alloc_staging(config_.staging_bytes);
  return staging_;
}

// ---- checks -----------------------------------------------------------------------------------------

Status Session::check_device(uint32_t dev) const {
  if (dev >= allocs_.size()) return Status::fail(err::InvalidDevice, "no such GPU on this server");
  return Status::success();
}

Status Session::check_range(uint32_t dev, uint64_t ptr, uint64_t pitch, uint64_t width,
                            uint64_t height) const {
  if (Status s = check_device(dev); !s.ok()) return s;
  if (height > 1 && width > pitch) return Status::fail(err::InvalidPitchValue, "width exceeds pitch");
  if (width == 0 || height == 0) return Status::success();
  if (height > 1 && pitch > (UINT64_MAX - width) / (height - 1)) return invalid("pitch overflow");
  uint64_t extent = (height - 1) * pitch + width;
  if (!allocs_[dev].contains(ptr, extent))
    return invalid("address range is not inside one device allocation");
  return Status::success();
}

// ---- handlers ---------------------------------------------------------------------------------------

Status Session::on(PingMsg, const PingReq&, PingRep&) { return Status::success(); }

Status Session::on(HelloMsg, const HelloReq&, HelloRep&) {
  throw ProtoError("Hello after the handshake");
}
Status Session::on(AuthMsg, const AuthReq&, Empty&) { throw ProtoError("Auth after the handshake"); }

Status Session::on(GetDeviceInfoMsg, const DeviceReq& q, GetDeviceInfoRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  backend::DeviceInfo info;
  if (Status s = exec_.device_info(static_cast<int>(q.device), info); !s.ok()) return s;
  rep.name = info.name;
  memcpy(rep.uuid.data(), info.uuid, 16);
  rep.total_mem = info.total_mem;
  for (auto& [id, v] : info.attrs) rep.attrs.push_back({id, v});
  return Status::success();
}

Status Session::on(DeviceSynchronizeMsg, const DeviceReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  return exec_.synchronize(static_cast<int>(q.device));
}

Status Session::on(DeviceResetMsg, const DeviceReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  int dev = static_cast<int>(q.device);
  for (uint64_t p : allocs_[dev].allocations()) exec_.mem_free(dev, p);
  allocs_[dev].clear();
  unload_modules(dev);
  sticky_ = err::Success;
  // The staging buffer belongs to a context the reset may destroy; take a new one when needed.
  if (staging_) exec_.free_staging(staging_);
  staging_ = nullptr;
  return exec_.reset(dev);
}

Status Session::on(MemGetInfoMsg, const DeviceReq& q, MemGetInfoRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  return exec_.mem_info(static_cast<int>(q.device), rep.free, rep.total);
}

Status Session::on(MallocMsg, const MallocReq& q, MallocRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (q.size == 0) return invalid("zero-byte allocation");
  Status s = exec_.mem_alloc(static_cast<int>(q.device), q.size, rep.ptr);
  if (s.ok()) allocs_[q.device].add(rep.ptr, q.size);
  return s;
}

Status Session::on(FreeMsg, const FreeReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (!allocs_[q.device].is_base(q.ptr)) return invalid("free of a pointer that is not an allocation");
  allocs_[q.device].remove(q.ptr);
  return exec_.mem_free(static_cast<int>(q.device), q.ptr);
}

Status Session::on(MemcpyHtoDMsg, const MemcpyHtoDReq& q, Empty&) {
  if (Status s = check_range(q.device, q.dst, q.size, q.size, 1); !s.ok()) return s;
  return receive_rows(q.device, q.dst, q.size, q.size, 1);
}

Status Session::on(Memcpy2DHtoDMsg, const Memcpy2DHtoDReq& q, Empty&) {
  if (Status s = check_range(q.device, q.dst, q.dpitch, q.width, q.height); !s.ok()) return s;
  return receive_rows(q.device, q.dst, q.dpitch, q.width, q.height);
}

Status Session::on(MemcpyDtoHMsg, const MemcpyDtoHReq& q, Empty&) {
  if (Status s = check_range(q.device, q.src, q.size, q.size, 1); !s.ok()) return s;
  return send_rows(q.device, q.src, q.size, q.size, 1);
}

Status Session::on(Memcpy2DDtoHMsg, const Memcpy2DDtoHReq& q, Empty&) {
  if (Status s = check_range(q.device, q.src, q.spitch, q.width, q.height); !s.ok()) return s;
  return send_rows(q.device, q.src, q.spitch, q.width, q.height);
}

Status Session::on(MemcpyDtoDMsg, const MemcpyDtoDReq& q, Empty&) {
  if (Status s = check_range(q.device, q.dst, q.size, q.size, 1); !s.ok()) return s;
  if (Status s = check_range(q.device, q.src, q.size, q.size, 1); !s.ok()) return s;
  if (q.size == 0) return Status::success();
  return exec_.copy_on_device(static_cast<int>(q.device), q.dst, q.size, q.src, q.size,
                              Rect{q.size, 1});
}

Status Session::on(Memcpy2DDtoDMsg, const Memcpy2DDtoDReq& q, Empty&) {
  if (Status s = check_range(q.device, q.dst, q.dpitch, q.width, q.height); !s.ok()) return s;
  if (Status s = check_range(q.device, q.src, q.spitch, q.width, q.height); !s.ok()) return s;
  if (q.width == 0 || q.height == 0) return Status::success();
  return exec_.copy_on_device(static_cast<int>(q.device), q.dst, q.dpitch, q.src, q.spitch,
                              Rect{q.width, q.height});
}

Status Session::on(MemsetMsg, const MemsetReq& q, Empty&) {
  if (Status s = check_range(q.device, q.ptr, q.size, q.size, 1); !s.ok()) return s;
  if (q.size == 0) return Status::success();
  return exec_.memset(static_cast<int>(q.device), q.ptr, q.value, q.size);
}

}  // namespace rgpu::server
