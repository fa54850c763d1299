#include "server/nvml.h"

#include "channel/channel.h"
#include "common/log.h"
#include "server/session.h"

namespace rgpu::server {

using namespace proto;
using backend::Status;

Status answer_nvml_system(backend::GpuQuery& q, NvmlSystemRep& rep) {
  q.system(rep);
  return Status::success();
}

Status answer_nvml_device(backend::GpuQuery& q, const NvmlDeviceReq& req, NvmlDeviceRep& rep) {
  if (req.gpu >= static_cast<uint32_t>(q.device_count()))
    return Status::fail(err::InvalidDevice, "NVML query: GPU " + std::to_string(req.gpu) +
                                                " does not exist (this server has " +
                                                std::to_string(q.device_count()) + ")");
  return q.device(static_cast<int>(req.gpu), req.want, rep);
}

// ---- a full session answers the same requests (no context is needed for them either)
Status Session::on(NvmlSystemMsg, const NvmlSystemReq&, NvmlSystemRep& rep) {
  if (!config_.gpus) return Status::fail(err::NotSupported, "this session has no NVML answers");
  return answer_nvml_system(*config_.gpus, rep);
}

Status Session::on(NvmlDeviceMsg, const NvmlDeviceReq& q, NvmlDeviceRep& rep) {
  if (!config_.gpus) return Status::fail(err::NotSupported, "this session has no NVML answers");
  return answer_nvml_device(*config_.gpus, q, rep);
}

namespace {

template <class M>
std::vector<uint8_t> answer(const std::vector<uint8_t>& body,
                            Status (*fn)(backend::GpuQuery&, const typename M::Req&,
                                         typename M::Rep&),
                            backend::GpuQuery& q) {
  auto req = decode_message<typename M::Req>(body.data(), body.size());
  typename M::Rep rep{};
  Status s = fn(q, req, rep);
  return s.ok() ? encode_ok_reply(rep) : encode_error_reply(s.code, s.message);
}

Status system_fn(backend::GpuQuery& q, const NvmlSystemReq&, NvmlSystemRep& rep) {
  return answer_nvml_system(q, rep);
}
Status ping_fn(backend::GpuQuery&, const PingReq&, PingRep&) { return Status::success(); }

}  // namespace

void serve_query_link(transport::Connection& conn, backend::GpuQuery& query,
                      const std::vector<uint16_t>& client_known, const std::string& server_info,
                      int client_timeout_s) {
  conn.set_recv_timeout(client_timeout_s);
  conn.set_send_timeout(client_timeout_s);
  channel::Channel ch(conn);
  ch.set_peer_known(client_known);
  try {
    FrameHeader h;
    std::vector<uint8_t> body;
    while (ch.read_frame(h, body, channel::Channel::Wait::Idle)) {
      if (h.payload_len != 0)
        throw ProtoError("a request with a payload on a query link (only NVML queries are served)");
      std::vector<uint8_t> reply;
      switch (static_cast<MsgId>(h.type)) {
        case MsgId::NvmlSystem:
          reply = answer<NvmlSystemMsg>(body, system_fn, query);
          break;
        case MsgId::NvmlDevice:
          reply = answer<NvmlDeviceMsg>(body, answer_nvml_device, query);
          break;
        case MsgId::Ping:
          reply = answer<PingMsg>(body, ping_fn, query);
          break;
        default: {
          char type[16];
          snprintf(type, sizeof type, "0x%04x", h.type);
          std::string what = std::string("this link to ") + server_info +
                             " is for NVML queries only; request type " + type +
                             " needs a session (a link whose Hello asks for one)";
          if (h.flags & kFlagSync) {
            reply = encode_error_reply(err::NotSupported, what);
          } else {
            AsyncErrorMsg e{h.request_id, h.type, err::NotSupported, what};
            ch.send(static_cast<uint16_t>(MsgId::AsyncError), 0, h.request_id, encode_message(e));
            continue;
          }
        }
      }
      ch.send(h.type, kFlagReply, h.request_id, reply);
    }
  } catch (const std::exception& e) {
    LOG_WARN("query link %s ended: %s", conn.peer().c_str(), e.what());
  }
}

}  // namespace rgpu::server
