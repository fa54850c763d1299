#include "client/modules.h"

#include "fatbin/fatbin.h"

namespace rgpu::client {

Module* Registry::add_module(const void* wrapper, std::string& error) {
  fatbin::WrappedFatbin f;
  try {
    f = fatbin::unwrap(wrapper);
  } catch (const fatbin::FatbinError& e) {
    error = e.what();
    return nullptr;
  }
  auto m = std::make_unique<Module>();
  m->image = f.data;
  m->size = f.size;
  std::unique_lock lock(mu_);
  modules_.push_back(std::move(m));
  return modules_.back().get();
}

void Registry::add_function(Module* m, const void* host_fun, const char* name) {
  std::unique_lock lock(mu_);
  std::lock_guard<std::mutex> ml(m->mu);
  auto f =
      std::make_unique<Function>(Function{m, static_cast<uint32_t>(m->functions.size()), name});
  m->functions.push_back(name);
  functions_[host_fun] = std::move(f);
}

void Registry::add_variable(Module* m, const void* host_var, const char* name, size_t size) {
  std::unique_lock lock(mu_);
  std::lock_guard<std::mutex> ml(m->mu);
  auto v = std::make_unique<Variable>(
      Variable{m, static_cast<uint32_t>(m->variables.size()), name, size});
  m->variables.push_back(proto::VarName{name, size});
  variables_[host_var] = std::move(v);
}

Function* Registry::function(const void* host_fun) const {
  std::shared_lock lock(mu_);
  auto it = functions_.find(host_fun);
  return it == functions_.end() ? nullptr : it->second.get();
}

Variable* Registry::variable(const void* host_var) const {
  std::shared_lock lock(mu_);
  auto it = variables_.find(host_var);
  return it == variables_.end() ? nullptr : it->second.get();
}

void Registry::forget_device(int device) {
  std::shared_lock lock(mu_);
  for (auto& m : modules_) {
    std::lock_guard<std::mutex> ml(m->mu);
    m->loaded.erase(device);
  }
}

}  // namespace rgpu::client
