// A memory pool shared between two processes (run the exporter, then the importer with the data
// it printed; both get the same scratch directory).
//   export <dir>        a pool shareable as a POSIX file descriptor; a 1 MiB allocation from it
//                       set to 0x5a; cudaMemPoolExportPointer's data printed as "data <128 hex>";
//                       the pool's descriptor sent over the Unix socket <dir>/sock (SCM_RIGHTS);
//                       then, once <dir>/done exists, the importer's writes are visible here.
//   import <dir> <hex>  receives the descriptor, imports the pool and the pointer, reads the
//                       exporter's bytes, writes 0x33 over the first half, frees, creates
//                       <dir>/done.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"

namespace {

constexpr size_t kBytes = 1 << 20;

std::string to_hex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

bool from_hex(const std::string& s, unsigned char* p, size_t n) {
  if (s.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i)
    p[i] = static_cast<unsigned char>(std::stoi(s.substr(2 * i, 2), nullptr, 16));
  return true;
}

bool wait_file(const std::string& path, int seconds) {
  struct stat st;
  for (int i = 0; i < seconds * 100; ++i) {
    if (stat(path.c_str(), &st) == 0) return true;
    usleep(10000);
  }
  return false;
}

sockaddr_un address(const std::string& dir) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "%s/sock", dir.c_str());
  return a;
}

bool send_fd(const std::string& dir, int fd) {
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a = address(dir);
  unlink(a.sun_path);
  if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(s, 1) != 0)
    return false;
  printf("listening\n");
  fflush(stdout);
  int c = accept(s, nullptr, nullptr);
  close(s);
  if (c < 0) return false;
  char byte = 'p';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  cmsghdr* h = CMSG_FIRSTHDR(&m);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(h), &fd, sizeof fd);
  bool ok = sendmsg(c, &m, 0) == 1;
  close(c);
  return ok;
}

int receive_fd(const std::string& dir) {
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a = address(dir);
  if (s < 0 || connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  int fd = -1;
  if (recvmsg(s, &m, 0) == 1)
    if (cmsghdr* h = CMSG_FIRSTHDR(&m); h && h->cmsg_type == SCM_RIGHTS)
      memcpy(&fd, CMSG_DATA(h), sizeof fd);
  close(s);
  return fd;
}

cudaMemPoolProps props(cudaMemAllocationHandleType type) {
  cudaMemPoolProps p{};
  p.allocType = cudaMemAllocationTypePinned;
  p.handleTypes = type;
  p.location.type = cudaMemLocationTypeDevice;
  p.location.id = 0;
  return p;
}

int export_mode(const std::string& dir) {
  cudaMemPool_t plain, pool;
  cudaMemPoolProps pp = props(cudaMemHandleTypeNone);
  REQUIRE_OK(cudaMemPoolCreate(&plain, &pp));
  int fd = -1;
  EXPECT_ERR(
      cudaMemPoolExportToShareableHandle(&fd, plain, cudaMemHandleTypePosixFileDescriptor, 0),
      cudaErrorInvalidValue);
  cudaGetLastError();
  pp = props(cudaMemHandleTypePosixFileDescriptor);
  REQUIRE_OK(cudaMemPoolCreate(&pool, &pp));
  REQUIRE_OK(
      cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor, 0));
  EXPECT_TRUE(fd >= 0, "the shareable handle is a file descriptor");
  cudaStream_t s;
  REQUIRE_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void* p = nullptr;
  REQUIRE_OK(cudaMallocFromPoolAsync(&p, kBytes, pool, s));
  EXPECT_OK(cudaMemsetAsync(p, 0x5a, kBytes, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  cudaMemPoolPtrExportData data;
  REQUIRE_OK(cudaMemPoolExportPointer(&data, p));
  printf("data %s\n", to_hex(data.reserved, sizeof data.reserved).c_str());
  fflush(stdout);
  EXPECT_TRUE(send_fd(dir, fd), "the pool's descriptor went to the importer");
  EXPECT_TRUE(wait_file(dir + "/done", 30), "the importer finished");
  std::vector<unsigned char> host(kBytes);
  EXPECT_OK(cudaMemcpy(host.data(), p, kBytes, cudaMemcpyDeviceToHost));
  bool first = true, second = true;
  for (size_t i = 0; i < kBytes / 2; ++i) first = first && host[i] == 0x33;
  for (size_t i = kBytes / 2; i < kBytes; ++i) second = second && host[i] == 0x5a;
  EXPECT_TRUE(first && second, "the importer's writes reached the exporter's allocation");
  EXPECT_OK(cudaFreeAsync(p, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_OK(cudaMemPoolDestroy(pool));
  EXPECT_OK(cudaMemPoolDestroy(plain));
  EXPECT_OK(cudaStreamDestroy(s));
  close(fd);
  return finish("pool_share export");
}

int import_mode(const std::string& dir, const std::string& hex) {
  cudaMemPoolPtrExportData data;
  if (!from_hex(hex, data.reserved, sizeof data.reserved)) {
    printf("FAIL not export data: %s\n", hex.c_str());
    return 2;
  }
  int fd = receive_fd(dir);
  EXPECT_TRUE(fd >= 0, "received the pool's descriptor");
  cudaMemPool_t pool;
  REQUIRE_OK(cudaMemPoolImportFromShareableHandle(
      &pool, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
      cudaMemHandleTypePosixFileDescriptor, 0));
  void* q = nullptr;
  EXPECT_TRUE(cudaMallocFromPoolAsync(&q, 4096, pool, 0) != cudaSuccess,
              "an imported pool makes no allocations");
  cudaGetLastError();
  void* p = nullptr;
  REQUIRE_OK(cudaMemPoolImportPointer(&p, pool, &data));
  std::vector<unsigned char> host(kBytes);
  EXPECT_OK(cudaMemcpy(host.data(), p, kBytes, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (size_t i = 0; i < kBytes; ++i) ok = ok && host[i] == 0x5a;
  EXPECT_TRUE(ok, "the importer reads the exporter's bytes");
  EXPECT_OK(cudaMemset(p, 0x33, kBytes / 2));
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT_OK(cudaFree(p));
  EXPECT_OK(cudaMemPoolDestroy(pool));
  close(fd);
  FILE* f = fopen((dir + "/done").c_str(), "w");
  if (f) fclose(f);
  return finish("pool_share import");
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "export" && argc > 2) return export_mode(argv[2]);
  if (mode == "import" && argc > 3) return import_mode(argv[2], argv[3]);
  fprintf(stderr, "usage: pool_share export <dir> | import <dir> <data>\n");
  return 2;
}
