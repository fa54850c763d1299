#include "server/quota.h"

#include <algorithm>

#include "common/log.h"

namespace rgpu::server {

const char* hold_name(Hold h) {
  switch (h) {
    case Hold::Malloc:
      return "cudaMalloc";
    case Hold::Pool:
      return "memory pools";
    case Hold::Vmm:
      return "cuMemCreate";
    case Hold::IpcImport:
      return "IPC imports";
    case Hold::Array:
      return "CUDA arrays";
    case Hold::ModuleGlobals:
      return "module variables";
    case Hold::ModuleCode:
      return "module code";
    case Hold::kCount:
      break;
  }
  return "?";
}

backend::Status MemoryQuota::charge(Hold why, uint32_t dev, uint64_t bytes,
                                    const std::string& action, CudaError code) {
  std::lock_guard<std::mutex> lock(mu_);
  if (limit_ && (bytes > limit_ || total_ > limit_ - bytes))
    return backend::Status::fail(
        code, action + " would exceed rgpud's per-client device memory limit of " +
                  std::to_string(limit_) + " bytes (--client-mem-limit; " + std::to_string(total_) +
                  " bytes held" + holdings() + ")");
  if (user_.active()) {
    uint64_t user_held = 0;
    int sessions = 0;
    if (!user_.accounts->charge(user_.entry, bytes, user_.limit, user_held, sessions))
      return backend::Status::fail(
          code, action + " would exceed rgpud's per-user device memory limit of " +
                    std::to_string(user_.limit) + " bytes (--mem-limit-per-user; the user's " +
                    std::to_string(sessions) + " sessions hold " + std::to_string(user_held) +
                    " bytes, this one " + std::to_string(total_) + " bytes" + holdings() + ")");
  }
  total_ += bytes;
  held_[{why, dev}] += bytes;
  return backend::Status::success();
}

bool MemoryQuota::fits(uint64_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (limit_ && (bytes > limit_ || total_ > limit_ - bytes)) return false;
  if (!user_.active() || !user_.limit) return true;
  const uint64_t user_held = user_.accounts->held(user_.accounts->user(user_.entry));
  return bytes <= user_.limit && user_held <= user_.limit - bytes;
}

void MemoryQuota::give_back(uint64_t bytes) {
  total_ -= bytes;
  if (user_.active()) user_.accounts->release(user_.entry, bytes);
}

void MemoryQuota::release(Hold why, uint32_t dev, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find({why, dev});
  uint64_t have = it == held_.end() ? 0 : it->second;
  if (bytes > have)  // a bookkeeping error: never let it turn into a bigger quota
    LOG_WARN("releasing %llu bytes of %s on GPU %u, which holds %llu",
             static_cast<unsigned long long>(bytes), hold_name(why), dev,
             static_cast<unsigned long long>(have));
  bytes = std::min(bytes, have);
  if (!bytes) return;
  give_back(bytes);
  if ((it->second -= bytes) == 0) held_.erase(it);
}

void MemoryQuota::release_all(Hold why, uint32_t dev) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find({why, dev});
  if (it == held_.end()) return;
  give_back(it->second);
  held_.erase(it);
}

uint64_t MemoryQuota::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

uint64_t MemoryQuota::held(Hold why) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& [key, bytes] : held_)
    if (key.first == why) n += bytes;
  return n;
}

std::string MemoryQuota::holdings() const {
  std::array<uint64_t, static_cast<size_t>(Hold::kCount)> by{};
  for (const auto& [key, bytes] : held_) by[static_cast<size_t>(key.first)] += bytes;
  std::string s;
  for (size_t i = 0; i < by.size(); ++i)
    if (by[i])
      s += (s.empty() ? ": " : ", ") + std::to_string(by[i]) + " by " +
           hold_name(static_cast<Hold>(i));
  return s;
}

}  // namespace rgpu::server
