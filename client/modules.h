// The module store: images (fat binaries, cubins, PTX) keyed by their SHA-256, each loaded on a
// virtual device when a function or global of it is first needed there (by hash when the server
// already has it), and their functions and globals looked up by name.  It knows nothing of nvcc's
// registration (host stubs and shadow variables live in frontend/cudart/registration.cc) and holds
// no protocol types.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "client/errors.h"

namespace rgpu::client {

using ImageHash = std::array<uint8_t, 32>;

struct ParamLayout {
  uint32_t offset = 0;
  uint32_t size = 0;
};
struct KernelInfo {
  bool found = false;
  uint32_t slot = 0;  // the server's index of the function in its module (FuncReq::kernel)
  std::vector<ParamLayout> params;
  uint32_t arg_bytes = 0;  // parameter buffer size
  // The server's answers, kept (guarded by Client::func_cache_mu_): a function's attributes
  // change only through this process's setters, which clear them, so libraries that ask before
  // every launch (cuDNN, PyTorch) cost no round trip after the first.
  mutable std::vector<int32_t> attrs;
  mutable std::map<std::tuple<int32_t, uint64_t, uint32_t>, int32_t> occupancy;
};
struct GlobalInfo {
  bool found = false;
  uint64_t addr = 0;
  uint64_t size = 0;
};

// Where a module is loaded on one virtual device: the server session's module id, and what the
// server answered for each function and global resolved there so far (by index; null / empty:
// not resolved yet).  A KernelInfo never moves once made: callers keep pointers to it.
struct LoadedModule {
  uint32_t id = 0;
  std::vector<std::unique_ptr<KernelInfo>> kernels;
  std::vector<std::optional<GlobalInfo>> globals;
};

struct Function;
struct Variable;

// The kernels a module's image holds, parsed once (a library like cuDNN asks for thousands of
// functions by name from one large image).
struct KernelNames {
  std::vector<std::string> ordered;  // image order
  std::unordered_set<std::string> set;
};

// An image and what rgpu knows of it.  Nothing travels when it is registered or loaded: the image
// goes to a server, and is loaded on a GPU, when a function or global of it is first needed there
// (Client::module_on).
struct Module {
  const uint8_t* image = nullptr;
  size_t size = 0;
  std::vector<uint8_t> owned;  // the image, when it was copied (load_image)
  ImageHash hash{};            // computed once: at load_image, else at the first need
  bool hashed = false;
  // Names asked for so far, by index; a device's LoadedModule covers them when its sizes match.
  std::vector<std::string> functions;
  struct GlobalName {
    std::string name;
    uint64_t size = 0;  // as registered; 0 when looked up by name only
  };
  std::vector<GlobalName> globals;
  std::map<std::string, Function*> function_index;
  std::map<std::string, Variable*> global_index;
  std::map<int, LoadedModule> loaded;  // by virtual device
  std::vector<LoadedModule> retired;   // of devices forgotten (a reset): callers may still read
  std::map<int, Error> broken;         // devices whose server refused the image (not sent again)
  std::map<const void*, bool> held;  // by server link: whether it holds the image (absent: unknown)
  // By virtual device: how many times it was forgotten (a reset).  Client::module_on drops what a
  // round trip answered when this changed meanwhile: the answer may predate the reset.
  std::map<int, uint64_t> epoch;
  unsigned refs = 0;  // load_image references (embedded modules: 0, never unloaded)
  bool unloaded = false;
  std::shared_ptr<const KernelNames> kernels;  // under mu; null until first asked for
  std::mutex mu;       // the fields above; held briefly, never across a round trip
  std::mutex load_mu;  // taken first: one thread at a time resolves the module (Client::module_on)
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

// Size of the image at `p` without a length (what cuModuleLoadData gets): a fat binary (its
// header), a cubin (its ELF headers) or PTX (NUL-terminated text).  0 when it is none of them.
size_t image_size(const void* p);

class ModuleStore {
 public:
  // An image compiled into the program (nvcc's fat binaries): not copied, hashed at first load.
  Module* add_embedded(const void* image, size_t size);
  // A raw image the caller may free afterwards: its headers checked (fatbin::check_header;
  // cudaErrorInvalidKernelImage), copied and hashed; the same bytes give the same module (one
  // more reference).  `size` 0: found from the image (image_size).
  Error load_image(const void* image, size_t size, Module** out);
  // Drops one reference; at the last, the module's handles stop working (errc::
  // InvalidResourceHandle).  The server keeps the image until the session ends.
  Error unload(Module* m);
  // Functions and globals by name, created on first ask and resolved on the server at the next
  // use on each device.  `size` of a global: what the program declared (0: unknown).
  Function* function(Module* m, const std::string& name);
  Variable* variable(Module* m, const std::string& name, uint64_t size = 0);
  bool valid(const Module* m) const;
  // Whether `f` is a function of this store (any pointer may be asked) of a module still loaded.
  bool valid_function(const Function* f) const;
  // Forgets what every module knows about `device` (a device reset), and bumps each module's epoch
  // for it, so that a resolution in flight is not kept.
  void forget_device(int device);
  // Modules still loaded whose image is hashed and whether server link `link` holds it unknown,
  // `first` (hashed by the caller) at the front: at most `max`, for one ModuleHave.
  std::vector<Module*> unasked(const void* link, Module* first, size_t max) const;

 private:
  mutable std::shared_mutex mu_;
  std::vector<std::unique_ptr<Module>> modules_;  // never shrinks: handles stay dereferenceable
  std::map<ImageHash, Module*> by_hash_;          // loaded (copied) images
  std::vector<std::unique_ptr<Function>> functions_;
  std::unordered_set<const Function*> function_set_;  // functions_, to check handles
  std::vector<std::unique_ptr<Variable>> variables_;
};

}  // namespace rgpu::client
