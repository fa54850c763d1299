#include "transport/registry.h"

#include <algorithm>
#include <chrono>

#include "common/log.h"
#include "common/strings.h"

namespace rgpu::transport {
namespace {

constexpr uint64_t kRankBytes = 1 << 20;  // providers are ranked by the cost of moving 1 MiB

}  // namespace

bool Provider::reaches(const Endpoint& server) const {
  return !capabilities().co_located_only || is_loopback_name(server.host);
}

Registry::Registry(std::vector<std::unique_ptr<Provider>> providers)
    : providers_(std::move(providers)) {}

const Registry& Registry::builtin() {
  static const Registry r = [] {
    std::vector<std::unique_ptr<Provider>> v;
    v.push_back(make_tcp_provider());
    v.push_back(make_shm_provider());
    return Registry(std::move(v));
  }();
  return r;
}

const Provider* Registry::find(const std::string& name) const {
  for (const auto& p : providers_)
    if (name == p->name()) return p.get();
  return nullptr;
}

std::string Registry::choices() const {
  std::vector<std::string> names;
  for (const auto& p : providers_) names.push_back(p->name());
  std::sort(names.begin(), names.end());
  std::string s = "auto";
  for (size_t i = 0; i < names.size(); ++i) s += (i + 1 == names.size() ? " or " : ", ") + names[i];
  return s;
}

std::vector<const Provider*> Registry::candidates(const Endpoint& server, const std::string& forced,
                                                  bool tls) const {
  if (!forced.empty() && forced != "auto") {
    const Provider* p = find(forced);
    if (!p) throw ConnectError("RGPU_TRANSPORT=" + forced + ": use " + choices(), true);
    if (!p->reaches(server))
      throw ConnectError("RGPU_TRANSPORT=" + forced + " needs a server on this machine (" +
                             server.host + " is not)",
                         false);
    return {p};
  }
  std::vector<const Provider*> v;
  for (const auto& p : providers_)
    if (p->reaches(server) && (!tls || p->capabilities().tls_wraps)) v.push_back(p.get());
  std::stable_sort(v.begin(), v.end(), [](const Provider* a, const Provider* b) {
    return a->cost().micros(kRankBytes) < b->cost().micros(kRankBytes);
  });
  if (v.empty())
    throw ConnectError("no transport reaches " + server.host + (tls ? " with TLS" : ""), false);
  return v;
}

Connected Registry::connect(const Endpoint& server, const std::string& forced, bool tls,
                            int timeout_s) const {
  const auto list = candidates(server, forced, tls);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  auto left_s = [&]() -> int {
    if (timeout_s <= 0) return 0;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
    return static_cast<int>(std::max<int64_t>(1, (ms + 999) / 1000));
  };
  for (size_t i = 0; i < list.size(); ++i) {
    try {
      return Connected{list[i]->connect(server, left_s()), list[i]};
    } catch (const TransportError& e) {
      if (i + 1 == list.size()) {
        const bool named = !forced.empty() && forced != "auto";
        throw ConnectError(std::string("cannot reach rgpud") +
                               (named ? " (RGPU_TRANSPORT=" + forced + ")" : "") + ": " + e.what(),
                           false);
      }
      LOG_INFO("%s transport unavailable (%s); trying %s", list[i]->name(), e.what(),
               list[i + 1]->name());
    }
  }
  throw ConnectError("no transport to try", false);  // not reached: candidates is never empty
}

std::vector<OpenListener> Registry::listen(const Endpoint& local,
                                           std::vector<std::string>& warnings) const {
  std::vector<OpenListener> out;
  Endpoint at = local;
  for (const auto& p : providers_) {
    if (p->capabilities().co_located_only) continue;
    out.push_back({p->listen(at), p.get()});  // throws: the daemon cannot serve
    at.port = out.back().listener->port();
    break;
  }
  if (out.empty()) throw TransportError("no transport compiled in can listen on a network");
  for (const auto& p : providers_) {
    if (!p->capabilities().co_located_only) continue;
    try {
      out.push_back({p->listen(at), p.get()});
    } catch (const std::exception& e) {
      warnings.push_back(std::string("no ") + p->name() + " transport: " + e.what());
    }
  }
  return out;
}

bool Registry::listens_locally(const Endpoint& local) const {
  for (const auto& p : providers_)  // the same provider listen() opens first
    if (!p->capabilities().co_located_only) return p->listens_locally(local);
  return true;
}

}  // namespace rgpu::transport
