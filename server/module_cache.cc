#include "server/module_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <ctime>

#include "common/log.h"
#include "proto/auth.h"

namespace rgpu::server {
namespace {

constexpr const char* kSuffix = ".fatbin";
constexpr time_t kStaleTempSeconds = 3600;  // a temporary file this old was left by a crash

bool make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      std::string part = path.substr(0, i);
      if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return false;
    }
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Serializes evictions of concurrent sessions (an advisory lock on DIR/.lock, dropped on close).
class DirLock {
 public:
  explicit DirLock(const std::string& dir)
      : fd_(open((dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) {
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~DirLock() {
    if (fd_ >= 0) close(fd_);
  }

 private:
  int fd_;
};

}  // namespace

std::string default_module_cache_dir() {
  if (const char* x = getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/rgpud/modules";
  if (const char* h = getenv("HOME"); h && *h) return std::string(h) + "/.cache/rgpud/modules";
  return "/tmp/rgpud-" + std::to_string(geteuid()) + "/modules";
}

ModuleCache::ModuleCache(std::string dir, uint64_t max_bytes) : max_bytes_(max_bytes) {
  if (dir.empty()) return;
  if (max_bytes == 0) {
    LOG_WARN("module cache %s has a size cap of 0; every client sends its modules", dir.c_str());
    return;
  }
  if (!make_dirs(dir)) {
    LOG_WARN("module cache %s is not usable; every client sends its modules", dir.c_str());
    return;
  }
  dir_ = std::move(dir);
}

std::string ModuleCache::path(const std::array<uint8_t, 32>& hash) const {
  return dir_ + "/" + proto::hex(hash.data(), hash.size()) + kSuffix;
}

Image ModuleCache::get(const std::array<uint8_t, 32>& hash) const {
  if (dir_.empty()) return nullptr;
  const std::string file = path(hash);
  int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return nullptr;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
      static_cast<uint64_t>(st.st_size) > max_image_bytes()) {
    close(fd);
    LOG_WARN("module cache file %s is not a regular file within the size cap; ignoring it",
             file.c_str());
    return nullptr;
  }
  auto image = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < image->size()) {
    ssize_t n = read(fd, image->data() + done, image->size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  if (done == image->size()) futimens(fd, nullptr);  // recently used: last to be evicted
  close(fd);
  if (done != image->size() || proto::sha256(image->data(), image->size()) != hash) {
    LOG_WARN("module cache file %s does not match its name; ignoring it", file.c_str());
    return nullptr;
  }
  return image;
}

bool ModuleCache::has(const std::array<uint8_t, 32>& hash) const {
  struct stat st;
  return !dir_.empty() && lstat(path(hash).c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         st.st_size > 0 && static_cast<uint64_t>(st.st_size) <= max_image_bytes();
}

void ModuleCache::put(const std::array<uint8_t, 32>& hash, const std::vector<uint8_t>& image,
                      bool hash_checked) const {
  if (dir_.empty() || image.empty()) return;
  if (image.size() > max_image_bytes()) {
    LOG_INFO("module of %zu bytes not cached (larger than a quarter of the %llu-byte cache)",
             image.size(), static_cast<unsigned long long>(max_bytes_));
    return;
  }
  if (!hash_checked && proto::sha256(image.data(), image.size()) != hash) {
    LOG_WARN("refusing to cache a module that does not match its hash");
    return;
  }
  static std::atomic<unsigned> counter{0};
  const std::string final_path = path(hash);
  const std::string tmp =
      final_path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter.fetch_add(1));
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  bool ok = write_all(fd, image.data(), image.size());
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp.c_str(), final_path.c_str()) != 0) {
    unlink(tmp.c_str());
    LOG_WARN("cannot write module cache file %s", final_path.c_str());
    return;
  }
  evict();
}

void ModuleCache::evict() const {
  DirLock lock(dir_);
  DIR* d = opendir(dir_.c_str());
  if (!d) return;
  struct File {
    std::string path;
    uint64_t size;
    struct timespec mtime;
  };
  std::vector<File> files;
  uint64_t total = 0;
  const time_t now = time(nullptr);
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 2 || name[0] == '.') continue;
    std::string full = dir_ + "/" + name;
    struct stat st;
    if (lstat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (name.find(".tmp.") != std::string::npos) {
      if (now - st.st_mtime > kStaleTempSeconds) unlink(full.c_str());
      continue;
    }
    if (!ends_with(name, kSuffix)) continue;
    files.push_back({full, static_cast<uint64_t>(st.st_size), st.st_mtim});
    total += static_cast<uint64_t>(st.st_size);
  }
  closedir(d);
  if (total <= max_bytes_) return;
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) {
    return a.mtime.tv_sec != b.mtime.tv_sec ? a.mtime.tv_sec < b.mtime.tv_sec
                                            : a.mtime.tv_nsec < b.mtime.tv_nsec;
  });
  for (const File& f : files) {
    if (total <= max_bytes_) break;
    if (unlink(f.path.c_str()) == 0 || errno == ENOENT) total -= f.size;
    LOG_INFO("module cache: evicted %s", f.path.c_str());
  }
}

}  // namespace rgpu::server
