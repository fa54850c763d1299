// CUDA IPC between client processes of one rgpud: the handlers of the ipc group.  The exporting
// session hands its mapping's descriptor to rgpud (server/ipc_exports.h) and gets a token; an
// importing session of the same rgpud gets the descriptor back and maps it inside its own client's
// address window, so the importer sees the memory at an address of its own.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
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
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (config_.control < 0)
    return Status::fail(err::NotSupported,
                        "CUDA IPC needs rgpud's session processes (this server has no daemon)");
  if (!allocs_[q.device].contains(q.ptr, 1))
    return Status::fail(err::InvalidValue,
                        "cudaIpcGetMemHandle of " + hex(q.ptr) + ", which is not device memory " +
                            "of this session on GPU " + std::to_string(q.device));
  int fd = -1;
  uint64_t base = 0, size = 0;
  uint32_t kind = 0;
  if (Status s = exec_.ipc_mem_export(static_cast<int>(q.device), q.ptr, fd, base, size, kind);
      !s.ok())
    return s;
  rep.offset = q.ptr - base;
  // The same memory exported again gives the same handle; memory freed and mapped anew at the
  // same address (another file behind it) gets a new export, and the old one is withdrawn.
  struct stat st {};
  fstat(fd, &st);
  auto key = std::make_pair(q.device, base);
  if (auto it = ipc_tokens_.find(key); it != ipc_tokens_.end()) {
    if (it->second.inode == st.st_ino) {
      close(fd);
      rep.token = it->second.token;
      return Status::success();
    }
    ipc_revoke(config_.control, it->second.token);
    ipc_tokens_.erase(it);
  }
  IpcToken token{};
  std::string why = ipc_export(config_.control, fd,
                               IpcMeta{0, size, static_cast<int32_t>(q.device), kind}, token);
  close(fd);
  if (!why.empty())
    return Status::fail(err::MemoryAllocation,
                        "cannot export memory at " + hex(q.ptr) + " through rgpud: " + why);
  ipc_tokens_[key] = IpcExportRecord{token, st.st_ino};
  rep.token = token;
  return Status::success();
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
  if (q.offset >= meta.size) {
    close(fd);
    return Status::fail(kInvalidResourceHandle, "the IPC handle's offset " + hex(q.offset) +
                                                    " lies outside its export of " +
                                                    std::to_string(meta.size) + " bytes");
  }
  uint64_t addr = 0;
  Status s;
  {
    std::lock_guard<std::timed_mutex> lock(heap_mu_);
    s = windows_.reserve(q.device, q.window, meta.size, addr);
  }
  if (s.ok()) {
    s = exec_.ipc_mem_import(static_cast<int>(q.device), fd, meta.kind, addr, meta.size);
    if (!s.ok()) {
      std::lock_guard<std::timed_mutex> lock(heap_mu_);
      windows_.unreserve(q.device, addr, meta.size);
    }
  }
  close(fd);
  if (!s.ok()) return s;
  ipc_imports_[addr] = IpcImport{q.device, meta.size};
  allocs_[q.device].add(addr, meta.size, /*freeable=*/false);  // requests may use it
  rep.base = addr;
  rep.size = meta.size;
  rep.ptr = addr + q.offset;
  return Status::success();
}

Status Session::on(IpcCloseMemHandleMsg, const IpcCloseMemHandleReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  auto it = ipc_imports_.find(q.base);
  if (it == ipc_imports_.end() || it->second.device != q.device)
    return Status::fail(err::InvalidValue,
                        "no memory opened with cudaIpcOpenMemHandle at " + hex(q.base));
  if (Status s = exec_.ipc_mem_close(static_cast<int>(q.device), q.base, it->second.size); !s.ok())
    return s;
  {
    std::lock_guard<std::timed_mutex> lock(heap_mu_);
    windows_.unreserve(q.device, q.base, it->second.size);
  }
  allocs_[q.device].remove(q.base);
  ipc_imports_.erase(it);
  return Status::success();
}

void Session::close_ipc_imports(uint32_t dev) {
  for (auto it = ipc_imports_.begin(); it != ipc_imports_.end();) {
    if (it->second.device != dev) {
      ++it;
      continue;
    }
    exec_.ipc_mem_close(static_cast<int>(dev), it->first, it->second.size);
    allocs_[dev].remove(it->first);
    it = ipc_imports_.erase(it);
  }
  for (auto it = ipc_tokens_.begin(); it != ipc_tokens_.end();)
    it = it->first.first == dev ? ipc_tokens_.erase(it) : std::next(it);
}

}  // namespace rgpu::server
