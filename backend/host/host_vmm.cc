#include "backend/host/host_vmm.h"

#include <sys/mman.h>
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

HostVmm::~HostVmm() {
  for (auto& [addr, size] : mapped_) munmap(reinterpret_cast<void*>(addr), size);
  for (auto& [h, a] : allocs_) close(a.fd);
}

Status HostVmm::create(uint64_t size, uint64_t& handle) {
  int fd = memfd_create("rgpu-vmm", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return Status::fail(err::MemoryAllocation,
                        "host backend: cannot make a physical allocation of " +
                            std::to_string(size) + " bytes: " + strerror(e));
  }
  std::lock_guard<std::mutex> lock(mu_);
  handle = next_++;
  allocs_[handle] = Alloc{fd, size};
  return Status::success();
}

uint64_t HostVmm::size_of(uint64_t handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocs_.find(handle);
  return it == allocs_.end() ? 0 : it->second.size;
}

Status HostVmm::release(uint64_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocs_.find(handle);
  if (it == allocs_.end())
    return Status::fail(err::InvalidValue, "host backend: no physical allocation " + hex(handle));
  close(it->second.fd);  // mappings keep the memory
  allocs_.erase(it);
  return Status::success();
}

Status HostVmm::map(uint64_t addr, uint64_t size, uint64_t offset, uint64_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocs_.find(handle);
  if (it == allocs_.end() || offset > it->second.size || size > it->second.size - offset)
    return Status::fail(err::InvalidValue, "host backend: no physical allocation " + hex(handle) +
                                               " of " + std::to_string(offset + size) + " bytes");
  void* p = mmap(reinterpret_cast<void*>(addr), size, PROT_NONE, MAP_SHARED | MAP_FIXED_NOREPLACE,
                 it->second.fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED || reinterpret_cast<uint64_t>(p) != addr) {
    int e = errno;
    if (p != MAP_FAILED) munmap(p, size);
    return Status::fail(err::MemoryAllocation, "host backend: cannot map " + std::to_string(size) +
                                                   " bytes at " + hex(addr) + ": " +
                                                   (p == MAP_FAILED ? strerror(e) : "moved"));
  }
  mapped_[addr] = size;
  return Status::success();
}

Status HostVmm::unmap(uint64_t addr, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = mapped_.find(addr);
  if (it == mapped_.end() || it->second != size)
    return Status::fail(err::InvalidValue, "host backend: no mapping of " + std::to_string(size) +
                                               " bytes at " + hex(addr));
  munmap(reinterpret_cast<void*>(addr), size);
  mapped_.erase(it);
  return Status::success();
}

Status HostVmm::protect(uint64_t addr, uint64_t size, uint32_t flags) {
  int prot = flags == 3 ? PROT_READ | PROT_WRITE : flags == 1 ? PROT_READ : PROT_NONE;
  if (mprotect(reinterpret_cast<void*>(addr), size, prot) != 0)
    return Status::fail(err::InvalidValue,
                        "host backend: cannot set access at " + hex(addr) + ": " + strerror(errno));
  return Status::success();
}

}  // namespace rgpu::backend
