// Fat binaries by content hash, on disk, shared by every session of one rgpud: a second process
// with the same binary sends only the hash.  Files are named by SHA-256 and checked against it
// when read, so one client cannot plant code under another binary's name.  Sessions (separate
// processes) store an image only after validating it (hash and parse), write it to a private
// temporary file and rename it into place, so no reader ever sees a partial file.  The cache has a
// size cap: an image larger than a quarter of it is not stored, and after each store the least
// recently used files (by modification time, which a read refreshes) go until it fits.
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
  static constexpr uint64_t kDefaultMaxBytes = 1024ull << 20;  // rgpud --module-cache-max-mb

  // Uses `dir` (created 0700), holding at most `max_bytes` of images.  An unusable directory (or
  // a cap of 0) disables the cache with a warning.
  explicit ModuleCache(std::string dir, uint64_t max_bytes = kDefaultMaxBytes);
  // The image stored under `hash`, or null (absent, too large, or not matching its name: every
  // image read is hashed).
  Image get(const std::array<uint8_t, 32>& hash) const;
  // Whether a file is stored under `hash` (not read: get() may still refuse it, or find it
  // evicted meanwhile).  For answering many look-ups at once (ModuleHave).
  bool has(const std::array<uint8_t, 32>& hash) const;
  // Stores an image the caller validated (it must parse); refused here when it does not match
  // `hash` (checked unless the caller just computed `hash` from these bytes: `hash_checked`) or is
  // larger than max_image_bytes().  Then evicts least recently used files.
  void put(const std::array<uint8_t, 32>& hash, const std::vector<uint8_t>& image,
           bool hash_checked = false) const;
  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  uint64_t max_bytes() const { return max_bytes_; }
  uint64_t max_image_bytes() const { return max_bytes_ / 4; }

 private:
  std::string path(const std::array<uint8_t, 32>& hash) const;
  void evict() const;
  std::string dir_;
  uint64_t max_bytes_ = 0;
};

// $XDG_CACHE_HOME/rgpud/modules, else $HOME/.cache/rgpud/modules, else /tmp/rgpud-<uid>/modules.
std::string default_module_cache_dir();

}  // namespace rgpu::server
