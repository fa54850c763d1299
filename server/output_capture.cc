#include "server/output_capture.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>

namespace rgpu::server {

bool OutputCapture::start(int target) {
  int fd = memfd_create(target == STDERR_FILENO ? "rgpud-device-stderr" : "rgpud-device-output",
                        MFD_CLOEXEC);
  if (fd < 0) return false;
  fflush(target == STDERR_FILENO ? stderr : stdout);
  if (dup2(fd, target) < 0 || fcntl(fd, F_SETFL, O_APPEND) < 0) {
    close(fd);
    return false;
  }
  fd_ = fd;
  target_ = target;
  return true;
}

std::string OutputCapture::take() {
  if (fd_ < 0) return {};
  fflush(target_ == STDERR_FILENO ? stderr : stdout);
  off_t n = lseek(fd_, 0, SEEK_END);
  if (n <= 0) return {};
  std::string out(static_cast<size_t>(n), '\0');
  ssize_t got = pread(fd_, out.data(), out.size(), 0);
  out.resize(got > 0 ? static_cast<size_t>(got) : 0);
  if (ftruncate(fd_, 0) != 0) return out;
  return out;
}

}  // namespace rgpu::server
