// Page-locked memory shared with a co-located client: segments arrive as descriptors beside the
// byte stream; the server maps them and page-locks them for the GPU, and copies between them and
// device memory are a single DMA.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "server/session.h"
#include "transport/memory.h"

namespace rgpu::server {

using namespace rgpu::proto;
using backend::Rect;
using Status = backend::Status;

Status Session::on(HostShmRegisterMsg, const HostShmRegisterReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (!conn_.capabilities().registers_memory)
    return Status::fail(err::NotSupported, "shared page-locked memory needs the shm transport");
  // The transport takes the registration (the descriptor beside the byte stream) whatever else is
  // wrong, and maps it only when it is exactly q.size bytes sealed against shrinking: a client that
  // truncated a registered segment would make this process fault on the next copy.
  transport::RemoteMapping m;
  std::string why;
  try {
    m = conn_.map_remote(q.id, q.size);
  } catch (const transport::TransportError& e) {
    why = e.what();
  }
  if (why.empty() && (!q.id || shared_.count(q.id))) {
    why = "segment id " + std::to_string(q.id) + " is invalid or already registered";
    conn_.unmap_remote(m);
  }
  if (!why.empty()) {
    LOG_WARN("client %s: refusing a page-locked segment: %s", conn_.peer().c_str(), why.c_str());
    return Status::fail(err::InvalidValue, "bad shared page-locked segment: " + why);
  }
  void* p = m.base;
  if (Status s = exec_.host_register(p, q.size); !s.ok()) {
    conn_.unmap_remote(m);
    return s;
  }
  shared_[q.id] = SharedSegment{static_cast<char*>(p), q.size};
  return Status::success();
}

Status Session::on(HostShmUnregisterMsg, const HostShmUnregisterReq& q, Empty&) {
  auto it = shared_.find(q.id);
  if (it == shared_.end()) return Status::fail(err::InvalidValue, "no such shared segment");
  waiter_.wait_idle();  // no synchronous copy on a waiter uses the segment any more
  for (size_t d = 0; d < allocs_.size(); ++d) exec_.synchronize(static_cast<int>(d));
  exec_.host_unregister(it->second.base);
  conn_.unmap_remote({it->second.base, it->second.size});
  shared_.erase(it);
  return Status::success();
}

Status Session::copy_shm(const MemcpyShmReq& q, bool async) {
  auto it = shared_.find(q.segment);
  if (it == shared_.end()) return Status::fail(err::InvalidValue, "no such shared segment");
  if (q.offset > it->second.size || q.size > it->second.size - q.offset)
    return Status::fail(err::InvalidValue, "range outside the shared segment");
  if (Status s = check_range(q.device, q.device_ptr, q.size, q.size, 1); !s.ok()) return s;
  uint64_t stream = 0;
  if (Status s = stream_of(q.device, q.stream, stream); !s.ok()) return s;
  if (q.size == 0) return Status::success();
  const int d = static_cast<int>(q.device);
  char* host = it->second.base + q.offset;
  if (!async) return copy_shm_sync(d, host, q.device_ptr, q.size, q.to_device);  // on a waiter
  Rect r{q.size, 1};
  if (q.to_device)
    return exec_.copy_to_device_async(d, q.device_ptr, q.size, host, q.size, r, stream);
  return exec_.copy_to_host_async(d, host, q.size, q.device_ptr, q.size, r, stream);
}

Status Session::on(MemcpyShmMsg, const MemcpyShmReq& q, Empty&) { return copy_shm(q, false); }
Status Session::on(MemcpyShmAsyncMsg, const MemcpyShmReq& q, Empty&) { return copy_shm(q, true); }

}  // namespace rgpu::server
