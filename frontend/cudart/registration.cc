#include "frontend/cudart/registration.h"

#include "client/client.h"
#include "fatbin/fatbin.h"

namespace rgpu::cudart {

namespace {
client::ModuleStore& store() { return client::Client::get().modules(); }
}  // namespace

Registration& Registration::get() {
  static Registration* r = new Registration;  // never destroyed: launches may come from atexit
  return *r;
}

client::Module* Registration::add_fatbin(const void* wrapper, std::string& error) {
  fatbin::WrappedFatbin f;
  try {
    f = fatbin::unwrap(wrapper);
  } catch (const fatbin::FatbinError& e) {
    error = e.what();
    return nullptr;
  }
  return store().add_embedded(f.data, f.size);
}

void Registration::add_function(client::Module* m, const void* host_stub, const char* name) {
  client::Function* f = store().function(m, name);
  std::unique_lock lock(mu_);
  functions_[host_stub] = f;
}

void Registration::add_variable(client::Module* m, const void* host_var, const char* name,
                                size_t size) {
  client::Variable* v = store().variable(m, name, size);
  std::unique_lock lock(mu_);
  variables_[host_var] = v;
}

client::Function* Registration::function(const void* host_stub) const {
  std::shared_lock lock(mu_);
  auto it = functions_.find(host_stub);
  return it == functions_.end() ? nullptr : it->second;
}

client::Variable* Registration::variable(const void* host_var) const {
  std::shared_lock lock(mu_);
  auto it = variables_.find(host_var);
  return it == variables_.end() ? nullptr : it->second;
}

}  // namespace rgpu::cudart
