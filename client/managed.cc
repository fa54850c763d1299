// Managed memory emulated over a remote GPU (docs/architecture.md, "Managed memory").  The server
// allocates device memory in the device's window; this process maps the same addresses of its
// PROT_NONE window reservation as host memory, so one pointer is valid on both sides.  Ownership
// moves at device work (launches, graph launches, copies and memsets on managed ranges): dirty
// granules are sent, then every granule the work may touch is mapped PROT_NONE; a host access to
// one faults, and the SIGSEGV handler waits for the device and fetches the granules back.
//
// Our own code never dereferences a managed range (copies treat it as device memory), so the
// handler never runs while this library holds a lock of its own.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "client/client.h"
#include "client/managed_pages.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {

constexpr uint64_t kFetchMax = 1u << 20;  // read-ahead of one fault: 16 granules
constexpr uint64_t kSendMax = 8u << 20;   // one push message at most

}  // namespace

// The process's managed allocations live in the one Client (client/core_table.h), so both
// libraries' copies of this code and the one SIGSEGV handler see the same state.
enum class Attach : uint8_t { Global, Host, Single };

// A managed range.  `base` is its host address; `dev` its device address: the same for
// cudaMallocManaged (the window), another for a __managed__ variable (the module global the server
// placed, shadowed by a host mapping of this process).
struct Alloc {
  uint64_t base = 0;
  uint64_t dev = 0;
  int device = 0;
  Attach attach = Attach::Global;
  uint64_t stream = 0;  // the stream of a single-stream attachment
  PageTracker pages;
  bool read_mostly = false;
  int preferred = -2;  // cudaInvalidDeviceId; -1 is the CPU
  std::set<int> accessed_by;
  int last_prefetch = -2;
  Alloc(uint64_t b, uint64_t size, int device_, uint64_t dev_ = 0,
        PageState initial = PageState::Clean)
      : base(b), dev(dev_ ? dev_ : b), device(device_), pages(size, initial) {}
};

struct ManagedState {
  std::mutex mu;  // the allocations and their page states; never held across a server call
  std::map<uint64_t, std::unique_ptr<Alloc>> allocs;
  std::set<int> unsynced;  // devices given work since their last device-wide synchronization
  std::map<std::pair<const Variable*, int>, uint64_t> vars;  // __managed__ variables' host shadows
  std::mutex fetch_mu;  // one fetch at a time (held across the fetch, never by device work)
  std::atomic<uint64_t> sent_bytes{0}, sent_runs{0}, fetched_bytes{0}, fetched_runs{0},
      write_faults{0};
  std::once_flag handler_once;     // the SIGSEGV handler is installed once per process
  struct sigaction previous = {};  // the handler that was there before it
};

ManagedState* new_managed_state() { return new ManagedState; }

namespace {

using State = ManagedState;

State& state() { return Client::get().managed_state(); }

Alloc* find_locked(State& st, uint64_t p) {
  auto it = st.allocs.upper_bound(p);
  if (it == st.allocs.begin()) return nullptr;
  --it;
  Alloc* a = it->second.get();
  return p - a->base < a->pages.size() ? a : nullptr;
}

void protect(uint64_t base, const PageRun& r, int prot) {
  if (mprotect(reinterpret_cast<void*>(base + r.offset), r.size, prot) != 0)
    LOG_ERROR("managed memory at 0x%llx (%llu bytes): mprotect failed: %s",
              static_cast<unsigned long long>(base + r.offset),
              static_cast<unsigned long long>(r.size), strerror(errno));
}

void on_segv(int sig, siginfo_t* info, void* ctx) {
  const int saved = errno;
  if (info && info->si_code == SEGV_ACCERR &&
      Client::get().managed_fault(reinterpret_cast<uint64_t>(info->si_addr))) {
    errno = saved;
    return;
  }
  errno = saved;
  // Not ours: the handler that was there before, else the default action (the access faults
  // again once we return).
  const struct sigaction& g_previous = state().previous;
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, ctx);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  signal(sig, SIG_DFL);
}

void print_stats() {
  State& st = state();
  fprintf(stderr,
          "rgpu stats: managed memory: sent %llu bytes in %llu runs, fetched %llu bytes in %llu "
          "runs, %llu write faults\n",
          static_cast<unsigned long long>(st.sent_bytes.load()),
          static_cast<unsigned long long>(st.sent_runs.load()),
          static_cast<unsigned long long>(st.fetched_bytes.load()),
          static_cast<unsigned long long>(st.fetched_runs.load()),
          static_cast<unsigned long long>(st.write_faults.load()));
}

void install_handler() {
  State& st = state();
  std::call_once(st.handler_once, [&st] {
    struct sigaction sa {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &st.previous) != 0)
      LOG_ERROR("managed memory: cannot install the SIGSEGV handler: %s", strerror(errno));
    if (const char* s = getenv("RGPU_STATS"); s && *s && strcmp(s, "0") != 0) atexit(print_stats);
  });
}

}  // namespace

ManagedStats Client::managed_stats() const {
  State& st = state();
  return {st.sent_bytes.load(), st.sent_runs.load(), st.fetched_bytes.load(),
          st.fetched_runs.load(), st.write_faults.load()};
}

bool Client::is_managed(uint64_t p) const {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return find_locked(st, p) != nullptr;
}

CudaError Client::malloc_managed(int dev, size_t size, unsigned flags, void** ptr) {
  if (!ptr || size == 0) return err::InvalidValue;
  if (flags != kAttachGlobal && flags != kAttachHost) return err::InvalidValue;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (PageTracker::kGranule % page != 0) return err::NotSupported;
  const uint64_t rounded =
      (size + PageTracker::kGranule - 1) / PageTracker::kGranule * PageTracker::kGranule;
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  if (e = name_window(dev, l); e != err::Success) return e;
  install_handler();
  const DeviceSpec& spec = devices_[dev].spec;
  MallocRep rep;
  e = l->call<MallocMsg>(MallocReq{spec.gpu, rounded, spec.window_base}, &rep);
  if (e != err::Success) return e;
  if (rep.ptr % page != 0 || !adopt_allocation(dev, rep.ptr, rounded, "a managed allocation")) {
    if (rep.ptr % page != 0) map_.remove_device(rep.ptr);
    l->call<FreeMsg>(FreeReq{spec.gpu, rep.ptr});
    return err::MemoryAllocation;
  }
  // Both copies start as zeros: the device's by a memset, the host's as fresh anonymous pages
  // mapped over our own reservation (adopt_allocation checked it lies in the reserved window).
  e = l->call<MemsetMsg>(MemsetReq{spec.gpu, rep.ptr, 0, rounded, 0});
  if (e == err::Success) e = stream_synchronize(Stream{dev, 0, 0, 0});
  void* m = e == err::Success ? mmap(reinterpret_cast<void*>(rep.ptr), rounded, PROT_READ,
                                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
                              : MAP_FAILED;
  if (m == MAP_FAILED) {
    if (e == err::Success) {
      LOG_ERROR("managed memory: cannot map %llu bytes at 0x%llx on the host: %s",
                static_cast<unsigned long long>(rounded), static_cast<unsigned long long>(rep.ptr),
                strerror(errno));
      e = err::MemoryAllocation;
    }
    map_.remove_device(rep.ptr);
    l->call<FreeMsg>(FreeReq{spec.gpu, rep.ptr});
    return e;
  }
  {
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    auto a = std::make_unique<Alloc>(rep.ptr, rounded, dev);
    a->attach = flags == kAttachHost ? Attach::Host : Attach::Global;
    st.allocs[rep.ptr] = std::move(a);
  }
  *ptr = m;
  return err::Success;
}

CudaError Client::managed_variable(const Variable* v, void** host) {
  if (!v || !host) return err::InvalidValue;
  const int dev = current_device();
  State& st = state();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    if (auto it = st.vars.find({v, dev}); it != st.vars.end()) {
      *host = reinterpret_cast<void*>(it->second);
      return err::Success;
    }
  }
  uint64_t addr = 0, size = 0;
  if (CudaError e = global_info(v, &addr, &size); e != err::Success) return e;
  if (size == 0) return err::InvalidValue;
  install_handler();
  // The host shadow: a mapping of its own (the device address is a module global outside the
  // window), PROT_NONE until the first access fetches the device's bytes (the initial value).
  const uint64_t rounded =
      (size + PageTracker::kGranule - 1) / PageTracker::kGranule * PageTracker::kGranule;
  void* m = mmap(nullptr, rounded, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    LOG_ERROR("__managed__ variable %s: cannot map %llu bytes on the host: %s", v->name.c_str(),
              static_cast<unsigned long long>(rounded), strerror(errno));
    return err::MemoryAllocation;
  }
  std::lock_guard<std::mutex> lock(st.mu);
  if (auto it = st.vars.find({v, dev}); it != st.vars.end()) {  // another thread was first
    munmap(m, rounded);
    *host = reinterpret_cast<void*>(it->second);
    return err::Success;
  }
  const uint64_t base = reinterpret_cast<uint64_t>(m);
  st.allocs[base] = std::make_unique<Alloc>(base, size, dev, addr, PageState::Device);
  st.vars[{v, dev}] = base;
  st.unsynced.insert(dev);  // kernels launched before may still be writing it
  *host = m;
  return err::Success;
}

bool Client::managed_forget(uint64_t base) {
  State& st = state();
  uint64_t size = 0;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    auto it = st.allocs.find(base);
    if (it == st.allocs.end()) return false;
    size = it->second->pages.size();
    st.allocs.erase(it);
  }
  // Back to a PROT_NONE reservation (the window stays ours).
  if (mmap(reinterpret_cast<void*>(base), size, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
    LOG_ERROR("managed memory at 0x%llx: cannot restore the reservation: %s",
              static_cast<unsigned long long>(base), strerror(errno));
  return true;
}

void Client::managed_forget_device(int dev) {
  std::vector<uint64_t> bases;
  {
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    for (auto& [b, a] : st.allocs)
      if (a->device == dev) bases.push_back(b);
    st.unsynced.erase(dev);
    for (auto it = st.vars.begin(); it != st.vars.end();)
      it = it->first.second == dev ? st.vars.erase(it) : std::next(it);
  }
  for (uint64_t b : bases) managed_forget(b);
}

void Client::managed_synchronized(int dev) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  st.unsynced.erase(dev);
}

CudaError Client::managed_push(int dev, uint64_t base, uint64_t dev_base,
                               const std::vector<PageRun>& send,
                               const std::vector<PageRun>& protect_none) {
  CudaError e = err::Success;
  if (!send.empty()) {
    ServerLink* l = link(dev, &e);
    if (!l) return e;
    const uint32_t gpu = devices_[dev].spec.gpu;
    for (const PageRun& r : send) protect(base, r, PROT_READ);  // no writes while it travels
    State& st = state();
    for (const PageRun& r : send) {
      for (uint64_t off = 0; off < r.size && e == err::Success; off += kSendMax) {
        const uint64_t n = std::min(kSendMax, r.size - off);
        iovec v{reinterpret_cast<void*>(base + r.offset + off), n};
        e = l->call<MemcpyHtoDMsg>(MemcpyHtoDReq{gpu, dev_base + r.offset + off, n}, nullptr, &v,
                                   1);
        st.sent_bytes += n;
        st.sent_runs += 1;
      }
    }
  }
  for (const PageRun& r : protect_none) protect(base, r, PROT_NONE);
  return e;
}

CudaError Client::managed_before_work(int dev, uint64_t stream) {
  struct Move {
    int device;
    uint64_t base, dev;
    std::vector<PageRun> send, none;
  };
  std::vector<Move> moves;
  {
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    if (st.allocs.empty()) return err::Success;
    st.unsynced.insert(dev);
    for (auto& [b, a] : st.allocs) {
      if (a->device != dev || a->attach == Attach::Host) continue;
      if (a->attach == Attach::Single && a->stream != stream) continue;
      Move m{a->device, b, a->dev, {}, {}};
      a->pages.to_device(0, a->pages.size(), &m.send, &m.none);
      if (!m.none.empty()) moves.push_back(std::move(m));
    }
  }
  CudaError e = err::Success;
  for (const Move& m : moves)
    if (CudaError r = managed_push(m.device, m.base, m.dev, m.send, m.none); e == err::Success)
      e = r;
  return e;
}

CudaError Client::managed_before_access(uint64_t p, uint64_t n, bool write) {
  int dev = 0;
  uint64_t base = 0, dev_base = 0;
  std::vector<PageRun> send, none;
  {
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    Alloc* a = find_locked(st, p);
    if (!a) return err::Success;
    dev = a->device;
    base = a->base;
    dev_base = a->dev;
    st.unsynced.insert(dev);
    if (write)
      a->pages.to_device(p - base, n, &send, &none);
    else
      a->pages.flush(p - base, n, &send);
  }
  return managed_push(dev, base, dev_base, send, none);
}

CudaError Client::managed_fetch(uint64_t addr, uint64_t n, bool all) {
  State& st = state();
  std::lock_guard<std::mutex> fetching(st.fetch_mu);
  for (;;) {
    int dev = 0;
    uint64_t base = 0, dev_base = 0;
    PageRun r;
    bool sync = false;
    {
      std::lock_guard<std::mutex> lock(st.mu);
      Alloc* a = find_locked(st, addr);
      if (!a) return err::Success;
      base = a->base;
      dev_base = a->dev;
      dev = a->device;
      const uint64_t off = addr - base;
      auto runs = a->pages.device_runs(off, n, kFetchMax);
      if (runs.empty()) return err::Success;
      r = runs[0];
      if (!all && r.offset != a->pages.granule(off).offset) return err::Success;
      sync = st.unsynced.count(dev) > 0;
    }
    // The device's work may still write these bytes: wait for it, as CUDA requires of a program
    // before host access on a GPU without concurrent managed access.
    if (sync) {
      if (CudaError e = synchronize(dev); e != err::Success) return e;
    }
    CudaError e;
    ServerLink* l = link(dev, &e);
    if (!l) return e;
    void* stage = mmap(nullptr, r.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stage == MAP_FAILED) return err::MemoryAllocation;
    iovec v{stage, r.size};
    e = l->call<MemcpyDtoHMsg>(MemcpyDtoHReq{devices_[dev].spec.gpu, dev_base + r.offset, r.size},
                               nullptr, nullptr, 0, &v, 1);
    if (e != err::Success) {
      munmap(stage, r.size);
      return e;
    }
    mprotect(stage, r.size, PROT_READ);
    {
      std::lock_guard<std::mutex> lock(st.mu);
      Alloc* a = find_locked(st, base + r.offset);
      if (!a || a->base != base || a->pages.at(r.offset) != PageState::Device) {
        munmap(stage, r.size);  // freed or changed meanwhile
        continue;
      }
      // Into place in one step: another thread never sees a half-fetched granule.
      void* to = reinterpret_cast<void*>(base + r.offset);
      if (mremap(stage, r.size, r.size, MREMAP_MAYMOVE | MREMAP_FIXED, to) == MAP_FAILED) {
        munmap(stage, r.size);
        return err::Unknown;
      }
      a->pages.set(r, PageState::Clean);
    }
    st.fetched_bytes += r.size;
    st.fetched_runs += 1;
    if (!all || r.offset + r.size >= addr - base + n) return err::Success;
  }
}

bool Client::managed_fault(uint64_t addr) {
  State& st = state();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    Alloc* a = find_locked(st, addr);
    if (!a) return false;
    const uint64_t off = addr - a->base;
    switch (a->pages.at(off)) {
      case PageState::Clean: {  // first write since it was last sent or fetched
        const PageRun g = a->pages.granule(off);
        protect(a->base, g, PROT_READ | PROT_WRITE);
        a->pages.set(g, PageState::Dirty);
        st.write_faults += 1;
        return true;
      }
      case PageState::Dirty:  // another thread made it writable meanwhile
        return true;
      case PageState::Device:
        break;
    }
  }
  if (CudaError e = managed_fetch(addr, kFetchMax, false); e != err::Success) {
    LOG_ERROR(
        "managed memory at 0x%llx: cannot fetch it from its device (%s); the access fails as an "
        "invalid memory access",
        static_cast<unsigned long long>(addr), cuda_error_name(e));
    return false;
  }
  return true;
}

namespace {

// The allocation holding all of [p, p + n), under st.mu; null when there is none.
Alloc* range_locked(State& st, uint64_t p, uint64_t n) {
  Alloc* a = find_locked(st, p);
  if (!a || n == 0 || n > a->pages.size() - (p - a->base)) return nullptr;
  return a;
}

}  // namespace

CudaError Client::mem_prefetch(const void* p, size_t n, int location) {
  const uint64_t addr = reinterpret_cast<uint64_t>(p);
  State& st = state();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    Alloc* a = range_locked(st, addr, n);
    if (!a) return err::InvalidValue;
    if (location != kCpuDevice && check_device(location) != err::Success) return err::InvalidDevice;
    a->last_prefetch = location;
  }
  // To the CPU: fetched now (after the device's work).  To a device: the host's changes are sent
  // now and the range becomes the device's (another device than the allocation's: a hint only).
  if (location == kCpuDevice) return managed_fetch(addr, n, true);
  return managed_before_access(addr, n, true);
}

void Client::managed_copy_kind(const void* dst, const void* src, CopyKind* kind) const {
  if (is_managed(reinterpret_cast<uint64_t>(dst)) || is_managed(reinterpret_cast<uint64_t>(src)))
    *kind = CopyKind::Default;
}

CudaError Client::managed_copy(const void* dst, size_t dst_bytes, const void* src,
                               size_t src_bytes) {
  if (CudaError e = managed_before_access(reinterpret_cast<uint64_t>(src), src_bytes, false);
      e != err::Success)
    return e;
  return managed_before_access(reinterpret_cast<uint64_t>(dst), dst_bytes, true);
}

CudaError Client::mem_discard(const void* p, size_t n) {
  const uint64_t addr = reinterpret_cast<uint64_t>(p);
  uint64_t base = 0;
  std::vector<PageRun> none;
  {
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    Alloc* a = range_locked(st, addr, n);
    if (!a) return err::InvalidValue;
    base = a->base;
    a->pages.to_device(addr - base, n, nullptr, &none);  // the host's changes are dropped
  }
  for (const PageRun& r : none) protect(base, r, PROT_NONE);
  return err::Success;
}

CudaError Client::mem_advise(const void* p, size_t n, int advice, int location) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  Alloc* a = range_locked(st, reinterpret_cast<uint64_t>(p), n);
  if (!a) return err::InvalidValue;
  const bool needs_location = advice == 3 || advice == 5 || advice == 6;
  if (needs_location && location != kCpuDevice && check_device(location) != err::Success)
    return err::InvalidDevice;
  switch (advice) {
    case 1:
      a->read_mostly = true;
      break;
    case 2:
      a->read_mostly = false;
      break;
    case 3:
      a->preferred = location;
      break;
    case 4:
      a->preferred = -2;
      break;
    case 5:
      a->accessed_by.insert(location);
      break;
    case 6:
      a->accessed_by.erase(location);
      break;
    default:
      return err::InvalidValue;
  }
  return err::Success;
}

CudaError Client::mem_range(const void* p, size_t n, ManagedRange* out) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  Alloc* a = range_locked(st, reinterpret_cast<uint64_t>(p), n);
  if (!a) return err::InvalidValue;
  out->read_mostly = a->read_mostly;
  out->preferred = a->preferred;
  out->accessed_by.assign(a->accessed_by.begin(), a->accessed_by.end());
  out->last_prefetch = a->last_prefetch;
  return err::Success;
}

CudaError Client::stream_attach(const Stream& s, void* p, size_t length, unsigned flags) {
  if (flags != kAttachGlobal && flags != kAttachHost && flags != kAttachSingle)
    return err::InvalidValue;
  if (flags == kAttachSingle && s.id == 0) return err::InvalidValue;  // needs a stream object
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  Alloc* a = find_locked(st, reinterpret_cast<uint64_t>(p));
  // The whole allocation, named by its base (length 0: all of it).
  if (!a || a->base != reinterpret_cast<uint64_t>(p) || (length != 0 && length > a->pages.size()))
    return err::InvalidValue;
  if (flags == kAttachSingle && s.device != a->device) return err::InvalidValue;
  a->attach = flags == kAttachHost     ? Attach::Host
              : flags == kAttachSingle ? Attach::Single
                                       : Attach::Global;
  a->stream = s.id;
  return err::Success;
}

CudaError write_range_attribute(void* data, size_t size, int attr, const ManagedRange& r) {
  if (!data) return err::InvalidValue;
  auto one = [&](int v) {
    if (size != sizeof(int)) return err::InvalidValue;
    std::memcpy(data, &v, sizeof v);
    return err::Success;
  };
  // Location types: 0 invalid, 1 device, 2 host.
  auto type_of = [](int dev) { return dev == -2 ? 0 : dev == Client::kCpuDevice ? 2 : 1; };
  switch (attr) {
    case 1:
      return one(r.read_mostly ? 1 : 0);
    case 2:
      return one(r.preferred);
    case 3: {
      if (size == 0 || size % sizeof(int) != 0) return err::InvalidValue;
      int* out = static_cast<int*>(data);
      const size_t n = size / sizeof(int);
      for (size_t i = 0; i < n; ++i)
        out[i] = i < r.accessed_by.size() ? r.accessed_by[i] : -2;  // an invalid device id
      return err::Success;
    }
    case 4:
      return one(r.last_prefetch);
    case 5:
      return one(type_of(r.preferred));
    case 6:
      return one(r.preferred < 0 ? 0 : r.preferred);
    case 7:
      return one(type_of(r.last_prefetch));
    case 8:
      return one(r.last_prefetch < 0 ? 0 : r.last_prefetch);
  }
  return err::InvalidValue;
}

}  // namespace rgpu::client
