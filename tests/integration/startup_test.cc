// Start-up costs with lazy modules (client/module_loading.cc), counted by RGPU_STATS against the
// host backend: what cublasCreate and one SGEMM of the toolkit's cuBLAS ship and how many round
// trips they make, a program registering many kernels in many fat binaries but using one (under
// rgpu's runtime and NVIDIA's), and images that fail only where they are first used.  Each
// threshold is a little above what was measured (the measurement in its comment), so the test fails
// when start-up grows.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

// The summary line RGPU_STATS prints at exit (client/link_stats.cc).
struct Counts {
  long shipped = -1, bytes = -1, lookups = -1, hashes = -1, round_trips = -1;
};

Counts counts_of(const std::string& err) {
  Counts c;
  const size_t at = err.rfind("rgpu stats: images shipped ");
  if (at == std::string::npos) return c;
  sscanf(err.c_str() + at,
         "rgpu stats: images shipped %ld (%ld bytes), image look-ups %ld (%ld hashes), round "
         "trips %ld",
         &c.shipped, &c.bytes, &c.lookups, &c.hashes, &c.round_trips);
  return c;
}

std::string describe(const Counts& c) {
  return "shipped " + std::to_string(c.shipped) + " (" + std::to_string(c.bytes) +
         " bytes), look-ups " + std::to_string(c.lookups) + " (" + std::to_string(c.hashes) +
         " hashes), round trips " + std::to_string(c.round_trips);
}

Env stats_env(const Daemon& d) {
  Env env = d.client_env();
  env["RGPU_STATS"] = "1";
  return env;
}

}  // namespace

// cuBLAS's runtime (NVIDIA's, linked into libcublas) registers 567 fat binaries (206 MB).  Before
// lazy modules cublasCreate shipped all of them and looked each up: 567 images, 571 look-ups and
// 1209 round trips with the module cache cold, 571 look-ups and 642 round trips warm.  The host
// backend has no host implementation of cuBLAS's kernels, so the SGEMM's launch fails
// (cudaErrorNotSupported at the synchronization) and its product cannot be checked here.
TEST(Startup, CublasCreateAndOneSgemmShipOnlyWhatTheyUse) {
  Daemon d;
  Env env = stats_env(d);
  for (const bool warm : {false, true}) {
    SCOPED_TRACE(warm ? "module cache warm" : "module cache cold");
    Result r = run({cuda_program("startup_blas")}, env, 120);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("ok   cublasCreate"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("startup_blas: sgemm launched, synchronize cudaErrorNotSupported"),
              std::string::npos)
        << r.out << r.err;
    const Counts c = counts_of(r.err);
    ASSERT_GE(c.shipped, 0) << r.err;
    printf("cublasCreate + SGEMM, cache %s: %s\n", warm ? "warm" : "cold", describe(c).c_str());
    // Measured (host backend, 2026-12-02): cold 4 images (1.2 MB), 4 look-ups (8 hashes), 79
    // round trips; warm none shipped, 5 look-ups (9 hashes), 76 round trips.
    EXPECT_LE(c.shipped, warm ? 0 : 4) << describe(c);
    EXPECT_LE(c.bytes, warm ? 0 : 8 << 20) << describe(c);
    EXPECT_LE(c.lookups, 8) << describe(c);
    EXPECT_LE(c.round_trips, 90) << describe(c);
  }
}

// 4 fat binaries of 33 kernels and 4 globals: one global read, one kernel launched.  Before lazy
// modules NVIDIA's runtime shipped all 4 (rgpu's already shipped 1).
TEST(Startup, ManyKernelsRegisteredOneUsedShipsOneImage) {
  for (const bool nvidia_runtime : {false, true}) {
    SCOPED_TRACE(nvidia_runtime ? "NVIDIA's runtime" : "rgpu's runtime");
    Daemon d;  // a module cache of its own: nothing held from the other run
    Env env = stats_env(d);
    if (nvidia_runtime) env["LD_LIBRARY_PATH"] = nvidia_runtime_dir();
    Result r = run({cuda_program("startup_many")}, env, 60);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("startup_many: passed"), std::string::npos) << r.out;
    const Counts c = counts_of(r.err);
    printf("startup_many, %s: %s\n", nvidia_runtime ? "NVIDIA's runtime" : "rgpu's runtime",
           describe(c).c_str());
    EXPECT_EQ(c.shipped, 1) << describe(c);
    EXPECT_LE(c.lookups, 2) << describe(c);
    EXPECT_LE(c.round_trips, 20) << describe(c);
  }
}

// An image whose headers are garbage is refused by cuModuleLoadData; one whose contents do not
// parse loads and fails at its first use with CUDA_ERROR_INVALID_IMAGE and the server's reason,
// and is not sent again at the next uses; a module loaded and unloaded unused ships nothing; two
// threads first-launching kernels of one library ship it once (tests/cuda/startup_image.cpp).
TEST(Startup, ImagesFailWhereFirstUsedAndShipOnce) {
  Daemon d;
  Result r = run({cuda_program("startup_image")}, stats_env(d), 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("startup_image: passed"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("cannot parse the fat binary: zstd"), std::string::npos) << r.err;
  const Counts c = counts_of(r.err);
  // The broken image once, launch_lib's cubin once (its first load and unload shipped nothing),
  // launch_lib's fat binary once for both threads.
  EXPECT_EQ(c.shipped, 3) << describe(c);
}

namespace {

// small_loop in `mode` over `transport` (empty: the default), checked to pass with `expect` in its
// output; `env` as given.
Result small_loop(const std::string& mode, Env env, const char* transport, const char* expect) {
  if (transport) env["RGPU_TRANSPORT"] = transport;
  Result r = run({cuda_program("small_loop"), mode}, env, 120);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(expect), std::string::npos) << r.out << r.err;
  return r;
}

// The first number after `line` in RGPU_STATS's output (-1 when the line is missing).
long stat_after(const std::string& err, const std::string& line) {
  const size_t at = err.find(line);
  long v = -1;
  if (at != std::string::npos) sscanf(err.c_str() + at + line.size(), "%ld", &v);
  return v;
}

}  // namespace

// A Thrust-style loop of small synchronous calls (tests/cuda/small_loop.cu: allocations,
// 256-byte copies, the queries an algorithm makes, a launch, a few bytes read back, a
// one-element write, frees), over both transports: one round trip per iteration (the read-back,
// where CUDA waits too).  The control run with RGPU_SMALL_ALLOC=0 shows what the count was before
// small allocations came from the client's slabs: two more per iteration (its two cudaMalloc).
TEST(Startup, SmallCallLoopMakesOneRoundTripPerIteration) {
  Daemon d;
  const int iters = 100;
  for (const char* transport : {"tcp", "shm"}) {
    for (const bool slabs : {true, false}) {
      SCOPED_TRACE(std::string(transport) + (slabs ? "" : ", RGPU_SMALL_ALLOC=0"));
      Env env = stats_env(d);
      env["RGPU_TRANSPORT"] = transport;
      if (!slabs) env["RGPU_SMALL_ALLOC"] = "0";
      Result r = run({cuda_program("small_loop"), std::to_string(iters)}, env, 120);
      ASSERT_EQ(r.status, 0) << r.out << r.err;
      EXPECT_NE(r.out.find("small_loop: passed"), std::string::npos) << r.out;
      const Counts c = counts_of(r.err);
      printf("small_loop x%d over %s%s: %s\n", iters, transport, slabs ? "" : " without slabs",
             describe(c).c_str());
      // Measured (host backend, 2026-12-02): 106 round trips (the loop's 100, the device's
      // information, its address window, one slab, the kernel's look-up, attributes and
      // occupancy); without slabs 305.
      if (slabs)
        EXPECT_LE(c.round_trips, iters + 8) << describe(c);
      else
        EXPECT_GE(c.round_trips, 3 * iters) << describe(c);
      // The synchronization after each read-back is answered on the client.
      EXPECT_EQ(stat_after(r.err, "answered here (no request) StreamSynchronize"), iters) << r.err;
    }
  }
}

// A small allocation freed while a kernel queued before the free still writes it comes back only
// once that kernel is done (tests/cuda/small_loop.cu's reuse check): the reclaims made while the
// kernel runs free nothing (new slabs are taken), and one made after it does.
TEST(Startup, FreedSmallAllocationIsReusedOnlyAfterTheWorkBeforeItsFree) {
  Daemon d;
  for (const char* transport : {"tcp", "shm"}) {
    SCOPED_TRACE(transport);
    Result r = small_loop("reuse", stats_env(d), transport, "the freed block came back cleared");
    EXPECT_GE(stat_after(r.err, "rgpu stats: SmallReclaim "), 1) << r.err;
  }
}

// Two virtual devices naming one GPU count their quarantine epochs apart: device 0's epochs,
// complete, do not make device 1's so (small_loop's siblings check, the reuse check on device 1
// after device 0 closed ten epochs).
TEST(Startup, SmallAllocationEpochsOfTwoVirtualDevicesOnOneGpuAreApart) {
  Daemon d;
  Env env = stats_env(d);
  env["RGPU_SERVERS"] = d.servers() + "/0," + d.servers() + "/0";
  Result r = small_loop("siblings", env, nullptr, "the freed block came back cleared");
  EXPECT_GE(stat_after(r.err, "rgpu stats: SmallReclaim "), 11) << "device 0's ten and device 1's\n"
                                                                << r.err;
}

// A small allocation never waits for the GPU (CUDA's cudaMalloc does not): a kernel waiting for
// a flag the program copies after many allocations, with freed blocks waiting to be reused, sees
// the flag (small_loop's wait check; the kernel gives up after 20 s if an allocation waited).
TEST(Startup, SmallAllocationsNeverWaitForTheGpu) {
  Daemon d;
  for (const char* transport : {"tcp", "shm"}) {
    SCOPED_TRACE(transport);
    Result r = small_loop("wait", stats_env(d), transport, "small_loop: passed");
    EXPECT_NE(r.err.find("rgpu stats: SmallReclaim "), std::string::npos)
        << "no reclaim was tried while the kernel waited: the check checks nothing\n"
        << r.err;
  }
}

// A synchronization is answered on the client only when nothing was sent since a synchronous call
// found the stream idle: after a slow kernel it waits (small_loop's sync check, on the legacy
// stream and on a stream of its own: an event recorded after the kernel is complete on return).
TEST(Startup, SynchronizationsAnsweredLocallyOnlyWhenNothingWasQueued) {
  Daemon d;
  for (const char* transport : {"tcp", "shm"}) {
    SCOPED_TRACE(transport);
    Result r = small_loop("sync", stats_env(d), transport, "small_loop: passed");
    EXPECT_EQ(stat_after(r.err, "answered here (no request) StreamSynchronize"), 4)
        << "two idle synchronizations per stream answered here\n"
        << r.err;
  }
}
