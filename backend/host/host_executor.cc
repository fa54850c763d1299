#include "backend/host/host_executor.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "backend/gate.h"
#include "backend/host/host_arrays.h"
#include "backend/host/host_attributes.h"
#include "backend/host/host_cond.h"
#include "backend/host/host_devmem.h"
#include "backend/host/host_drvlibs.h"
#include "backend/host/host_graphs3.h"
#include "backend/host/host_ipc.h"
#include "backend/host/host_launch.h"
#include "backend/host/host_misc.h"
#include "backend/host/host_nvml.h"
#include "backend/host/host_streams.h"
#include "backend/host/host_vmm.h"
#include "backend/notify_slot.h"

namespace rgpu::backend {
namespace {

uint64_t page_round(uint64_t n) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (n > UINT64_MAX - page) return UINT64_MAX;  // more than any capacity: refused by the ledger
  return (n + page - 1) / page * page;
}

constexpr CudaError kInvalidKernelImage = 200;

// Values cudaFuncGetAttributes reports for a host-implemented kernel (CUfunction_attribute 0..15).
const int32_t kFuncAttrs[16] = {1024, 0, 0, 0, 32, 90, 90, 0, 49152, -1, 0, 0, 0, 0, 0, 0};

class HostExecutor final : public Executor {
 public:
  HostExecutor(std::vector<HostLedger*> ledgers, const HostKernels* kernels)
      : ledgers_(std::move(ledgers)), plugin_(kernels), state_(static_cast<int>(ledgers_.size())) {
    for (HostLedger* l : ledgers_) slots_.push_back(l->claim(getpid()));
    allocs_.resize(ledgers_.size());
    reserved_.resize(ledgers_.size());
    for (size_t i = 0; i < ledgers_.size(); ++i)
      streams_.push_back(std::make_unique<HostStreams>());
    for (size_t i = 0; i < ledgers_.size(); ++i)
      fail_slots_.push_back({&state_, static_cast<int>(i)});
    for (size_t i = 0; i < ledgers_.size(); ++i) notify_.push_back(std::make_unique<NotifySlot>());
  }
  ~HostExecutor() override {
    mem_ops_.cancel();
    streams_.clear();  // finishes queued work first
    for (size_t d = 0; d < allocs_.size(); ++d)
      for (auto& [p, size] : allocs_[d]) release(static_cast<int>(d), p, size);
  }

  const char* name() const override { return "host"; }
  int device_count() const override { return static_cast<int>(ledgers_.size()); }
  int driver_version() const override { return 13000; }

  Status device_info(int dev, DeviceInfo& out) override {
    host_device_info(dev, *ledgers_[dev], out);  // backend/host/host_nvml.cc
    return Status::success();
  }

  // ---- memory ----
  // Mappings are made at fixed addresses inside the windows the session reserved, with
  // MAP_FIXED_NOREPLACE (which fails rather than replace anything of this process), and charged to
  // the ledger like a GPU's memory.  Granularity: 2 MiB, as on a GPU.
  Status mem_granularity(int, uint64_t& granularity) override {
    granularity = kGranule;
    return Status::success();
  }
  Status va_reserve(int dev, uint64_t base, uint64_t size) override {
    if (size == 0 || base % kGranule || size % kGranule || base > UINT64_MAX - size)
      return Status::fail(err::InvalidValue, "host backend: address window " + hex(base) + " of " +
                                                 std::to_string(size) +
                                                 " bytes is not 2 MiB-aligned");
    auto& r = reserved_[dev];
    auto next = r.lower_bound(base);
    if ((next != r.end() && next->first < base + size) ||
        (next != r.begin() && std::prev(next)->first + std::prev(next)->second > base))
      return Status::fail(err::InvalidValue, "host backend: address window " + hex(base) +
                                                 " overlaps one already reserved");
    r[base] = size;
    return Status::success();
  }
  Status va_release(int dev, uint64_t base, uint64_t) override {
    reserved_[dev].erase(base);
    return Status::success();
  }
  Status mem_map(int dev, uint64_t addr, uint64_t size) override {
    auto& r = reserved_[dev];
    auto it = r.upper_bound(addr);
    if (it == r.begin() || size == 0 || addr % kGranule || size % kGranule ||
        addr - std::prev(it)->first > std::prev(it)->second ||
        size > std::prev(it)->second - (addr - std::prev(it)->first))
      return Status::fail(err::InvalidValue, "host backend: mapping of " + std::to_string(size) +
                                                 " bytes at " + hex(addr) +
                                                 " is not inside a reserved window");
    if (slots_[dev] < 0)
      return Status::fail(err::MemoryAllocation,
                          "host backend: no free slot in the capacity ledger (" +
                              std::to_string(HostLedger::kSlots) + " sessions)");
    if (!ledgers_[dev]->reserve(slots_[dev], size)) {
      // Test behaviour: an "over budget" notification first (docs/compatibility.md).
      const uint64_t used = ledgers_[dev]->used(), cap = ledgers_[dev]->capacity();
      notify_[dev]->fire(1, used + size > cap ? used + size - cap : size);
      return Status::fail(err::MemoryAllocation, "host backend capacity exhausted");
    }
    void* p = mmap(reinterpret_cast<void*>(addr), size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED || reinterpret_cast<uint64_t>(p) != addr) {
      int e = errno;
      if (p != MAP_FAILED) munmap(p, size);  // a kernel that took the address as a hint
      ledgers_[dev]->release(slots_[dev], size);
      return Status::fail(err::MemoryAllocation,
                          "host backend: cannot map " + std::to_string(size) + " bytes at " +
                              hex(addr) + ": " + (p == MAP_FAILED ? strerror(e) : "moved"));
    }
    std::lock_guard<std::mutex> lock(mem_mu_);
    allocs_[dev][addr] = size;
    return Status::success();
  }
  Status mem_unmap(int dev, uint64_t addr, uint64_t size) override {
    streams_[dev]->synchronize();  // cheap insurance: no host kernel may touch it afterwards
    std::lock_guard<std::mutex> lock(mem_mu_);
    auto it = allocs_[dev].find(addr);
    if (it == allocs_[dev].end() || it->second != size)
      return Status::fail(err::InvalidValue, "host backend: no mapping of " + std::to_string(size) +
                                                 " bytes at " + hex(addr));
    release(dev, it->first, it->second);
    allocs_[dev].erase(it);
    return Status::success();
  }
  // ---- ipc (host_ipc.h)
  Status ipc_mem_export(int dev, uint64_t ptr, int& fd, uint64_t& base, uint64_t& size,
                        uint32_t& kind) override {
    kind = HostIpc::kKind;
    for (int attempt = 0;; ++attempt) {
      {
        // Peer links export from their own threads: the lock covers the lookups and the export,
        // never a wait for the streams.
        std::lock_guard<std::mutex> lock(mem_mu_);
        auto it = allocs_.at(dev).upper_bound(ptr);
        if (it == allocs_[dev].begin() || ptr - std::prev(it)->first >= std::prev(it)->second)
          return Status::fail(err::InvalidValue, "host backend: " + hex(ptr) +
                                                     " is not device memory of this session");
        --it;
        base = it->first;
        size = it->second;
        if (ipc_.shared(base) || attempt > 0) return ipc_.export_mapping(base, size, fd);
      }
      // The first export copies the mapping's bytes into a memfd: no host kernel may write
      // meanwhile.  Bounded: a stream held at a peer copy's gate may wait for the caller.
      if (!streams_[dev]->synchronize_for(std::chrono::milliseconds(200)))
        return Status::fail(err::NotReady,
                            "host backend: the GPU's streams stay busy; memory not shared now");
    }
  }
  Status ipc_mem_import(int, int fd, uint32_t kind, uint64_t addr, uint64_t span, uint64_t offset,
                        uint64_t size) override {
    std::lock_guard<std::mutex> lock(mem_mu_);
    return ipc_.import(fd, kind, addr, span, offset, size);
  }
  Status ipc_mem_close(int dev, uint64_t addr, uint64_t size) override {
    streams_[dev]->synchronize();
    std::lock_guard<std::mutex> lock(mem_mu_);
    return ipc_.close_import(addr, size);
  }
  // ---- vmm (host_vmm.h): physical allocations charged to the ledger like allocations
  Status vmm_granularity(int, bool, uint64_t& granularity) override {
    granularity = kGranule;
    return Status::success();
  }
  Status vmm_create(int dev, uint64_t size, bool, uint64_t& handle) override {
    if (slots_[dev] < 0 || !ledgers_[dev]->reserve(slots_[dev], size))
      return Status::fail(err::MemoryAllocation, "host backend capacity exhausted");
    Status s = vmm_.create(size, handle);
    if (!s.ok()) ledgers_[dev]->release(slots_[dev], size);
    return s;
  }
  Status vmm_release(int dev, uint64_t handle) override {
    uint64_t size = vmm_.size_of(handle);
    Status s = vmm_.release(handle);
    if (s.ok()) ledgers_[dev]->release(slots_[dev], size);
    return s;
  }
  Status vmm_map(int, uint64_t addr, uint64_t size, uint64_t offset, uint64_t handle) override {
    return vmm_.map(addr, size, offset, handle);
  }
  Status vmm_unmap(int dev, uint64_t addr, uint64_t size) override {
    streams_[dev]->synchronize();  // as mem_unmap: no host kernel touches it afterwards
    return vmm_.unmap(addr, size);
  }
  Status vmm_set_access(int dev, uint64_t addr, uint64_t size, int peer, uint32_t flags) override {
    // One address space serves every emulated GPU: the owning GPU's access is the protection.
    return peer == dev ? vmm_.protect(addr, size, flags) : Status::success();
  }
  // ---- misc (host_misc.h)
  Status disable_peer_access(int dev, int peer) override { return misc_.disable_peer(dev, peer); }
  Status flush_rdma_writes(int, uint32_t, uint32_t) override {
    return Status::success();  // no RDMA writes reach this test double's memory
  }
  Status atomic_caps(int, int peer, const std::vector<uint32_t>& ops,
                     std::vector<uint32_t>& caps) override {
    return HostMisc::atomic_caps(peer, ops, caps);
  }
  Status ipc_event_export(int, uint64_t event, int& fd, uint32_t& kind) override {
    std::lock_guard<std::mutex> lock(events_mu_);
    auto it = events_.find(event);
    if (it == events_.end()) return no_event();
    Event& e = *it->second;
    if (!e.interprocess || e.timing)
      return Status::fail(400,
                          "the event was not created with cudaEventInterprocess and "
                          "cudaEventDisableTiming");
    // A record still pending when the event is first shared counts as complete for importers.
    if (!e.shared)
      if (Status s = SharedEvent::create(e.shared); !s.ok()) return s;
    kind = SharedEvent::kKind;
    return e.shared->dup(fd);
  }
  Status ipc_event_import(int, int fd, uint32_t kind, uint64_t& event) override {
    if (kind != SharedEvent::kKind)
      return Status::fail(400, "the IPC event handle comes from another kind of backend");
    auto e = std::make_shared<Event>();
    e->timing = false;
    e->interprocess = true;
    if (Status s = SharedEvent::open(fd, e->shared); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(events_mu_);
    event = next_event_++;
    events_[event] = e;
    return Status::success();
  }
  Status set_async_notify(int dev, Notify fn) override {
    notify_.at(dev)->set(std::move(fn));
    return Status::success();
  }
  Status mem_info(int dev, uint64_t& free, uint64_t& total) override {
    total = ledgers_[dev]->capacity();
    uint64_t used = ledgers_[dev]->used();  // may pass capacity for a moment (reserve backs off)
    free = used < total ? total - used : 0;
    return Status::success();
  }

  // ---- copies (host memory stands in for device memory) ----
  Status copy_to_device(int dev, uint64_t dst, uint64_t dpitch, const void* src, uint64_t spitch,
                        Rect r) override {
    streams_[dev]
        ->submit(0, [=] { copy2d(reinterpret_cast<void*>(dst), dpitch, src, spitch, r); })
        ->wait();
    return Status::success();
  }
  Status copy_to_host(int dev, void* dst, uint64_t dpitch, uint64_t src, uint64_t spitch,
                      Rect r) override {
    streams_[dev]
        ->submit(0, [=] { copy2d(dst, dpitch, reinterpret_cast<const void*>(src), spitch, r); })
        ->wait();
    return Status::success();
  }
  Status copy_to_device_async(int dev, uint64_t dst, uint64_t dpitch, const void* src,
                              uint64_t spitch, Rect r, uint64_t stream) override {
    return submit(dev, stream,
                  [=] { copy2d(reinterpret_cast<void*>(dst), dpitch, src, spitch, r); });
  }
  Status copy_to_device_staged(int dev, uint64_t dst, const void* src, uint64_t size,
                               uint64_t stream) override {
    if (!streams_[dev]->exists(stream)) return no_stream();
    {
      // Bounded staging, as the driver's: past it the caller waits for the stream.
      std::unique_lock<std::mutex> lock(staged_mu_);
      staged_cv_.wait(lock, [&] { return staged_ == 0 || staged_ + size <= kStagedCap; });
      staged_ += size;
    }
    auto bytes = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                     static_cast<const char*>(src) + size);
    return submit(dev, stream, [this, dst, bytes] {
      memcpy(reinterpret_cast<void*>(dst), bytes->data(), bytes->size());
      std::lock_guard<std::mutex> lock(staged_mu_);
      staged_ -= bytes->size();
      staged_cv_.notify_all();
    });
  }
  Status copy_to_host_async(int dev, void* dst, uint64_t dpitch, uint64_t src, uint64_t spitch,
                            Rect r, uint64_t stream) override {
    return submit(dev, stream,
                  [=] { copy2d(dst, dpitch, reinterpret_cast<const void*>(src), spitch, r); });
  }
  Status copy_on_device(int dev, uint64_t dst, uint64_t dpitch, uint64_t src, uint64_t spitch,
                        Rect r, uint64_t stream) override {
    return submit(dev, stream, [=] {
      copy2d(reinterpret_cast<void*>(dst), dpitch, reinterpret_cast<const void*>(src), spitch, r);
    });
  }
  Status memset(int dev, uint64_t ptr, uint8_t value, uint64_t size, uint64_t stream) override {
    return submit(dev, stream, [=] { ::memset(reinterpret_cast<void*>(ptr), value, size); });
  }
  Status copy_peer(int dst_dev, uint64_t dst, int src_dev, uint64_t src, uint64_t size,
                   int stream_dev, uint64_t stream) override {
    // In order on the stream's GPU, after the other GPU's legacy-stream work.
    int other = stream_dev == dst_dev ? src_dev : dst_dev;
    FencePtr other_done = streams_[other]->tail(0);
    if (!streams_[stream_dev]->exists(stream)) return no_stream();
    streams_[stream_dev]->submit(
        stream, [=] { memmove(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), size); },
        {other_done});
    return Status::success();
  }
  Status can_access_peer(int, int, int& can) override {
    can = 1;
    return Status::success();
  }
  Status enable_peer_access(int dev, int peer) override { return misc_.enable_peer(dev, peer); }
  Status synchronize(int dev) override {
    streams_[dev]->synchronize();
    return state_.failed(dev);
  }
  Status reset(int dev) override {
    state_.reset(dev);
    misc_.reset(dev);
    streams_[dev] = std::make_unique<HostStreams>();
    std::lock_guard<std::mutex> lock(events_mu_);
    events_.clear();
    return Status::success();
  }

  // ---- streams and events ----
  Status stream_create(int dev, unsigned flags, int priority, uint64_t& stream) override {
    stream = streams_[dev]->create(!(flags & 1));  // cudaStreamNonBlocking = 1
    stream_attrs_.created(dev, stream, priority);
    return Status::success();
  }
  Status stream_destroy(int dev, uint64_t stream) override {
    if (!streams_[dev]->destroy(stream)) return no_stream();
    stream_attrs_.destroyed(dev, stream);
    return Status::success();
  }
  // ---- graphs3 (host_graphs3.h)
  Status stream_set_attribute(int dev, uint64_t stream, const LaunchAttribute& a) override {
    if (stream && !streams_[dev]->exists(stream)) return no_stream();
    return stream_attrs_.set(dev, stream, a);
  }
  Status stream_get_attribute(int dev, uint64_t stream, LaunchAttribute& a) override {
    if (stream && !streams_[dev]->exists(stream)) return no_stream();
    return stream_attrs_.get(dev, stream, a);
  }
  Status stream_synchronize(int dev, uint64_t stream) override {
    FencePtr tail = streams_[dev]->tail(stream);
    if (!tail) return no_stream();
    tail->wait();  // no lock held
    return state_.failed(dev);
  }
  Status stream_query(int dev, uint64_t stream) override {
    FencePtr tail = streams_[dev]->tail(stream);
    if (!tail) return no_stream();
    return tail->ready() ? Status::success() : Status::fail(err::NotReady, "stream busy");
  }
  Status stream_wait_event(int dev, uint64_t stream, uint64_t event) override {
    FencePtr fence;
    if (!event_fence(event, fence)) return no_event();
    if (!streams_[dev]->exists(stream)) return no_stream();
    if (fence && !streams_[dev]->submit(stream, nullptr, {fence})) return no_stream();
    return Status::success();
  }
  Status stream_priority_range(int, int& least, int& greatest) override {
    least = 0;
    greatest = -5;
    return Status::success();
  }
  Status event_create(int, unsigned flags, uint64_t& event) override {
    auto e = std::make_shared<Event>();
    e->timing = !(flags & 2);            // cudaEventDisableTiming = 2
    e->interprocess = (flags & 4) != 0;  // cudaEventInterprocess = 4
    std::lock_guard<std::mutex> lock(events_mu_);
    event = next_event_++;
    events_[event] = e;
    return Status::success();
  }
  Status event_destroy(int, uint64_t event) override {
    std::lock_guard<std::mutex> lock(events_mu_);
    return events_.erase(event) ? Status::success() : no_event();
  }
  Status event_record(int dev, uint64_t event, uint64_t stream) override {
    std::lock_guard<std::mutex> lock(events_mu_);  // enqueueing only, no wait
    auto it = events_.find(event);
    if (it == events_.end()) return no_event();
    std::function<void()> mark;  // a shared event's record completes for both sessions
    if (auto sh = it->second->shared) mark = [sh, n = sh->next_record()] { sh->done(n); };
    FencePtr fence = streams_[dev]->submit(stream, std::move(mark));
    if (!fence) return no_stream();
    it->second->fence = fence;
    return Status::success();
  }
  Status event_query(int, uint64_t event) override {
    FencePtr fence;
    if (!event_fence(event, fence)) return no_event();
    if (fence && !fence->ready()) return Status::fail(err::NotReady, "event not reached yet");
    return Status::success();
  }
  Status event_synchronize(int dev, uint64_t event) override {
    FencePtr fence;
    if (!event_fence(event, fence)) return no_event();
    if (fence) fence->wait();  // no lock held
    return state_.failed(dev);
  }
  Status event_elapsed(int, uint64_t start, uint64_t end, float& ms) override {
    FencePtr a, b;
    {
      std::lock_guard<std::mutex> lock(events_mu_);
      auto ia = events_.find(start), ib = events_.find(end);
      if (ia == events_.end() || ib == events_.end()) return no_event();
      if (!ia->second->timing || !ib->second->timing) return no_event();
      a = ia->second->fence;
      b = ib->second->fence;
      if (!a || !b) return no_event();
    }
    if (!a->ready() || !b->ready()) return Status::fail(err::NotReady, "event not reached yet");
    ms = std::chrono::duration<float, std::milli>(b->when() - a->when()).count();
    return Status::success();
  }
  // Like CUDA's, host functions run with a "driver lock" held, which allocation of page-locked
  // memory also takes: a host function that waits for a thread inside such a call deadlocks here as
  // it would on a GPU, so the tests catch it without one.
  Status host_func(int dev, uint64_t stream, void (*fn)(void*), void* arg) override {
    return submit(dev, stream, [=, this] {
      std::lock_guard<std::mutex> driver(driver_mu_);
      fn(arg);
    });
  }
  uint32_t* alloc_gate_words(size_t count) override {
    return static_cast<uint32_t*>(calloc(count, sizeof(uint32_t)));
  }
  void free_gate_words(uint32_t* words) override { ::free(words); }
  Status gate_wait(int dev, uint64_t stream, uint32_t* word, uint32_t value) override {
    // A device-side wait: the stream's worker waits, holding no driver lock.
    return submit(dev, stream, [=] { wait_gate(word, value); });
  }
  Status gate_signal(int dev, uint64_t stream, uint32_t* word, uint32_t value) override {
    return submit(dev, stream, [=] { open_gate(word, value); });
  }

  // ---- native graphs: the test double records a captured stream's work (submit) and runs it
  // again, in order, as one piece of work on the launch's stream.
  Status capture_begin(int dev, uint64_t stream) override {
    if (!streams_[dev]->exists(stream)) return no_stream();
    std::lock_guard<std::mutex> lock(capture_mu_);
    if (!capturing_.emplace(std::make_pair(dev, stream), std::make_shared<Work>()).second)
      return Status::fail(err::InvalidValue, "the stream is being captured already");
    any_capture_.store(true, std::memory_order_release);
    return Status::success();
  }
  Status capture_end(int dev, uint64_t stream, uint64_t& exec) override {
    exec = 0;
    std::lock_guard<std::mutex> lock(capture_mu_);
    auto it = capturing_.find({dev, stream});
    if (it == capturing_.end())
      return Status::fail(err::InvalidValue, "the stream is not captured");
    exec = next_native_++;
    natives_[exec] = {dev, std::move(it->second)};
    capturing_.erase(it);
    any_capture_.store(!capturing_.empty(), std::memory_order_release);
    return Status::success();
  }
  Status native_launch(int dev, uint64_t exec, uint64_t stream) override {
    std::shared_ptr<const Work> work;
    {
      std::lock_guard<std::mutex> lock(capture_mu_);
      auto it = natives_.find(exec);
      if (it == natives_.end() || it->second.first != dev)
        return Status::fail(err::InvalidValue, "no such native graph");
      work = it->second.second;
    }
    return submit(dev, stream, [work] {
      for (const auto& fn : *work) fn();
    });
  }
  void native_destroy(int, uint64_t exec) override {
    std::lock_guard<std::mutex> lock(capture_mu_);
    natives_.erase(exec);
  }
  // Conditional nodes (host_cond.h): backend graphs share the native graphs' numbering.
  Status cond_handle_create(int, uint64_t& graph, uint32_t value, uint32_t flags,
                            uint64_t& handle) override {
    std::lock_guard<std::mutex> lock(capture_mu_);
    return conds_.create_handle(graph, value, flags, handle, next_native_);
  }
  void native_graph_destroy(int, uint64_t graph) override { conds_.destroy_graph(graph); }
  Status capture_into(int dev, uint64_t stream, uint64_t graph, bool empty_first) override {
    if (!streams_[dev]->exists(stream)) return no_stream();
    std::shared_ptr<Work> work = conds_.work_of(graph, empty_first);
    if (!work) return Status::fail(err::InvalidValue, "no such native graph");
    std::lock_guard<std::mutex> lock(capture_mu_);
    if (!capturing_.emplace(std::make_pair(dev, stream), work).second)
      return Status::fail(err::InvalidValue, "the stream is being captured already");
    captured_into_[{dev, stream}] = graph;
    any_capture_.store(true, std::memory_order_release);
    return Status::success();
  }
  Status capture_conditional(int dev, uint64_t stream, uint64_t handle, uint32_t type,
                             uint32_t size, std::vector<uint64_t>& bodies) override {
    std::lock_guard<std::mutex> lock(capture_mu_);
    auto it = capturing_.find({dev, stream});
    auto g = captured_into_.find({dev, stream});
    if (it == capturing_.end() || g == captured_into_.end())
      return Status::fail(err::InvalidValue, "the stream is not captured into a graph");
    return conds_.add_node(g->second, *it->second, handle, type, size, bodies, next_native_);
  }
  Status capture_finish(int dev, uint64_t stream) override {
    std::lock_guard<std::mutex> lock(capture_mu_);
    if (!capturing_.erase({dev, stream}))
      return Status::fail(err::InvalidValue, "the stream is not captured");
    captured_into_.erase({dev, stream});
    any_capture_.store(!capturing_.empty(), std::memory_order_release);
    return Status::success();
  }
  Status native_instantiate(int dev, uint64_t graph, uint64_t& exec) override {
    std::shared_ptr<const Work> work;
    if (Status s = conds_.instantiate(graph, work); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(capture_mu_);
    exec = next_native_++;
    natives_[exec] = {dev, std::move(work)};
    return Status::success();
  }

  // ---- modules and kernels ----
  Status module_load(int dev, const uint8_t*, size_t, const fatbin::ModuleInfo& info,
                     uint64_t& module) override {
    // Globals live together in one mapping in the device window, with their initial values, and
    // are charged to the GPU's capacity like allocations.  Sizes come from the client's image:
    // each is bounded before it is rounded, and the total cannot overflow.
    auto m = std::make_shared<Module>();
    uint64_t total = 0;
    for (auto& [name, var] : info.globals) {
      if (var.size > fatbin::kMaxGlobalBytes || var.init.size() > var.size)
        return Status::fail(kInvalidKernelImage, "global variable " + name + " of " +
                                                     std::to_string(var.size) +
                                                     " bytes is beyond the host backend's limit");
      total += slot_size(var.size);  // at most kMaxGlobals * (kMaxGlobalBytes + 255): no overflow
    }
    if (total > ledgers_[dev]->capacity())
      return Status::fail(err::MemoryAllocation, "the module's globals (" + std::to_string(total) +
                                                     " bytes) exceed the GPU's capacity");
    if (total) {
      m->bytes = page_round(total);
      if (slots_[dev] < 0 || !ledgers_[dev]->reserve(slots_[dev], m->bytes))
        return Status::fail(err::MemoryAllocation,
                            "host backend capacity exhausted by the module's globals");
      m->ledger = ledgers_[dev];
      m->slot = slots_[dev];
      void* p = map_window(m->bytes);
      if (!p) return Status::fail(err::MemoryAllocation, "cannot map module globals");
      m->base = reinterpret_cast<uint64_t>(p);
      uint64_t off = 0;
      for (auto& [name, var] : info.globals) {
        if (!var.init.empty())
          memcpy(static_cast<char*>(p) + off, var.init.data(), var.init.size());
        m->globals[name] = {m->base + off, var.size};
        off += slot_size(var.size);
      }
    }
    modules_.push_back(m);
    module = modules_.size();
    return Status::success();
  }
  Status module_unload(int, uint64_t module) override {
    if (module == 0 || module > modules_.size())
      return Status::fail(err::InvalidValue, "no such module");
    modules_[module - 1].reset();  // kernels queued on streams keep their module alive
    return Status::success();
  }
  uint64_t module_bytes(int, uint64_t module) override {
    if (module == 0 || module > modules_.size() || !modules_[module - 1]) return 0;
    return modules_[module - 1]->bytes;  // what the ledger was charged
  }
  Status kernel_get(int dev, uint64_t module, const std::string& name, uint64_t& kernel,
                    std::optional<fatbin::KernelLayout>& driver_layout) override {
    driver_layout.reset();  // the host double has no driver to ask
    if (module == 0 || module > modules_.size() || !modules_[module - 1])
      return Status::fail(err::InvalidValue, "no such module");
    load_code(dev);
    rgpu_host_kernel_fn fn = nullptr;
    if (plugin_) {
      auto it = plugin_->find(name);
      if (it != plugin_->end()) fn = it->second;
    }
    kernels_.push_back({name, fn, modules_[module - 1]});
    kernel = kernels_.size();  // handles start at 1: 0 means "no kernel"
    return Status::success();
  }
  Status global_get(int, uint64_t module, const std::string& name, uint64_t& addr,
                    uint64_t& size) override {
    if (module == 0 || module > modules_.size() || !modules_[module - 1])
      return Status::fail(err::InvalidValue, "no such module");
    auto& g = modules_[module - 1]->globals;
    auto it = g.find(name);
    if (it == g.end()) return Status::fail(500, "no global variable " + name + " in the module");
    addr = it->second.first;
    size = it->second.second;
    return Status::success();
  }
  Status launch(int dev, uint64_t kernel, const LaunchDims& dims, const uint8_t* args, size_t size,
                const fatbin::KernelLayout& layout, uint64_t stream) override {
    return launch_ex(dev, kernel, dims, args, size, layout, stream, {});
  }
  // ---- launch (backend/host/host_launch.cc) ----
  Status launch_ex(int dev, uint64_t kernel, const LaunchDims& dims, const uint8_t* args,
                   size_t size, const fatbin::KernelLayout& layout, uint64_t stream,
                   const std::vector<LaunchAttribute>& attrs) override {
    rgpu_host_launch base{};
    HostLaunchPlan plan;
    if (Status s = plan_host_launch(dims, attrs, base, plan); !s.ok()) return s;
    if (kernel == 0 || kernel > kernels_.size())
      return Status::fail(err::InvalidValue, "no such kernel");
    const Kernel& k = kernels_[kernel - 1];
    if (!k.fn)
      return Status::fail(err::NotSupported,
                          "the host backend has no host implementation of kernel " + k.name +
                              " (it runs kernels from its test plugin, rgpud --host-kernels)");
    auto buf = std::make_shared<std::vector<uint8_t>>(args, args + size);
    std::vector<uint32_t> offsets;
    for (auto& p : layout.params) offsets.push_back(p.offset);
    rgpu_host_kernel_fn fn = k.fn;
    std::shared_ptr<Module> module = k.module;
    FailSlot* fail = &fail_slots_[dev];
    HostArrays* arrays = &arrays_;
    HostConditionals* conds = &conds_;
    Status s = submit(dev, stream, [=] {
      std::vector<void*> params(offsets.size());
      for (size_t i = 0; i < offsets.size(); ++i) params[i] = buf->data() + offsets[i];
      rgpu_host_launch l = base;
      for (int i = 0; i < 3; ++i) l.grid[i] = dims.grid[i], l.block[i] = dims.block[i];
      l.shared_mem = dims.shared_mem;
      l.symbol = &HostExecutor::symbol;
      l.ctx = module.get();
      l.fail = &HostExecutor::kernel_fail;
      l.fail_ctx = fail;
      l.resource = &HostArrays::resource;
      l.res_ctx = arrays;
      l.set_conditional = &HostConditionals::set;
      l.cond_ctx = conds;
      fn(&l, params.data());
      fflush(stdout);
    });
    // Completion and programmatic events fire once the kernel is done (no earlier trigger here).
    for (uint64_t e : plan.events)
      if (s.ok()) s = event_record(dev, e, stream);
    return s;
  }
  Status occupancy_cluster(int, uint64_t, int query, const LaunchDims& dims,
                           const std::vector<LaunchAttribute>& attrs, int32_t& value) override {
    return host_occupancy_cluster(query, dims, attrs, value);
  }
  Status occupancy_dynamic_smem(int, uint64_t, int32_t blocks, int32_t block_size,
                                uint64_t& bytes) override {
    return host_occupancy_dynamic_smem(blocks, block_size, bytes);
  }
  Status func_attributes(int, uint64_t, std::vector<int32_t>& values) override {
    values.assign(std::begin(kFuncAttrs), std::end(kFuncAttrs));
    return Status::success();
  }
  Status func_set_attribute(int, uint64_t, int32_t, int32_t) override { return Status::success(); }
  Status func_set_cache_config(int, uint64_t, int32_t) override { return Status::success(); }
  Status occupancy(int, uint64_t, int32_t block_size, uint64_t dynamic_smem, uint32_t,
                   int32_t& blocks) override {
    return host_occupancy(block_size, dynamic_smem, blocks);
  }
  // ---- drvlibs (host_drvlibs.h)
  Status tensor_map_encode(int, const TensorMapArgs& a, uint8_t (&map)[128]) override {
    return host_tensor_map_encode(a, map);
  }
  Status tensor_map_replace_address(int, uint8_t (&map)[128], uint64_t address) override {
    return host_tensor_map_replace_address(map, address);
  }
  Status stream_mem_ops(int dev, uint64_t stream, const std::vector<MemOp>& ops) override {
    return submit(dev, stream, mem_ops_.task(ops));
  }
  void cancel_stream_waits() override { mem_ops_.cancel(); }
  Status link_create(int, uint64_t& link) override { return links_.create(link); }
  Status link_add(int, uint64_t link, uint32_t type, const std::string& name, const uint8_t* data,
                  size_t size) override {
    return links_.add(link, type, name, data, size);
  }
  Status link_complete(int, uint64_t link, std::vector<uint8_t>& image) override {
    return links_.complete(link, image);
  }
  Status link_destroy(int, uint64_t link) override { return links_.destroy(link); }

  Status host_register(void*, size_t) override { return Status::success(); }
  Status host_unregister(void*) override { return Status::success(); }
  // Host "kernels" run in this process: the memory at the client's address is the mapping.
  Status host_register_mapped(void*, size_t) override { return Status::success(); }
  // Page-locked allocation takes the driver lock (see host_func) and, like pinning, touches every
  // page while holding it.
  void* alloc_staging(size_t bytes) override {
    std::lock_guard<std::mutex> driver(driver_mu_);
    void* p = malloc(bytes);
    if (p) ::memset(p, 0, bytes);
    return p;
  }
  void free_staging(void* p) override {
    std::lock_guard<std::mutex> driver(driver_mu_);
    ::free(p);
  }

 private:
  struct Module {
    uint64_t base = 0, bytes = 0;
    HostLedger* ledger = nullptr;  // charged `bytes` for slot `slot`
    int slot = -1;
    std::map<std::string, std::pair<uint64_t, uint64_t>> globals;  // name -> (address, size)
    ~Module() {
      if (base) munmap(reinterpret_cast<void*>(base), bytes);
      if (ledger) ledger->release(slot, bytes);
    }
  };
  // A global's slot in the module's mapping: its size rounded up to 256 bytes (callers bound
  // `size` by kMaxGlobalBytes first, so this cannot overflow).
  static uint64_t slot_size(uint64_t size) { return (size + 255) / 256 * 256; }
  struct Kernel {
    std::string name;
    rgpu_host_kernel_fn fn;
    std::shared_ptr<Module> module;
  };
  struct Event {
    FencePtr fence;  // the latest record; null: never recorded (complete)
    bool timing = true;
    bool interprocess = false;
    std::shared_ptr<SharedEvent> shared;  // exported or imported (host_misc.h)
  };
  // ---- devmem
  Status device_config(int dev, ConfigOp op, uint32_t key, uint64_t& value) override {
    return state_.config(dev, op, key, value);
  }
  // ---- arrays (host_arrays.h); one set for every emulated GPU (the session checks devices)
  Status array_create(int, const ArraySpec& spec, uint64_t& array) override {
    return arrays_.create(spec, array);
  }
  Status array_level(int, uint64_t mipmapped, uint32_t level, uint64_t& array) override {
    return arrays_.level(mipmapped, level, array);
  }
  Status array_destroy(int, uint64_t array, bool mipmapped) override {
    return arrays_.destroy(array, mipmapped);
  }
  Status array_copy(int dev, const ArrayCopy& c, uint64_t stream) override {
    std::function<void()> work;
    if (Status s = arrays_.plan_copy(c, work); !s.ok()) return s;
    return submit(dev, stream, std::move(work));
  }
  Status array_query(int, uint64_t array, bool mipmapped, uint32_t op,
                     std::vector<uint64_t>& values) override {
    return arrays_.query(array, mipmapped, op, values);
  }
  Status texture_create(int, bool surface, const TextureSpec& spec, uint64_t& object) override {
    return arrays_.texture_create(surface, spec, object);
  }
  Status texture_destroy(int, bool surface, uint64_t object) override {
    return arrays_.texture_destroy(surface, object);
  }
  HostStreamAttributes stream_attrs_;
  struct FailSlot {
    HostDeviceState* state;
    int dev;
  };
  static void kernel_fail(void* ctx, int error) {
    auto* f = static_cast<FailSlot*>(ctx);
    f->state->fail(f->dev, error);
  }

  static void* symbol(void* ctx, const char* name) {
    auto& g = static_cast<Module*>(ctx)->globals;
    auto it = g.find(name);
    return it == g.end() ? nullptr : reinterpret_cast<void*>(it->second.first);
  }
  static Status no_stream() { return Status::fail(400, "no such stream"); }
  static Status no_event() { return Status::fail(400, "no such event"); }
  Status submit(int dev, uint64_t stream, std::function<void()> fn) {
    std::shared_lock<std::shared_mutex> loading(load_mu_, std::defer_lock);
    if (lazy_loading_) loading.lock();  // waits while code is being loaded (load_code)
    if (any_capture_.load(std::memory_order_acquire)) {  // recorded, not run (capture_begin)
      std::lock_guard<std::mutex> lock(capture_mu_);
      auto it = capturing_.find({dev, stream});
      if (it != capturing_.end()) {
        if (!streams_[dev]->exists(stream)) return no_stream();
        it->second->push_back(std::move(fn));
        return Status::success();
      }
    }
    return streams_[dev]->submit(stream, std::move(fn)) ? Status::success() : no_stream();
  }
  // CUDA's lazy loading, emulated when RGPU_HOST_LAZY_LOADING=1 (tests that need it): loading a
  // function or global into a context may synchronize the context, and the driver holds a lock
  // meanwhile that every other thread's submissions wait for.  Work that cannot finish until
  // another thread submits then deadlocks here as on a GPU.
  void load_code(int dev) {
    if (!lazy_loading_) return;
    std::unique_lock<std::shared_mutex> loading(load_mu_);
    streams_[dev]->synchronize();
  }
  // The event's latest fence (null: never recorded); false if there is no such event.
  bool event_fence(uint64_t event, FencePtr& fence) {
    std::lock_guard<std::mutex> lock(events_mu_);
    auto it = events_.find(event);
    if (it == events_.end()) return false;
    fence =
        it->second->shared ? it->second->shared->fence_now(it->second->shared) : it->second->fence;
    return true;
  }
  static void copy2d(void* dst, uint64_t dpitch, const void* src, uint64_t spitch, Rect r) {
    for (uint64_t row = 0; row < r.height; ++row)
      memmove(static_cast<char*>(dst) + row * dpitch, static_cast<const char*>(src) + row * spitch,
              r.width);
  }
  // Device addresses come from their own window (as a GPU's do), far from where the kernel puts
  // ordinary mappings, so they do not collide with a co-located client's own memory.
  void* map_window(uint64_t bytes) {
    void* p = mmap(reinterpret_cast<void*>(next_hint_), bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    next_hint_ += bytes + (2ull << 20);
    return p == MAP_FAILED ? nullptr : p;
  }
  void release(int dev, uint64_t p, uint64_t bytes) {
    ipc_.forget(p);
    munmap(reinterpret_cast<void*>(p), bytes);
    ledgers_[dev]->release(slots_[dev], bytes);
  }

  static std::string hex(uint64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
  }

  static constexpr uint64_t kGranule = 2ull << 20;
  // Module globals (placed by the "driver", as on a GPU) live in their own area at 32 TiB, away
  // from the client-chosen windows of allocations.
  static constexpr uint64_t kWindow = 0x200000000000ull;
  uint64_t next_hint_ = kWindow;
  std::vector<HostLedger*> ledgers_;
  std::vector<int> slots_;
  std::vector<std::map<uint64_t, uint64_t>> allocs_;    // mappings: address -> bytes
  std::vector<std::map<uint64_t, uint64_t>> reserved_;  // windows: base -> bytes
  const HostKernels* plugin_;
  std::vector<std::shared_ptr<Module>> modules_;
  std::vector<Kernel> kernels_;
  std::vector<std::unique_ptr<HostStreams>> streams_;
  HostDeviceState state_;
  HostIpc ipc_;        // CUDA IPC (host_ipc.h)
  std::mutex mem_mu_;  // allocs_ and ipc_: peer links (server/peer_ipc.h) export from their threads
  HostVmm vmm_;        // virtual memory management (host_vmm.h)
  HostArrays arrays_;  // CUDA arrays, texture and surface objects (host_arrays.h)
  HostMisc misc_;      // peer access, atomics, shared events (host_misc.h)
  HostMemOps mem_ops_;  // stream memory operations (host_drvlibs.h)
  HostLinks links_;     // cuLink* (host_drvlibs.h)
  std::vector<FailSlot> fail_slots_;
  std::vector<std::unique_ptr<NotifySlot>> notify_;  // per GPU (set_async_notify)
  // Events are used by a session's dispatcher and its waiters at once; the lock guards the map and
  // the fences' slots, never a wait.  (Streams: HostStreams has its own lock.)
  std::mutex events_mu_;
  std::map<uint64_t, std::shared_ptr<Event>> events_;
  uint64_t next_event_ = 1;
  std::mutex driver_mu_;
  const bool lazy_loading_ = [] {
    const char* v = getenv("RGPU_HOST_LAZY_LOADING");
    return v && strcmp(v, "1") == 0;
  }();
  std::shared_mutex load_mu_;  // load_code() holds it alone; submit() shares it
  // Native graphs (capture_begin ...): capture_mu_ guards the maps, never held across a wait.
  using Work = HostWork;
  std::mutex capture_mu_;
  std::atomic<bool> any_capture_{false};
  std::map<std::pair<int, uint64_t>, std::shared_ptr<Work>> capturing_;
  std::map<uint64_t, std::pair<int, std::shared_ptr<const Work>>> natives_;
  uint64_t next_native_ = 1;  // native graphs, backend graphs and their bodies
  std::map<std::pair<int, uint64_t>, uint64_t> captured_into_;  // capture_into's graph
  HostConditionals conds_;
  static constexpr uint64_t kStagedCap = 64u << 20;  // bytes of staged copies not yet done
  std::mutex staged_mu_;
  std::condition_variable staged_cv_;
  uint64_t staged_ = 0;  // the emulated driver lock (host_func, alloc_staging)
};

}  // namespace

std::unique_ptr<Executor> make_host_executor(std::vector<HostLedger*> ledgers,
                                             const HostKernels* kernels) {
  return std::make_unique<HostExecutor>(std::move(ledgers), kernels);
}

bool load_host_kernels(const std::string& path, HostKernels& out, std::string& error) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    error = "cannot load host kernel plugin " + path + ": " + (why ? why : "?");
    return false;
  }
  auto list = reinterpret_cast<rgpu_host_kernels_fn>(dlsym(lib, RGPU_HOST_KERNELS_SYMBOL));
  if (!list) {
    error = path + " does not export " RGPU_HOST_KERNELS_SYMBOL;
    return false;
  }
  unsigned n = 0;
  const rgpu_host_kernel* k = list(&n);
  for (unsigned i = 0; i < n; ++i)
    if (k[i].name && k[i].fn) out[k[i].name] = k[i].fn;
  return true;
}

}  // namespace rgpu::backend
