// What a server tells about its GPUs without running anything on them: the answers behind rgpu's
// libnvidia-ml.so.1 and `rgpu ls` (proto/messages_nvml.h).  An implementation never creates a
// CUDA context (a context costs hundreds of MiB of GPU memory): the cuda backend reads the
// server's NVML and what rgpud's probe learnt from CUDA at start; the host backend (the test
// double) answers from its simulated devices.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/executor.h"
#include "proto/messages_nvml.h"

namespace rgpu::backend {

class HostLedger;

class GpuQuery {
 public:
  virtual ~GpuQuery() = default;
  virtual int device_count() const = 0;
  virtual void system(proto::NvmlSystemRep& out) = 0;
  // Fills the groups of `want` (proto::NvmlField) the server can read and sets `out.have` to
  // them; InvalidDevice for a GPU it does not have.
  virtual Status device(int gpu, uint32_t want, proto::NvmlDeviceRep& out) = 0;
};

// The cuda backend's: `probe` is what rgpud's probe learnt from CUDA (one entry per CUDA device,
// in CUDA's order), `cuda_driver` its cuDriverGetVersion.  The server's NVML
// (libnvidia-ml.so.1, never rgpu's own) is loaded at the first question; without it the answers
// are the probe's and the rest is not supported.
std::unique_ptr<GpuQuery> make_cuda_gpu_query(const proto::NvmlProbeTable& probe, int cuda_driver);
// What the probe child collects (backend/cuda/cuda_gpu_probe.cc); false with `error` set when
// CUDA cannot tell.  Creates no context.
bool probe_cuda_gpus(proto::NvmlProbeTable& out, std::string& error);

// True when `lib` (a dlopen handle) is rgpu's own libnvidia-ml.so.1, which rgpud never reads: it
// answers nvmlErrorString(kRgpuNvmlMarkerCode) with its marker (frontend/nvml/nvml_abi.h).
bool is_rgpu_nvml(void* lib);

// The host backend's (a test double): one device per ledger.
std::unique_ptr<GpuQuery> make_host_gpu_query(std::vector<HostLedger*> ledgers);

}  // namespace rgpu::backend
