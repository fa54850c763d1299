// What nvcc registered in this process: fat binaries (modules), their kernels (by host stub
// address) and variables (by host shadow address), and where each module is loaded on each
// virtual device.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "proto/messages.h"

namespace rgpu::client {

struct LoadedModule {
  uint32_t id = 0;  // the server session's module id on that GPU
  std::vector<proto::KernelDesc> kernels;
  std::vector<uint32_t> arg_bytes;  // parameter buffer size per kernel
  std::vector<proto::VarDesc> variables;
};

struct Module {
  const uint8_t* image = nullptr;
  size_t size = 0;
  proto::Hash hash{};
  bool hashed = false;
  std::vector<std::string> functions;
  std::vector<proto::VarName> variables;
  std::map<int, LoadedModule> loaded;  // by virtual device
  std::mutex mu;
};

struct Function {
  Module* module;
  uint32_t index;
  std::string name;
};

struct Variable {
  Module* module;
  uint32_t index;
  std::string name;
  size_t size;
};

class Registry {
 public:
  // nullptr when `wrapper` is not a fat binary wrapper nvcc would produce.
  Module* add_module(const void* wrapper, std::string& error);
  void add_function(Module* m, const void* host_fun, const char* name);
  void add_variable(Module* m, const void* host_var, const char* name, size_t size);
  Function* function(const void* host_fun) const;
  Variable* variable(const void* host_var) const;
  // Forgets what every module knows about `device` (after cudaDeviceReset).
  void forget_device(int device);

 private:
  mutable std::shared_mutex mu_;
  std::vector<std::unique_ptr<Module>> modules_;
  std::map<const void*, std::unique_ptr<Function>> functions_;
  std::map<const void*, std::unique_ptr<Variable>> variables_;
};

}  // namespace rgpu::client
