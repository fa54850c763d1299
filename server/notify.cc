// Asynchronous notifications (cudaDeviceRegisterAsyncNotification): while the client has a
// callback for a GPU, the backend's notifications of that GPU are queued for it as AsyncNotify
// frames.  The backend calls the target on its own thread (the driver's): it only queues a frame
// (Outbox::Block::Never), never waits.
#include "common/log.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

Status Session::on(AsyncNotifyEnableMsg, const AsyncNotifyEnableReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  const int d = static_cast<int>(q.device);
  if (notify_on_.size() < allocs_.size()) notify_on_.resize(allocs_.size(), false);
  if (!q.enable) {
    if (!notify_on_[d]) return Status::success();
    notify_on_[d] = false;
    return exec_.set_async_notify(d, {});  // returns once no call can queue a frame any more
  }
  if (notify_on_[d]) return Status::success();
  const uint32_t device = q.device;
  Status s = exec_.set_async_notify(d, [this, device](uint32_t type, uint64_t value) {
    push_frame(static_cast<uint16_t>(MsgId::AsyncNotify), 0, 0,
               encode_message(AsyncNotifyMsg{device, type, value}), Outbox::Block::Never);
  });
  if (s.ok()) notify_on_[d] = true;
  return s;
}

void Session::stop_notifications() {
  for (size_t d = 0; d < notify_on_.size(); ++d)
    if (notify_on_[d]) {
      Status s = exec_.set_async_notify(static_cast<int>(d), {});
      if (!s.ok()) LOG_WARN("GPU %zu: stopping notifications: %s", d, s.message.c_str());
      notify_on_[d] = false;
    }
}

}  // namespace rgpu::server
