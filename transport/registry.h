// The providers compiled in, and the two questions asked of them: which transport a client uses
// for a server (co-location, capabilities, cost; RGPU_TRANSPORT forcing one by name; RGPU_TLS
// limiting `auto` to transports TLS wraps), and which listeners rgpud opens.  Adding a provider is
// one line in registry.cc; the conformance suite (tests/unit/transport_conformance_test.cc) runs
// over every provider listed here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/provider.h"

namespace rgpu::transport {

// Why a client could not get a connection.  `bad_setting`: RGPU_TRANSPORT names no provider.
struct ConnectError : TransportError {
  ConnectError(const std::string& what, bool bad) : TransportError(what), bad_setting(bad) {}
  bool bad_setting;
};

struct Connected {
  std::unique_ptr<Connection> conn;
  const Provider* provider = nullptr;
};

struct OpenListener {
  std::unique_ptr<ProviderListener> listener;
  const Provider* provider = nullptr;
};

class Registry {
 public:
  explicit Registry(std::vector<std::unique_ptr<Provider>> providers);
  // tcp and shm.
  static const Registry& builtin();

  const std::vector<std::unique_ptr<Provider>>& providers() const { return providers_; }
  const Provider* find(const std::string& name) const;
  // "auto, shm or tcp": the values RGPU_TRANSPORT takes.
  std::string choices() const;

  // The providers a client tries for `server`, best first.  `forced` is RGPU_TRANSPORT ("" or
  // "auto": the registry chooses among those that reach the server, by cost; with `tls`, only
  // those TLS wraps).  A forced provider is the only candidate.  Throws ConnectError.
  std::vector<const Provider*> candidates(const Endpoint& server, const std::string& forced,
                                          bool tls) const;
  // Tries the candidates in order within timeout_s seconds in all (0: each transport's default);
  // a failure falls through to the next (logged).  Throws ConnectError whose message names the
  // last failure: "cannot reach rgpud: ..." (with the forced setting when there was one).
  Connected connect(const Endpoint& server, const std::string& forced, bool tls,
                    int timeout_s) const;

  // The daemon's listeners for `local`: the first provider that is not co-located-only is
  // required (its failure throws TransportError) and fixes the port the others derive their
  // addresses from; a co-located-only one that cannot listen is left out with a line in
  // `warnings`.
  std::vector<OpenListener> listen(const Endpoint& local, std::vector<std::string>& warnings) const;
  // Whether every listener listen() would open for `local` accepts this machine only; asked
  // before binding.  Throws TransportError when `local` does not resolve.
  bool listens_locally(const Endpoint& local) const;

 private:
  std::vector<std::unique_ptr<Provider>> providers_;
};

}  // namespace rgpu::transport
