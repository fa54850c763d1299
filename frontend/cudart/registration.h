// nvcc's registration ABI over the client's module store: each fat binary nvcc embeds becomes a
// store module, and its kernels and variables are named by host stub and host shadow address
// here (the store knows them by name only).
#pragma once

#include "client/modules.h"

namespace rgpu::cudart {

class Registration {
 public:
  static Registration& get();
  // nullptr when `wrapper` is not a fat binary wrapper nvcc would produce (`error` says why).
  client::Module* add_fatbin(const void* wrapper, std::string& error);
  void add_function(client::Module* m, const void* host_stub, const char* name);
  void add_variable(client::Module* m, const void* host_var, const char* name, size_t size);
  client::Function* function(const void* host_stub) const;
  client::Variable* variable(const void* host_var) const;

 private:
  mutable std::shared_mutex mu_;
  std::map<const void*, client::Function*> functions_;
  std::map<const void*, client::Variable*> variables_;
};

}  // namespace rgpu::cudart
