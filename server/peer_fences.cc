#include "server/peer_fences.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace rgpu::server {

namespace {
constexpr size_t kPageBytes = 8192;
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
static_assert(sizeof(PeerFencePage) <= kPageBytes);
std::atomic_ref<uint32_t> ref(const uint32_t& w) {
  return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(w));
}
}  // namespace

uint32_t peer_fence_load(const uint32_t& word) { return ref(word).load(std::memory_order_acquire); }
void peer_fence_store(uint32_t& word, uint32_t value) {
  ref(word).store(value, std::memory_order_release);
}
void peer_fence_bump(uint32_t& word) { ref(word).fetch_add(1, std::memory_order_acq_rel); }

std::unique_ptr<PeerFenceMap> PeerFenceMap::create(backend::Executor& exec, std::string& why) {
  // Sealed at its size: whoever holds it cannot shrink it under the other's mapping (SIGBUS).
  int fd = memfd_create("rgpu-peer-fences", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || ftruncate(fd, kPageBytes) != 0 || fcntl(fd, F_ADD_SEALS, kSeals) != 0) {
    why = std::string("memfd for peer fences: ") + strerror(errno);
    if (fd >= 0) ::close(fd);
    return nullptr;
  }
  return map(exec, fd, true, why);
}

std::unique_ptr<PeerFenceMap> PeerFenceMap::attach(backend::Executor& exec, int fd,
                                                   std::string& why) {
  off_t size = lseek(fd, 0, SEEK_END);
  if (size != static_cast<off_t>(kPageBytes) || (fcntl(fd, F_GET_SEALS) & kSeals) != kSeals) {
    why = "the peer's fence page has the wrong size or is not sealed";
    ::close(fd);
    return nullptr;
  }
  return map(exec, fd, false, why);
}

std::unique_ptr<PeerFenceMap> PeerFenceMap::map(backend::Executor& exec, int fd, bool keep_fd,
                                                std::string& why) {
  void* p = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    why = std::string("mapping the peer fence page: ") + strerror(errno);
    ::close(fd);
    return nullptr;
  }
  if (!keep_fd) {
    ::close(fd);
    fd = -1;
  }
  if (backend::Status s = exec.host_register_mapped(p, kPageBytes); !s.ok()) {
    why = "page-locking the peer fence page: " + s.message;
    munmap(p, kPageBytes);
    if (fd >= 0) ::close(fd);
    return nullptr;
  }
  return std::unique_ptr<PeerFenceMap>(new PeerFenceMap(exec, static_cast<PeerFencePage*>(p), fd));
}

PeerFenceMap::~PeerFenceMap() {
  exec_.host_unregister(page_);
  munmap(page_, kPageBytes);
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace rgpu::server
