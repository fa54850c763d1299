#include "backend/host/host_ipc.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace rgpu::backend {
namespace {

std::string hex(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

HostIpc::~HostIpc() {
  for (auto& [base, fd] : shared_) close(fd);
  close_all_imports();
}

Status HostIpc::export_mapping(uint64_t base, uint64_t size, int& fd) {
  auto it = shared_.find(base);
  if (it == shared_.end()) {
    int m = memfd_create("rgpu-ipc", MFD_CLOEXEC);
    if (m < 0)
      return Status::fail(
          err::MemoryAllocation,
          std::string("host backend: memfd_create for an IPC export: ") + strerror(errno));
    const auto* src = reinterpret_cast<const char*>(base);
    bool ok = ftruncate(m, static_cast<off_t>(size)) == 0;
    for (uint64_t done = 0; ok && done < size;) {
      ssize_t n = pwrite(m, src + done, size - done, static_cast<off_t>(done));
      if (n <= 0 && errno != EINTR) ok = false;
      if (n > 0) done += static_cast<uint64_t>(n);
    }
    void* p = ok ? mmap(reinterpret_cast<void*>(base), size, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_FIXED, m, 0)
                 : MAP_FAILED;
    if (p == MAP_FAILED) {
      int e = errno;
      close(m);
      return Status::fail(err::MemoryAllocation, "host backend: cannot share the mapping at " +
                                                     hex(base) + " for IPC: " + strerror(e));
    }
    it = shared_.emplace(base, m).first;
  }
  fd = fcntl(it->second, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    return Status::fail(
        err::MemoryAllocation,
        std::string("host backend: cannot duplicate an IPC descriptor: ") + strerror(errno));
  return Status::success();
}

void HostIpc::forget(uint64_t base) {
  auto it = shared_.find(base);
  if (it == shared_.end()) return;
  close(it->second);
  shared_.erase(it);
}

Status HostIpc::import(int fd, uint32_t kind, uint64_t addr, uint64_t span, uint64_t offset,
                       uint64_t size) {
  if (kind != kKind)
    return Status::fail(err::InvalidValue,
                        "the IPC handle's memory comes from another kind of backend");
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  struct stat st {};
  if (size == 0 || offset > span || size > span - offset || addr % page || fstat(fd, &st) != 0 ||
      static_cast<uint64_t>(st.st_size) < span)
    return Status::fail(err::InvalidValue, "the IPC export's memory is smaller than it claims");
  const uint64_t lo = offset / page * page;
  const uint64_t hi = (offset + size + page - 1) / page * page;  // <= span: a page multiple
  void* want = reinterpret_cast<void*>(addr + lo);
  void* p = mmap(want, hi - lo, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd,
                 static_cast<off_t>(lo));
  if (p == MAP_FAILED || p != want) {
    int e = errno;
    if (p != MAP_FAILED) munmap(p, hi - lo);
    return Status::fail(err::MemoryAllocation, "host backend: cannot map an IPC import of " +
                                                   std::to_string(size) + " bytes at " +
                                                   hex(addr + offset) + ": " +
                                                   (p == MAP_FAILED ? strerror(e) : "moved"));
  }
  imports_[addr] = Import{span, addr + lo, hi - lo};
  return Status::success();
}

Status HostIpc::close_import(uint64_t addr, uint64_t span) {
  auto it = imports_.find(addr);
  if (it == imports_.end() || it->second.span != span)
    return Status::fail(err::InvalidValue, "host backend: no IPC import at " + hex(addr));
  munmap(reinterpret_cast<void*>(it->second.at), it->second.len);
  imports_.erase(it);
  return Status::success();
}

void HostIpc::close_all_imports() {
  for (auto& [addr, im] : imports_) munmap(reinterpret_cast<void*>(im.at), im.len);
  imports_.clear();
}

}  // namespace rgpu::backend
