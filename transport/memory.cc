#include "transport/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transport/shm/segment.h"

namespace rgpu::transport {

MemoryRegion allocate_region(const char* name, size_t size) {
  if (size == 0) throw TransportError("cannot register an empty memory region");
  std::string why;
  MemoryRegion r;
  r.fd = shm_create_sealed(name, size, why);
  if (r.fd < 0)
    throw TransportError("cannot create a shared segment of " + std::to_string(size) +
                         " bytes: " + why);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(r.fd);
    throw TransportError("cannot map a shared segment of " + std::to_string(size) +
                         " bytes: " + strerror(e));
  }
  r.base = p;
  r.size = size;
  return r;
}

void free_region(MemoryRegion& r) {
  if (r.base) munmap(r.base, r.size);
  if (r.fd >= 0) close(r.fd);
  r = MemoryRegion{};
}

RemoteMapping map_peer_segment(int fd, uint64_t key, uint64_t size) {
  std::string why;
  if (fd < 0)
    why = "no descriptor came with it";
  else if (size == 0)
    why = "the segment is empty";
  else
    shm_check_sealed(fd, size, why);
  void* p =
      why.empty() ? mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (why.empty() && p == MAP_FAILED) why = std::string("mmap: ") + strerror(errno);
  if (fd >= 0) close(fd);
  if (p == MAP_FAILED)
    throw TransportError("registered segment " + std::to_string(key) + ": " + why);
  return RemoteMapping{static_cast<char*>(p), size};
}

}  // namespace rgpu::transport
