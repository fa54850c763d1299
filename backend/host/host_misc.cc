#include "backend/host/host_misc.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <string>

namespace rgpu::backend {
namespace {

constexpr CudaError kPeerAccessAlreadyEnabled = 704;
constexpr CudaError kPeerAccessNotEnabled = 705;
constexpr size_t kPageBytes = 4096;

Status sys_fail(const char* what) {
  return Status::fail(err::MemoryAllocation, std::string("host backend: ") + what +
                                                 " for a shared event: " + strerror(errno));
}

// cudaAtomicOperation values and cudaAtomicOperationCapability bits (driver_types.h).
enum : uint32_t { kSigned = 1, kUnsigned = 2, kReduction = 4, kScalar32 = 8, kScalar64 = 16 };
constexpr uint32_t kLastOperation = 12;  // cudaAtomicOperationFloatMax

}  // namespace

SharedEvent::~SharedEvent() {
  if (page_) munmap(page_, kPageBytes);
  if (fd_ >= 0) close(fd_);
}

Status SharedEvent::create(std::shared_ptr<SharedEvent>& out) {
  int fd = memfd_create("rgpu-ipc-event", MFD_CLOEXEC);
  if (fd < 0) return sys_fail("memfd_create");
  if (ftruncate(fd, kPageBytes) != 0) {
    Status s = sys_fail("ftruncate");
    close(fd);
    return s;
  }
  Status s = open(fd, out);
  close(fd);
  return s;
}

Status SharedEvent::open(int fd, std::shared_ptr<SharedEvent>& out) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < kPageBytes)
    return Status::fail(err::InvalidValue,
                        "host backend: the IPC event handle's descriptor is not a shared event");
  auto e = std::make_shared<SharedEvent>();
  e->fd_ = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (e->fd_ < 0) return sys_fail("dup");
  void* p = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, e->fd_, 0);
  if (p == MAP_FAILED) return sys_fail("mmap");
  e->page_ = static_cast<Page*>(p);
  out = std::move(e);
  return Status::success();
}

Status SharedEvent::dup(int& fd) const {
  fd = fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  return fd < 0 ? sys_fail("dup") : Status::success();
}

uint32_t SharedEvent::next_record() { return page_->recorded.fetch_add(1) + 1; }

void SharedEvent::done(uint32_t n) {
  uint32_t cur = page_->completed.load();
  while (static_cast<int32_t>(n - cur) > 0 && !page_->completed.compare_exchange_weak(cur, n)) {
  }
  // Shared (not private) futex: the other session may be waiting on the word.
  syscall(SYS_futex, &page_->completed, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

FencePtr SharedEvent::fence_now(const std::shared_ptr<SharedEvent>& self) {
  const uint32_t target = page_->recorded.load();
  auto reached = [self, target] {
    return static_cast<int32_t>(self->page_->completed.load() - target) >= 0;
  };
  auto wait = [self, reached] {
    while (!reached()) {
      uint32_t cur = self->page_->completed.load();
      if (reached()) break;
      timespec ts{0, 50 * 1000 * 1000};  // a wakeup the futex missed is seen within 50 ms
      syscall(SYS_futex, &self->page_->completed, FUTEX_WAIT, cur, &ts, nullptr, 0);
    }
  };
  return std::make_shared<Fence>(reached, wait);
}

Status HostMisc::enable_peer(int dev, int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!peers_.insert({dev, peer}).second)
    return Status::fail(
        kPeerAccessAlreadyEnabled,
        "GPU " + std::to_string(dev) + " already has peer access to GPU " + std::to_string(peer));
  return Status::success();
}

Status HostMisc::disable_peer(int dev, int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!peers_.erase({dev, peer}))
    return Status::fail(kPeerAccessNotEnabled, "GPU " + std::to_string(dev) +
                                                   " has no peer access to GPU " +
                                                   std::to_string(peer) + " to disable");
  return Status::success();
}

void HostMisc::reset(int dev) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = peers_.begin(); it != peers_.end();)
    it = it->first == dev ? peers_.erase(it) : std::next(it);
}

Status HostMisc::atomic_caps(int peer, const std::vector<uint32_t>& ops,
                             std::vector<uint32_t>& caps) {
  // The emulated GPUs are threads of one process: every operation is a CPU atomic on 32- and
  // 64-bit integers (float add/min/max by compare-and-swap), with the host and between GPUs alike.
  (void)peer;
  caps.clear();
  for (uint32_t op : ops) {
    if (op > kLastOperation)
      return Status::fail(err::InvalidValue, "unknown atomic operation " + std::to_string(op) +
                                                 " (cudaAtomicOperation)");
    uint32_t c = kScalar32 | kScalar64;
    if (op <= 4) c |= kSigned | kUnsigned | kReduction;             // add, min, max, inc, dec
    if (op >= 5 && op <= 7) c |= kSigned | kUnsigned | kReduction;  // and, or, xor
    if (op == 8 || op == 9) c |= kSigned | kUnsigned;               // exchange, CAS
    if (op >= 10) c |= kSigned | kReduction;                        // float add, min, max
    caps.push_back(c);
  }
  return Status::success();
}

}  // namespace rgpu::backend
