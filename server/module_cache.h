// Fat binaries by content hash, on disk, shared by every session of one rgpud: a second process
// with the same binary sends only the hash.  Files are named by SHA-256 and checked against it
// when read, so one client cannot plant code under another binary's name.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rgpu::server {

using Image = std::shared_ptr<const std::vector<uint8_t>>;

class ModuleCache {
 public:
  // Uses `dir` (created 0700).  An unusable directory disables the cache with a warning.
  explicit ModuleCache(std::string dir);
  Image get(const std::array<uint8_t, 32>& hash) const;
  void put(const std::array<uint8_t, 32>& hash, const std::vector<uint8_t>& image) const;
  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }

 private:
  std::string path(const std::array<uint8_t, 32>& hash) const;
  std::string dir_;
};

// $XDG_CACHE_HOME/rgpud/modules, else $HOME/.cache/rgpud/modules, else /tmp/rgpud-<uid>/modules.
std::string default_module_cache_dir();

}  // namespace rgpu::server
