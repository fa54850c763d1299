#include "transport/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rgpu::transport {

int shm_create_sealed(const char* name, size_t size, std::string& why) {
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    why = std::string("memfd_create: ") + strerror(errno);
    return -1;
  }
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    why = std::string("ftruncate: ") + strerror(errno);
    close(fd);
    return -1;
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    why = std::string("sealing the segment: ") + strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

bool shm_check_sealed(int fd, uint64_t size, std::string& why) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    why = std::string("fstat: ") + strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    why = "the descriptor is not a memory segment";
    return false;
  }
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    why = "the segment cannot be sealed (not a memfd)";
    return false;
  }
  if (!(seals & F_SEAL_SHRINK)) {
    why = "the segment is not sealed against shrinking (F_SEAL_SHRINK)";
    return false;
  }
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) != size) {
    why = "the segment has " + std::to_string(st.st_size) + " bytes, not the " +
          std::to_string(size) + " announced";
    return false;
  }
  return true;
}

}  // namespace rgpu::transport
