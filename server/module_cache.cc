#include "server/module_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "common/log.h"
#include "proto/auth.h"

namespace rgpu::server {
namespace {

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

}  // namespace

std::string default_module_cache_dir() {
  if (const char* x = getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/rgpud/modules";
  if (const char* h = getenv("HOME"); h && *h) return std::string(h) + "/.cache/rgpud/modules";
  return "/tmp/rgpud-" + std::to_string(geteuid()) + "/modules";
}

ModuleCache::ModuleCache(std::string dir) {
  if (dir.empty()) return;
  if (!make_dirs(dir)) {
    LOG_WARN("module cache %s is not usable; every client sends its modules", dir.c_str());
    return;
  }
  dir_ = std::move(dir);
}

std::string ModuleCache::path(const std::array<uint8_t, 32>& hash) const {
  return dir_ + "/" + proto::hex(hash.data(), hash.size()) + ".fatbin";
}

Image ModuleCache::get(const std::array<uint8_t, 32>& hash) const {
  if (dir_.empty()) return nullptr;
  std::ifstream in(path(hash), std::ios::binary);
  if (!in) return nullptr;
  auto image = std::make_shared<std::vector<uint8_t>>(std::istreambuf_iterator<char>(in),
                                                      std::istreambuf_iterator<char>());
  if (proto::sha256(image->data(), image->size()) != hash) {
    LOG_WARN("module cache file %s does not match its name; ignoring it", path(hash).c_str());
    return nullptr;
  }
  return image;
}

void ModuleCache::put(const std::array<uint8_t, 32>& hash,
                      const std::vector<uint8_t>& image) const {
  if (dir_.empty()) return;
  std::string final_path = path(hash);
  std::string tmp = final_path + ".tmp" + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  size_t done = 0;
  while (done < image.size()) {
    ssize_t n = write(fd, image.data() + done, image.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
  if (done == image.size())
    rename(tmp.c_str(), final_path.c_str());
  else
    unlink(tmp.c_str());
}

}  // namespace rgpu::server
