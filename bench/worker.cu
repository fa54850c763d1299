// rgpu bench's measuring program.  `rgpu bench` runs it twice, natively (NVIDIA's libcudart) and
// through rgpu (rgpu's), so both are measured by the same code.  Results go to stdout as
//   RESULT <op> <bytes> <value> <unit>
// and progress to stderr.  Usage: rgpu-bench-worker [MAX_BYTES] | --peer [MAX_BYTES]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

extern "C" __global__ void bench_empty() {}

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A row that cannot be measured here (e.g. a server without graphs) is left out, not fatal.
bool soft(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  fprintf(stderr, "  (skipped: %s: %s)\n", what, cudaGetErrorString(e));
  cudaGetLastError();
  return false;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    fprintf(stderr, "bench worker: %s: %s\n", what, cudaGetErrorString(e));
    exit(1);
  }
}

void sync_latency() {
  fprintf(stderr, "  synchronous call latency...\n");
  std::vector<double> us;
  for (int i = 0; i < 5500; ++i) {
    auto t0 = Clock::now();
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    auto t1 = Clock::now();
    if (i >= 500) us.push_back(seconds(t0, t1) * 1e6);
  }
  std::sort(us.begin(), us.end());
  printf("RESULT sync_call 0 %.2f us\n", us[us.size() / 2]);
}

void launch_rate() {
  fprintf(stderr, "  empty-kernel launch rate...\n");
  bench_empty<<<1, 1>>>();
  if (cudaDeviceSynchronize() != cudaSuccess) {
    fprintf(stderr, "  (launches fail here: %s)\n", cudaGetErrorString(cudaGetLastError()));
    return;
  }
  const int n = 100000;
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) bench_empty<<<1, 1>>>();
    check(cudaDeviceSynchronize(), "launch loop");
    best = std::max(best, n / seconds(t0, Clock::now()));
  }
  printf("RESULT launch_rate 0 %.0f launches/s\n", best);
}

// cudaGraphLaunch of an instantiated graph holding one empty kernel node, launches per second
// (best of 3 rounds, each ending with cudaStreamSynchronize).
void graph_launch_rate() {
  fprintf(stderr, "  graph launch rate...\n");
  cudaStream_t s;
  check(cudaStreamCreate(&s), "cudaStreamCreate");
  cudaGraph_t g;
  if (!soft(cudaGraphCreate(&g, 0), "cudaGraphCreate")) return;
  cudaKernelNodeParams kp = {};
  kp.func = reinterpret_cast<void*>(bench_empty);
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(1);
  cudaGraphNode_t node;
  cudaGraphExec_t exec;
  if (!soft(cudaGraphAddKernelNode(&node, g, nullptr, 0, &kp), "cudaGraphAddKernelNode") ||
      !soft(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate"))
    return;
  if (!soft(cudaGraphLaunch(exec, s), "cudaGraphLaunch") ||
      !soft(cudaStreamSynchronize(s), "cudaStreamSynchronize"))
    return;
  const int n = 50000;
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
    check(cudaStreamSynchronize(s), "graph launch loop");
    best = std::max(best, n / seconds(t0, Clock::now()));
  }
  printf("RESULT graph_launch_rate 0 %.0f launches/s\n", best);
  fflush(stdout);
  check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  check(cudaGraphDestroy(g), "cudaGraphDestroy");
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
}

// A graph captured from a stream (100 empty kernels, a 4 KiB memset, a 4 KiB device-to-device
// copy): median time of one cudaGraphLaunch + cudaStreamSynchronize, against the same 102 calls
// issued on the stream + cudaStreamSynchronize.
void graph_replay() {
  fprintf(stderr, "  captured-graph replay...\n");
  const size_t bytes = 4096;
  cudaStream_t s;
  check(cudaStreamCreate(&s), "cudaStreamCreate");
  char *a, *b;
  check(cudaMalloc(&a, bytes), "cudaMalloc");
  check(cudaMalloc(&b, bytes), "cudaMalloc");
  check(cudaMemset(b, 0, bytes), "cudaMemset");
  unsigned char value = 0;
  auto issue = [&] {
    for (int i = 0; i < 100; ++i) bench_empty<<<1, 1, 0, s>>>();
    check(cudaMemsetAsync(a, value, bytes, s), "cudaMemsetAsync");
    check(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
  };
  value = 0x5a;
  if (!soft(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture"))
    return;
  issue();
  cudaGraph_t g;
  cudaGraphExec_t exec;
  if (!soft(cudaStreamEndCapture(s, &g), "cudaStreamEndCapture") ||
      !soft(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate"))
    return;
  auto median = [&](const std::function<void()>& once) {
    once();  // warm up
    std::vector<double> us;
    for (int i = 0; i < 300; ++i) {
      auto t0 = Clock::now();
      once();
      us.push_back(seconds(t0, Clock::now()) * 1e6);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  };
  double graph = median([&] {
    check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  });
  // The replays really ran: b holds the captured memset's byte, copied from a.
  std::vector<unsigned char> back(bytes);
  check(cudaMemcpy(back.data(), b, bytes, cudaMemcpyDeviceToHost), "check replay");
  for (unsigned char c : back)
    if (c != 0x5a) {
      fprintf(stderr, "bench worker: the graph replay did not copy the memset bytes\n");
      exit(1);
    }
  value = 0x3c;
  double stream = median([&] {
    issue();
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  });
  printf("RESULT graph_replay 0 %.2f us\n", graph);
  printf("RESULT stream_replay 0 %.2f us\n", stream);
  fflush(stdout);
  check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  check(cudaGraphDestroy(g), "cudaGraphDestroy");
  cudaFree(a);
  cudaFree(b);
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
}

// cudaMalloc + cudaFree pairs per second, per size (the driver does not sub-allocate; rgpu does
// for small sizes).
void alloc_rate() {
  fprintf(stderr, "  allocation rate...\n");
  for (size_t bytes : {4ull << 10, 64ull << 10, 1ull << 20, 2ull << 20, 8ull << 20, 64ull << 20}) {
    auto pair = [&] {
      void* p = nullptr;
      check(cudaMalloc(&p, bytes), "cudaMalloc");
      check(cudaFree(p), "cudaFree");
    };
    pair();  // warm up
    auto t0 = Clock::now();
    for (int i = 0; i < 10; ++i) pair();
    double one = std::max(seconds(t0, Clock::now()) / 10, 1e-7);
    int reps = static_cast<int>(std::min(20000.0, std::max(20.0, 0.25 / one)));
    t0 = Clock::now();
    for (int i = 0; i < reps; ++i) pair();
    printf("RESULT alloc_rate %zu %.0f pairs/s\n", bytes, reps / seconds(t0, Clock::now()));
    fflush(stdout);
  }
}

void bandwidth(size_t max_bytes) {
  char *pinned, *dev;
  check(cudaMallocHost(&pinned, max_bytes), "cudaMallocHost");
  std::vector<char> pageable(max_bytes);
  check(cudaMalloc(&dev, max_bytes), "cudaMalloc");
  memset(pinned, 1, max_bytes);
  memset(pageable.data(), 2, max_bytes);
  for (size_t bytes = 4; bytes <= max_bytes; bytes *= 16) {
    for (int mem = 0; mem < 2; ++mem) {
      char* host = mem ? pageable.data() : pinned;
      const char* kind = mem ? "pageable" : "pinned";
      for (int dir = 0; dir < 2; ++dir) {
        auto copy = [&] {
          check(dir ? cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost)
                    : cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice),
                "cudaMemcpy");
          if (!dir) check(cudaDeviceSynchronize(), "sync");  // host-to-device may return early
        };
        copy();  // warm up
        // Enough repetitions for ~0.25 s of copying (at least 3, at most 2000).
        auto t0 = Clock::now();
        copy();
        double one = std::max(seconds(t0, Clock::now()), 1e-7);
        int reps = static_cast<int>(std::min(2000.0, std::max(3.0, 0.25 / one)));
        t0 = Clock::now();
        for (int r = 0; r < reps; ++r) copy();
        double gbs = bytes * reps / seconds(t0, Clock::now()) / 1e9;
        printf("RESULT %s_%s %zu %.6g GB/s\n", dir ? "d2h" : "h2d", kind, bytes, gbs);
        fflush(stdout);
      }
    }
    fprintf(stderr, "  copies of %zu bytes done\n", bytes);
  }
  cudaFree(dev);
  cudaFreeHost(pinned);
}

// `rgpu bench --peer`: device 0 -> device 1 (two servers through rgpu), 4 B to max_bytes in
// powers of 4.  peer_copy: cudaMemcpyPeer; relay: cudaMemcpy device 0 -> page-locked host memory
// here, then host -> device 1.  Bandwidth for every size, the time of one copy (median) up to
// 64 KiB.  A peer copy the servers refuse with cudaErrorNotSupported prints "UNSUPPORTED".
void peer(size_t max_bytes) {
  int n = 0;
  check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  // Natively on a machine with one GPU (rgpu bench sets RGPU_BENCH_PEER_ONE_GPU for its native
  // run): copies within it, the reference for daemons that share it.
  const char* one_gpu = getenv("RGPU_BENCH_PEER_ONE_GPU");
  const int d1 = n == 1 && one_gpu && *one_gpu == '1' ? 0 : 1;
  if (n < 2 && d1) {
    fprintf(stderr, "bench worker: --peer needs two devices (RGPU_SERVERS with two servers)\n");
    exit(1);
  }
  cudaDeviceProp p0, p1;
  check(cudaGetDeviceProperties(&p0, 0), "cudaGetDeviceProperties");
  check(cudaGetDeviceProperties(&p1, d1), "cudaGetDeviceProperties");
  printf("DEVICE %s -> %s%s\n", p0.name, p1.name, d1 ? "" : " (one GPU: copies within it)");
  char *a, *b, *host;
  check(cudaSetDevice(0), "cudaSetDevice(0)");
  check(cudaMalloc(&a, max_bytes), "cudaMalloc on device 0");
  check(cudaMemset(a, 3, max_bytes), "cudaMemset");
  check(cudaMallocHost(&host, max_bytes), "cudaMallocHost");
  check(cudaSetDevice(d1), "cudaSetDevice(1)");
  check(cudaMalloc(&b, max_bytes), "cudaMalloc on device 1");
  // Natively, the GPUs' direct path where they have one (as a program that cares enables it);
  // devices of two servers through rgpu cannot access each other (0), and copy regardless.
  int can = 0;
  if (d1) check(cudaDeviceCanAccessPeer(&can, 1, 0), "cudaDeviceCanAccessPeer");
  if (can) check(cudaDeviceEnablePeerAccess(0, 0), "cudaDeviceEnablePeerAccess");
  bool peer_ok = true;
  cudaError_t e = cudaMemcpyPeer(b, d1, a, 0, 4);
  if (e == cudaErrorNotSupported) {
    printf("UNSUPPORTED peer_copy %s\n", cudaGetErrorName(e));
    cudaGetLastError();
    peer_ok = false;
  } else {
    check(e, "cudaMemcpyPeer");
  }
  // `copy` may return before the bytes are there (CUDA's cudaMemcpyPeer is asynchronous to the
  // host, and so is rgpu's between servers): `finish` waits for them.  Bandwidth: copies one
  // after another, then `finish`, all timed; the time of one copy (up to 64 KiB): a copy and
  // `finish`, median.
  auto measure = [&](const char* op, size_t bytes, const std::function<void()>& copy,
                     const std::function<void()>& finish) {
    copy();  // warm up
    finish();
    auto t0 = Clock::now();
    copy();
    finish();
    double one = std::max(seconds(t0, Clock::now()), 1e-7);
    int reps = static_cast<int>(std::min(2000.0, std::max(3.0, 0.25 / one)));
    t0 = Clock::now();
    for (int r = 0; r < reps; ++r) copy();
    finish();
    double total = seconds(t0, Clock::now());
    printf("RESULT %s %zu %.6g GB/s\n", op, bytes, bytes * reps / total / 1e9);
    if (bytes <= (64u << 10)) {
      std::vector<double> each;
      for (int r = 0; r < std::min(reps, 500); ++r) {
        auto c0 = Clock::now();
        copy();
        finish();
        each.push_back(seconds(c0, Clock::now()) * 1e6);
      }
      std::sort(each.begin(), each.end());
      printf("RESULT %s_lat %zu %.6g us\n", op, bytes, each[each.size() / 2]);
    }
    fflush(stdout);
  };
  auto nothing = [] {};
  for (size_t bytes = 4; bytes <= max_bytes; bytes *= 4) {
    if (peer_ok) {
      // The copy runs on device 1's legacy stream (the current device): its synchronization
      // finishes it.
      check(cudaSetDevice(d1), "cudaSetDevice(1)");
      measure(
          "peer_copy", bytes, [&] { check(cudaMemcpyPeer(b, d1, a, 0, bytes), "cudaMemcpyPeer"); },
          [] { check(cudaDeviceSynchronize(), "sync"); });
    }
    measure(
        "relay", bytes,
        [&] {
          check(cudaSetDevice(0), "cudaSetDevice(0)");
          check(cudaMemcpy(host, a, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
          check(cudaSetDevice(d1), "cudaSetDevice(1)");
          check(cudaMemcpy(b, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
          check(cudaDeviceSynchronize(), "sync");  // host-to-device may return early
        },
        nothing);
    fprintf(stderr, "  cross-server copies of %zu bytes done\n", bytes);
  }
  // The relay really moved the bytes: device 1 holds device 0's pattern.
  std::vector<char> back(std::min<size_t>(max_bytes, 4096));
  check(cudaMemcpy(back.data(), b, back.size(), cudaMemcpyDeviceToHost), "check copy");
  for (char c : back)
    if (c != 3) {
      fprintf(stderr, "bench worker: the relayed bytes differ from the source\n");
      exit(1);
    }
  cudaFree(b);
  check(cudaSetDevice(0), "cudaSetDevice(0)");
  cudaFree(a);
  cudaFreeHost(host);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--peer") == 0) {
    peer(argc > 2 ? strtoull(argv[2], nullptr, 10) : (1ull << 30));
    return 0;
  }
  size_t max_bytes = argc > 1 ? strtoull(argv[1], nullptr, 10) : (1ull << 30);
  int n = 0;
  check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  cudaDeviceProp p;
  check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  printf("DEVICE %s\n", p.name);
  sync_latency();
  launch_rate();
  graph_launch_rate();
  graph_replay();
  alloc_rate();
  bandwidth(max_bytes);
  return 0;
}
