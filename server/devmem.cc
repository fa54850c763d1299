// Requests of the device-and-memory group (issue 11 items 6, 7, 10): context settings of a GPU.
// Pitch and 3-D copies and memsets need nothing here: the client sends them as rows of the
// existing 2-D requests (server/bulk.cc).  Kernels' stderr is forwarded in forward_output.
#include <string>

#include "server/session.h"

namespace rgpu::server {

using namespace proto;
using backend::Status;

Status Session::on(DeviceConfigMsg, const DeviceConfigReq& q, DeviceConfigRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (q.op < static_cast<uint32_t>(DeviceConfigOp::SetLimit) ||
      q.op > static_cast<uint32_t>(DeviceConfigOp::P2PAttribute))
    return Status::fail(err::InvalidValue, "unknown device setting " + std::to_string(q.op));
  const auto op = static_cast<backend::Executor::ConfigOp>(q.op);
  uint64_t value = q.value;
  if (op == backend::Executor::ConfigOp::P2PAttribute) {
    if (Status s = check_device(static_cast<uint32_t>(q.value)); !s.ok()) return s;
    if (q.value == q.device)
      return Status::fail(err::InvalidDevice, "a P2P attribute needs two different GPUs");
  }
  Status s = exec_.device_config(static_cast<int>(q.device), op, q.key, value);
  rep.value = value;
  return s;
}

}  // namespace rgpu::server
