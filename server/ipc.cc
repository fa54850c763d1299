// CUDA IPC between client processes of one rgpud: the handlers of the ipc group.  The exporting
// session hands its mapping's descriptor to rgpud (server/ipc_exports.h), naming the allocation
// in it, and gets a token; an importing session of the same rgpud gets the descriptor back and
// maps it inside its own client's address window, so the importer sees the memory at an address
// of its own, and its requests may name that allocation only.  An export lives as long as its
// allocation: a free withdraws it (revoke_ipc_export), and the heap never hands the mapping out
// again (DeviceHeap::share), so a handle never reaches memory allocated after it was made.
#include <unistd.h>

#include <cstdio>
#include <iterator>
#include <string>

#include "common/log.h"
#include "server/ipc_exports.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {

constexpr CudaError kInvalidResourceHandle = 400;  // cudaErrorInvalidResourceHandle

std::string hex(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

Status Session::on(IpcGetMemHandleMsg, const IpcGetMemHandleReq& q, IpcGetMemHandleRep& rep) {
  return export_memory(q.device, q.ptr, 0, rep);
}

Status Session::on(IpcGetRangeHandleMsg, const IpcGetRangeHandleReq& q, IpcGetMemHandleRep& rep) {
  if (q.size == 0) return Status::fail(err::InvalidValue, "an IPC handle of an empty range");
  return export_memory(q.device, q.ptr, q.size, rep);
}

Status Session::on(IpcRevokeRangeMsg, const IpcRevokeRangeReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  revoke_ipc_export(q.device, q.ptr);
  return Status::success();
}

void Session::revoke_ipc_exports_in(uint32_t dev, uint64_t start, uint64_t size) {
  auto it = ipc_tokens_.lower_bound({dev, start});
  while (it != ipc_tokens_.end() && it->first.first == dev && it->first.second - start < size) {
    auto next = std::next(it);
    revoke_ipc_export(dev, it->first.second);
    it = next;
  }
}

Status Session::export_memory(uint32_t device, uint64_t ptr, uint64_t range,
                              IpcGetMemHandleRep& rep) {
  if (Status s = check_device(device); !s.ok()) return s;
  if (config_.control < 0)
    return Status::fail(err::NotSupported,
                        "CUDA IPC needs rgpud's session processes (this server has no daemon)");
  // A handle names the allocation that holds the pointer, as CUDA's do (or the range asked for,
  // inside one allocation).
  uint64_t start = 0, size = 0;
  if (!allocs_[device].range_at(ptr, start, size))
    return Status::fail(err::InvalidValue, "cudaIpcGetMemHandle of " + hex(ptr) +
                                               ", which is not device memory " +
                                               "of this session on GPU " + std::to_string(device));
  const uint64_t alloc_start = start;
  if (range) {
    if (range > size - (ptr - start))
      return Status::fail(err::InvalidValue, "an IPC handle of a range past its allocation");
    start = ptr;
    size = range;
  }
  rep.offset = 0;
  const auto key = std::make_pair(device, start);
  const IpcGetMemHandleReq q{device, ptr};
  if (auto it = ipc_tokens_.find(key); it != ipc_tokens_.end()) {
    rep.token = it->second;  // exported before: the same handle
    return Status::success();
  }
  int fd = -1;
  uint64_t base = 0, span = 0;
  uint32_t kind = 0;
  if (Status s =
          exec_.ipc_mem_export(static_cast<int>(q.device), alloc_start, fd, base, span, kind);
      !s.ok())
    return s;
  if (start < base || size > span || start - base > span - size) {
    close(fd);
    return Status::fail(err::Unknown, "the backend's mapping of " + hex(start) +
                                          " does not hold its allocation of " +
                                          std::to_string(size) + " bytes");
  }
  // rgpud keeps the descriptor of the whole mapping; the export names the allocation in it, and
  // the importer's requests may name nothing else.
  IpcToken token{};
  std::string why =
      ipc_export(config_.control, fd,
                 IpcMeta{start - base, size, static_cast<int32_t>(q.device), kind, span}, token);
  close(fd);
  if (!why.empty())
    return Status::fail(err::MemoryAllocation,
                        "cannot export memory at " + hex(q.ptr) + " through rgpud: " + why);
  // The mapping is shared memory now: nothing allocated later may lie in it.
  Status s;
  {
    std::lock_guard<std::timed_mutex> lock(heap_mu_);
    uint64_t mapping = 0, length = 0;
    s = windows_.share(q.device, alloc_start, mapping, length);
  }
  if (!s.ok()) {
    ipc_revoke(config_.control, token);
    return Status::fail(err::InvalidValue, "cudaIpcGetMemHandle of " + hex(q.ptr) +
                                               ": only memory from cudaMalloc or "
                                               "cudaMallocAsync can be exported (" +
                                               s.message + ")");
  }
  ipc_tokens_[key] = token;
  rep.token = token;
  return Status::success();
}

bool Session::revoke_ipc_export(uint32_t dev, uint64_t ptr) {
  auto it = ipc_tokens_.find({dev, ptr});
  if (it == ipc_tokens_.end()) return false;
  // From now on the handle opens nothing: the memory may not follow the allocation's end.
  if (std::string why = ipc_revoke(config_.control, it->second); !why.empty())
    LOG_WARN("withdrawing the IPC export of %s failed: %s", hex(ptr).c_str(), why.c_str());
  ipc_tokens_.erase(it);
  return true;
}

void Session::revoke_ipc_exports(uint32_t dev) {
  for (auto it = ipc_tokens_.begin(); it != ipc_tokens_.end();) {
    auto next = std::next(it);
    if (it->first.first == dev) revoke_ipc_export(dev, it->first.second);
    it = next;
  }
  for (auto it = ipc_event_tokens_.begin(); it != ipc_event_tokens_.end();) {
    auto next = std::next(it);
    if (it->second.first == dev) revoke_ipc_event(it->first);
    it = next;
  }
}

void Session::revoke_ipc_event(uint64_t id) {
  auto it = ipc_event_tokens_.find(id);
  if (it == ipc_event_tokens_.end()) return;
  if (std::string why = ipc_revoke(config_.control, it->second.second); !why.empty())
    LOG_WARN("withdrawing the IPC export of event %llu failed: %s",
             static_cast<unsigned long long>(id), why.c_str());
  ipc_event_tokens_.erase(it);
}

Status Session::on(IpcOpenMemHandleMsg, const IpcOpenMemHandleReq& q, IpcOpenMemHandleRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (config_.control < 0)
    return Status::fail(err::NotSupported,
                        "CUDA IPC needs rgpud's session processes (this server has no daemon)");
  IpcMeta meta;
  int fd = -1;
  std::string why = ipc_import(config_.control, q.token, meta, fd);
  if (!why.empty()) {
    LOG_WARN("cudaIpcOpenMemHandle refused: %s", why.c_str());
    return Status::fail(kInvalidResourceHandle, why);
  }
  // rgpud checked that [offset, offset + size) lies inside the span.
  if (q.offset >= meta.size) {
    close(fd);
    return Status::fail(kInvalidResourceHandle, "the IPC handle's offset " + hex(q.offset) +
                                                    " lies outside its export of " +
                                                    std::to_string(meta.size) + " bytes");
  }
  // The importer counts what it maps (the whole mapping, of which a small export names a part):
  // the mapping keeps the memory alive after its exporter (and its charge) is gone.
  if (Status s = charge_memory(Hold::IpcImport, q.device, meta.span,
                               "opening " + std::to_string(meta.span) +
                                   " bytes of CUDA IPC memory (the mapping of an export of " +
                                   std::to_string(meta.size) + ")");
      !s.ok()) {
    close(fd);
    return s;
  }
  uint64_t addr = 0;
  Status s;
  {
    std::lock_guard<std::timed_mutex> lock(heap_mu_);
    s = windows_.reserve(q.device, q.window, meta.span, addr);
  }
  if (s.ok()) {
    s = exec_.ipc_mem_import(static_cast<int>(q.device), fd, meta.kind, addr, meta.span,
                             meta.offset, meta.size);
    if (!s.ok()) {
      std::lock_guard<std::timed_mutex> lock(heap_mu_);
      windows_.unreserve(q.device, addr, meta.span);
    }
  }
  close(fd);
  if (!s.ok()) {
    quota_.release(Hold::IpcImport, q.device, meta.span);
    return s;
  }
  // Requests may name the exported allocation, and nothing else of the mapping.
  const uint64_t start = addr + meta.offset;
  ipc_imports_[start] = IpcImport{q.device, addr, meta.span, meta.size};  // charged: span
  allocs_[q.device].add(start, meta.size, /*freeable=*/false);
  rep.base = start;
  rep.size = meta.size;
  rep.ptr = start + q.offset;
  return Status::success();
}

Status Session::on(IpcCloseMemHandleMsg, const IpcCloseMemHandleReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  auto it = ipc_imports_.find(q.base);
  if (it == ipc_imports_.end() || it->second.device != q.device)
    return Status::fail(err::InvalidValue,
                        "no memory opened with cudaIpcOpenMemHandle at " + hex(q.base));
  const IpcImport im = it->second;
  if (Status s = exec_.ipc_mem_close(static_cast<int>(q.device), im.map, im.span); !s.ok())
    return s;
  {
    std::lock_guard<std::timed_mutex> lock(heap_mu_);
    windows_.unreserve(q.device, im.map, im.span);
  }
  allocs_[q.device].remove(q.base);
  quota_.release(Hold::IpcImport, q.device, it->second.span);
  ipc_imports_.erase(it);
  return Status::success();
}

void Session::close_ipc_imports(uint32_t dev) {
  for (auto it = ipc_imports_.begin(); it != ipc_imports_.end();) {
    if (it->second.device != dev) {
      ++it;
      continue;
    }
    exec_.ipc_mem_close(static_cast<int>(dev), it->second.map, it->second.span);
    allocs_[dev].remove(it->first);
    quota_.release(Hold::IpcImport, dev, it->second.span);
    it = ipc_imports_.erase(it);
  }
}

}  // namespace rgpu::server
