// Copies between GPUs of different servers (tests/integration/peer_copy_test.cc runs it with one
// device on each of three rgpuds): every ordered pair, cudaMemcpyPeer, cudaMemcpyPeerAsync on a
// stream of either device, cudaMemcpy/cudaMemcpyAsync with cudaMemcpyDefault and
// DeviceToDevice, 2-D copies; odd sizes and offsets; stream order (a kernel before the copy on
// its stream, a kernel after it, a kernel on the other server before it); bytes compared.  "kill"
// mode: 1 -> 0 copies of 256 MiB until one fails (the test kills a server meanwhile) and prints the
// error and whether the runtime's log named the server.
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "async_common.h"

namespace {

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  unsigned x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    v[i] = static_cast<unsigned char>(x >> 16);
  }
  return v;
}

// Copies `n` bytes from device `s` (offset so) to device `d` (offset do_) by `how`, checks them.
bool one(int how, int s, int d, size_t n, size_t so, size_t doff, unsigned seed) {
  unsigned char *a = nullptr, *b = nullptr;
  REQUIRE_OK(cudaSetDevice(s));
  REQUIRE_OK(cudaMalloc(&a, n + so));
  REQUIRE_OK(cudaSetDevice(d));
  REQUIRE_OK(cudaMalloc(&b, n + doff + 7));
  std::vector<unsigned char> src = pattern(n, seed), guard = pattern(n + doff + 7, seed + 99);
  REQUIRE_OK(cudaMemcpy(a + so, src.data(), n, cudaMemcpyHostToDevice));
  REQUIRE_OK(cudaMemcpy(b, guard.data(), n + doff + 7, cudaMemcpyHostToDevice));
  cudaError_t e = cudaSuccess;
  cudaStream_t st = nullptr;
  switch (how) {
    case 0:
      e = cudaMemcpyPeer(b + doff, d, a + so, s, n);
      break;
    case 1:  // on a stream of the source (its server pushes)
    case 2:  // on a stream of the destination (its server pulls)
      REQUIRE_OK(cudaSetDevice(how == 1 ? s : d));
      REQUIRE_OK(cudaStreamCreate(&st));
      e = cudaMemcpyPeerAsync(b + doff, d, a + so, s, n, st);
      if (e == cudaSuccess) e = cudaStreamSynchronize(st);
      break;
    case 3:
      e = cudaMemcpy(b + doff, a + so, n, cudaMemcpyDefault);
      break;
    case 4:
      REQUIRE_OK(cudaSetDevice(s));
      REQUIRE_OK(cudaStreamCreate(&st));
      e = cudaMemcpyAsync(b + doff, a + so, n, cudaMemcpyDeviceToDevice, st);
      if (e == cudaSuccess) e = cudaStreamSynchronize(st);
      break;
  }
  if (st) cudaStreamDestroy(st);
  std::vector<unsigned char> back(n + doff + 7);
  REQUIRE_OK(cudaSetDevice(d));
  REQUIRE_OK(cudaMemcpy(back.data(), b, back.size(), cudaMemcpyDeviceToHost));
  bool ok = e == cudaSuccess && memcmp(back.data() + doff, src.data(), n) == 0 &&
            memcmp(back.data(), guard.data(), doff) == 0 &&
            memcmp(back.data() + doff + n, guard.data() + doff + n, 7) == 0;
  if (!ok) printf("  (copy %d, %d -> %d, %zu bytes: %s)\n", how, s, d, n, cudaGetErrorName(e));
  if (!ok && n < 8) {  // what landed, for diagnosis
    printf("   got:");
    for (size_t i = 0; i < n + doff + 7; ++i) printf(" %02x", back[i]);
    printf("\n   src:");
    for (size_t i = 0; i < n; ++i) printf(" %02x", src[i]);
    printf("\n guard:");
    for (size_t i = 0; i < n + doff + 7; ++i) printf(" %02x", guard[i]);
    printf("\n");
  }
  cudaFree(b);
  REQUIRE_OK(cudaSetDevice(s));
  cudaFree(a);
  return ok;
}

std::mutex g_log_mu;
std::string g_log;  // what the runtime logged (cudaLogsRegisterCallback)

void CUDART_CB on_log(void*, cudaLogLevel, char* message, size_t length) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log.append(message, strnlen(message, length));
  g_log += '\n';
}

int kill_mode() {
  cudaLogsCallbackHandle handle;
  REQUIRE_OK(cudaLogsRegisterCallback(on_log, nullptr, &handle));
  const size_t n = 256u << 20;
  void *a, *b;
  REQUIRE_OK(cudaSetDevice(0));
  REQUIRE_OK(cudaMalloc(&a, n));
  REQUIRE_OK(cudaSetDevice(1));
  REQUIRE_OK(cudaMalloc(&b, n));
  for (int i = 0; i < 400; ++i) {
    if (i == 1) {
      printf("copying\n");
      fflush(stdout);
    }
    cudaError_t e = cudaMemcpyPeer(b, 1, a, 0, n);      // server 1 pulls from server 0
    if (e == cudaSuccess) e = cudaDeviceSynchronize();  // it may return before the copy ends
    if (e != cudaSuccess) {
      printf("copy failed: %s\n", cudaGetErrorName(e));
      usleep(300 * 1000);  // log callbacks run on a thread of their own
      // The error names the server that went away: device 0's RGPU_SERVERS entry.
      const char* servers = getenv("RGPU_SERVERS");
      std::string first =
          servers ? std::string(servers).substr(0, std::string(servers).find(',')) : "?";
      std::lock_guard<std::mutex> lock(g_log_mu);
      printf("names the server: %s\n", g_log.find(first) != std::string::npos ? "yes" : "no");
      printf("%s", g_log.c_str());
      return 0;
    }
  }
  printf("no copy failed\n");
  return 1;
}

// Copies 0 -> 1 of the same buffers (pulled by 1), `rounds` times, each after a kernel on 0 that
// changes the source (every tenth one slow when `slow`); after each, device 1 is synchronized
// (`sync_destination`: the device, or its legacy stream, in turn) and the bytes checked.
int repeated_copies(const char* label, int N, int rounds, bool slow, bool sync_destination) {
  int *a, *b;
  REQUIRE_OK(cudaSetDevice(0));
  REQUIRE_OK(cudaMalloc(&a, N * sizeof(int)));
  REQUIRE_OK(cudaSetDevice(1));
  REQUIRE_OK(cudaMalloc(&b, N * sizeof(int)));
  std::vector<int> back(N);
  int wrong = 0;
  for (int i = 0; i < rounds; ++i) {
    REQUIRE_OK(cudaSetDevice(0));
    slow_fill<<<1, 256>>>(a, i, N, slow && i % 10 == 0 ? 50ull * 1000 * 1000 : 0);
    REQUIRE_OK(cudaMemcpyPeer(b, 1, a, 0, N * sizeof(int)));
    REQUIRE_OK(cudaSetDevice(1));
    if (sync_destination) REQUIRE_OK(i % 2 ? cudaStreamSynchronize(0) : cudaDeviceSynchronize());
    REQUIRE_OK(cudaMemcpy(back.data(), b, N * sizeof(int), cudaMemcpyDeviceToHost));
    if (!all_equal(back.data(), N, i)) ++wrong;
  }
  printf("%s copies wrong: %d\n", label, wrong);
  return wrong ? 1 : 0;
}

// "direct": between rgpuds on one machine these go the direct path (server/peer_fences.h),
// which the test reads in rgpud's log.
int direct_mode() { return repeated_copies("direct", 1 << 16, 50, true, false); }

// "settled": the synchronization of device 1 has shown each copy over, so device 0's next call
// need not wait for it again (RGPU_STATS counts the round trips).
int settled_mode() { return repeated_copies("settled", 4096, 20, false, true); }

// "killwait": a copy pulled by 1 from 0 waits behind a kernel of a minute on 0; the test kills
// server 0 meanwhile: the copy's stream must fail within seconds, not wait for ever.
int kill_wait_mode() {
  const int N = 4096;
  int *a, *b;
  REQUIRE_OK(cudaSetDevice(0));
  REQUIRE_OK(cudaMalloc(&a, N * sizeof(int)));
  REQUIRE_OK(cudaMemset(a, 0, N * sizeof(int)));
  REQUIRE_OK(cudaSetDevice(1));
  REQUIRE_OK(cudaMalloc(&b, N * sizeof(int)));
  cudaStream_t s1;
  REQUIRE_OK(cudaStreamCreate(&s1));
  for (int i = 0; i < 3; ++i) REQUIRE_OK(cudaMemcpyPeerAsync(b, 1, a, 0, N * sizeof(int), s1));
  REQUIRE_OK(cudaStreamSynchronize(s1));
  REQUIRE_OK(cudaSetDevice(0));
  slow_fill<<<1, 256>>>(a, 5, N, 60ull * 1000 * 1000 * 1000);
  REQUIRE_OK(cudaSetDevice(1));
  cudaError_t e = cudaMemcpyPeerAsync(b, 1, a, 0, N * sizeof(int), s1);
  printf("waiting\n");
  fflush(stdout);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s1);
  printf("copy %s: %s\n", e == cudaSuccess ? "succeeded" : "failed", cudaGetErrorName(e));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "kill") == 0) return kill_mode();
  if (argc > 1 && strcmp(argv[1], "direct") == 0) return direct_mode();
  if (argc > 1 && strcmp(argv[1], "killwait") == 0) return kill_wait_mode();
  if (argc > 1 && strcmp(argv[1], "settled") == 0) return settled_mode();
  int count = 0;
  REQUIRE_OK(cudaGetDeviceCount(&count));
  EXPECT_TRUE(count >= 2, "at least two devices");
  if (count < 2) return finish("peer_copies");
  int can = -1;
  EXPECT_OK(cudaDeviceCanAccessPeer(&can, 0, 1));
  EXPECT_TRUE(can == 0, "no peer access between GPUs of two servers");

  const size_t sizes[] = {1, 4, (1u << 20) + 13};
  unsigned seed = 1;
  for (int s = 0; s < count; ++s)
    for (int d = 0; d < count; ++d) {
      if (s == d) continue;
      bool ok = true;
      for (int how = 0; how < 5; ++how)
        for (size_t n : sizes) ok = one(how, s, d, n, 3, 5, seed++) && ok;
      char what[96];
      snprintf(what, sizeof what, "every copy form and size, %d -> %d", s, d);
      EXPECT_TRUE(ok, what);
    }
  // 64 MiB, pipelined: pushed, pulled and synchronous.
  EXPECT_TRUE(one(1, 0, 1, 64u << 20, 1, 3, 77), "64 MiB pushed 0 -> 1");
  EXPECT_TRUE(one(2, count - 1, 0, 64u << 20, 0, 0, 78), "64 MiB pulled by 0");
  EXPECT_TRUE(one(0, 1, count - 1, (64u << 20) + 5, 2, 0, 79), "64 MiB + 5 cudaMemcpyPeer");

  // cudaMemcpyPeer, and cudaMemcpy/cudaMemcpy2D between GPUs, may return before the copy ends
  // (as CUDA's): the source device's next work must still come after the copy has read it.  The
  // copy waits 0.2 s behind a kernel on the destination's legacy stream, and the source is
  // overwritten at once (a memset, a kernel, a copy from a third server into it, pulled by device
  // 0 or pushed by device 2); the destination must hold the old bytes.
  {
    const size_t n = 16u << 20;
    unsigned char *a, *b, *c = nullptr;
    int* slow;
    std::vector<unsigned char> src = pattern(n, 11), back(n);
    REQUIRE_OK(cudaSetDevice(0));
    REQUIRE_OK(cudaMalloc(&a, n));
    REQUIRE_OK(cudaSetDevice(1));
    REQUIRE_OK(cudaMalloc(&b, n));
    REQUIRE_OK(cudaMalloc(&slow, sizeof(int)));
    cudaStream_t s2 = nullptr;
    if (count > 2) {
      REQUIRE_OK(cudaSetDevice(2));
      REQUIRE_OK(cudaMalloc(&c, n));
      REQUIRE_OK(cudaMemset(c, 0x3c, n));
      REQUIRE_OK(cudaStreamCreate(&s2));
    }
    const char* forms[] = {"cudaMemcpyPeer, then a memset of the source",
                           "cudaMemcpy (default kind), then a kernel on the source",
                           "cudaMemcpy2D, then a memset of the source",
                           "cudaMemcpyPeer, then a copy from a third server into the source",
                           "cudaMemcpyPeer, then a copy pushed into the source by a third server"};
    for (int how = 0; how < (count > 2 ? 5 : 3); ++how) {
      REQUIRE_OK(cudaSetDevice(1));
      REQUIRE_OK(cudaMemset(b, 0, n));
      REQUIRE_OK(cudaSetDevice(0));
      REQUIRE_OK(cudaMemcpy(a, src.data(), n, cudaMemcpyHostToDevice));
      REQUIRE_OK(cudaSetDevice(1));
      slow_fill<<<1, 32>>>(slow, 0, 1, 200ull * 1000 * 1000);  // the copy starts 0.2 s later
      REQUIRE_OK(cudaSetDevice(0));
      cudaError_t e = cudaSuccess;
      if (how == 1)
        e = cudaMemcpy(b, a, n, cudaMemcpyDefault);
      else if (how == 2)
        e = cudaMemcpy2D(b, 1u << 20, a, 1u << 20, 1u << 20, n >> 20, cudaMemcpyDeviceToDevice);
      else
        e = cudaMemcpyPeer(b, 1, a, 0, n);
      if (how == 1)
        slow_fill<<<1, 256>>>(reinterpret_cast<int*>(a), 0x5a5a5a5a, static_cast<int>(n / 4), 0);
      else if (how == 3)
        e = e == cudaSuccess ? cudaMemcpyPeer(a, 0, c, 2, n) : e;
      else if (how == 4)
        e = e == cudaSuccess ? cudaMemcpyPeerAsync(a, 0, c, 2, n, s2) : e;
      else
        e = e == cudaSuccess ? cudaMemset(a, 0xee, n) : e;
      REQUIRE_OK(cudaSetDevice(1));
      if (e == cudaSuccess) e = cudaMemcpy(back.data(), b, n, cudaMemcpyDeviceToHost);
      if (how == 4 && e == cudaSuccess) e = cudaStreamSynchronize(s2);
      EXPECT_TRUE(e == cudaSuccess && memcmp(back.data(), src.data(), n) == 0, forms[how]);
      if (e != cudaSuccess) printf("  (%s: %s)\n", forms[how], cudaGetErrorName(e));
    }
    if (count > 2) {
      // A capture on a third server is no reason for the source's next work not to wait.
      REQUIRE_OK(cudaSetDevice(1));
      REQUIRE_OK(cudaMemset(b, 0, n));
      REQUIRE_OK(cudaSetDevice(0));
      REQUIRE_OK(cudaMemcpy(a, src.data(), n, cudaMemcpyHostToDevice));
      REQUIRE_OK(cudaSetDevice(2));
      REQUIRE_OK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeRelaxed));
      REQUIRE_OK(cudaSetDevice(1));
      slow_fill<<<1, 32>>>(slow, 0, 1, 200ull * 1000 * 1000);
      REQUIRE_OK(cudaSetDevice(0));
      cudaError_t e = cudaMemcpyPeer(b, 1, a, 0, n);
      if (e == cudaSuccess) e = cudaMemset(a, 0xee, n);
      REQUIRE_OK(cudaSetDevice(2));
      cudaGraph_t g = nullptr;
      EXPECT_OK(cudaStreamEndCapture(s2, &g));
      if (g) cudaGraphDestroy(g);
      REQUIRE_OK(cudaSetDevice(1));
      if (e == cudaSuccess) e = cudaMemcpy(back.data(), b, n, cudaMemcpyDeviceToHost);
      EXPECT_TRUE(e == cudaSuccess && memcmp(back.data(), src.data(), n) == 0,
                  "cudaMemcpyPeer, then a memset of the source, while a third server captures");
      if (e != cudaSuccess) printf("  (capture elsewhere: %s)\n", cudaGetErrorName(e));
    }
    {  // two threads write the source at once: each waits, also while the other's wait runs
      REQUIRE_OK(cudaSetDevice(1));
      REQUIRE_OK(cudaMemset(b, 0, n));
      REQUIRE_OK(cudaSetDevice(0));
      REQUIRE_OK(cudaMemcpy(a, src.data(), n, cudaMemcpyHostToDevice));
      REQUIRE_OK(cudaSetDevice(1));
      slow_fill<<<1, 32>>>(slow, 0, 1, 200ull * 1000 * 1000);
      cudaError_t e = cudaMemcpyPeer(b, 1, a, 0, n), te[2] = {cudaSuccess, cudaSuccess};
      std::thread t[2];
      for (int i = 0; i < 2; ++i)
        t[i] = std::thread([&, i] {
          te[i] = cudaSetDevice(0);
          if (te[i] == cudaSuccess) te[i] = cudaMemset(a + i * (n / 2), 0xee, n / 2);
        });
      for (std::thread& x : t) x.join();
      if (e == cudaSuccess) e = te[0] != cudaSuccess ? te[0] : te[1];
      REQUIRE_OK(cudaSetDevice(1));
      if (e == cudaSuccess) e = cudaMemcpy(back.data(), b, n, cudaMemcpyDeviceToHost);
      EXPECT_TRUE(e == cudaSuccess && memcmp(back.data(), src.data(), n) == 0,
                  "cudaMemcpyPeer, then two threads writing the source");
    }
    cudaFree(slow);
    cudaFree(b);
    REQUIRE_OK(cudaSetDevice(0));
    cudaFree(a);
    if (c) {
      REQUIRE_OK(cudaSetDevice(2));
      cudaStreamDestroy(s2);
      cudaFree(c);
    }
  }

  // Many copies in flight at once (more than the passive server keeps orders for, 1024), without
  // a stream and on one, each to its own piece of the destination; then one synchronization.
  {
    const size_t piece = 256, pieces = 2500;
    unsigned char *a, *b;
    std::vector<unsigned char> src = pattern(piece * pieces, 12), back(piece * pieces);
    REQUIRE_OK(cudaSetDevice(0));
    REQUIRE_OK(cudaMalloc(&a, src.size()));
    REQUIRE_OK(cudaMemcpy(a, src.data(), src.size(), cudaMemcpyHostToDevice));
    REQUIRE_OK(cudaSetDevice(1));
    REQUIRE_OK(cudaMalloc(&b, src.size()));
    cudaStream_t st;
    REQUIRE_OK(cudaStreamCreate(&st));
    cudaError_t e = cudaSuccess;
    for (size_t i = 0; i < pieces && e == cudaSuccess; ++i)
      e = i % 2 ? cudaMemcpyPeer(b + i * piece, 1, a + i * piece, 0, piece)
                : cudaMemcpyPeerAsync(b + i * piece, 1, a + i * piece, 0, piece, st);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaMemcpy(back.data(), b, back.size(), cudaMemcpyDeviceToHost);
    EXPECT_TRUE(e == cudaSuccess && back == src, "2500 copies between servers in flight at once");
    if (e != cudaSuccess) printf("  (%s)\n", cudaGetErrorName(e));
    cudaStreamDestroy(st);
    cudaFree(b);
    REQUIRE_OK(cudaSetDevice(0));
    cudaFree(a);
  }

  // 2-D between devices 0 and 1: rows of 1000 bytes, pitches 1024 and 1536, and back on a stream.
  {
    const size_t w = 1000, h = 77, sp = 1024, dp = 1536;
    unsigned char *a, *b;
    REQUIRE_OK(cudaSetDevice(0));
    REQUIRE_OK(cudaMalloc(&a, sp * h));
    REQUIRE_OK(cudaSetDevice(1));
    REQUIRE_OK(cudaMalloc(&b, dp * h));
    std::vector<unsigned char> src = pattern(sp * h, 5), zero(dp * h, 0), back(dp * h);
    REQUIRE_OK(cudaMemcpy(a, src.data(), sp * h, cudaMemcpyHostToDevice));
    REQUIRE_OK(cudaMemcpy(b, zero.data(), dp * h, cudaMemcpyHostToDevice));
    EXPECT_OK(cudaMemcpy2D(b, dp, a, sp, w, h, cudaMemcpyDefault));
    REQUIRE_OK(cudaMemcpy(back.data(), b, dp * h, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (size_t r = 0; r < h; ++r) {
      ok = ok && memcmp(back.data() + r * dp, src.data() + r * sp, w) == 0;
      for (size_t c = w; c < dp; ++c) ok = ok && back[r * dp + c] == 0;
    }
    EXPECT_TRUE(ok, "cudaMemcpy2D between GPUs of two servers");
    // Back into a's rows at column 10, on a stream of device 1 (pushed by its server).
    cudaStream_t st;
    REQUIRE_OK(cudaStreamCreate(&st));
    EXPECT_OK(cudaMemcpy2DAsync(a + 10, sp, b, dp, 7, h, cudaMemcpyDeviceToDevice, st));
    EXPECT_OK(cudaStreamSynchronize(st));
    EXPECT_OK(cudaStreamDestroy(st));
    std::vector<unsigned char> back_a(sp * h);
    REQUIRE_OK(cudaSetDevice(0));
    REQUIRE_OK(cudaMemcpy(back_a.data(), a, sp * h, cudaMemcpyDeviceToHost));
    ok = true;
    for (size_t r = 0; r < h; ++r)
      for (size_t c = 0; c < sp; ++c) {
        unsigned char want = (c >= 10 && c < 17) ? src[r * sp + c - 10] : src[r * sp + c];
        ok = ok && back_a[r * sp + c] == want;
      }
    EXPECT_TRUE(ok, "cudaMemcpy2DAsync between GPUs of two servers");
    cudaFree(a);
    REQUIRE_OK(cudaSetDevice(1));
    cudaFree(b);
  }

  // Stream order: a kernel before the copy on the source's stream, a kernel after it on the
  // destination's, all asynchronous.
  {
    const int N = 1 << 20;
    int *a, *b;
    std::vector<int> src(N), back(N);
    for (int i = 0; i < N; ++i) src[i] = i * 3;
    REQUIRE_OK(cudaSetDevice(0));
    REQUIRE_OK(cudaMalloc(&a, N * sizeof(int)));
    REQUIRE_OK(cudaMemcpy(a, src.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    REQUIRE_OK(cudaSetDevice(1));
    REQUIRE_OK(cudaMalloc(&b, N * sizeof(int)));
    cudaStream_t s0, s1;
    REQUIRE_OK(cudaSetDevice(0));
    REQUIRE_OK(cudaStreamCreate(&s0));
    REQUIRE_OK(cudaSetDevice(1));
    REQUIRE_OK(cudaStreamCreate(&s1));
    REQUIRE_OK(cudaSetDevice(0));
    add_one<<<64, 256, 0, s0>>>(a, N);  // +1 before the pushed copy
    EXPECT_OK(cudaMemcpyPeerAsync(b, 1, a, 0, N * sizeof(int), s0));
    EXPECT_OK(cudaStreamSynchronize(s0));
    REQUIRE_OK(cudaSetDevice(1));
    EXPECT_OK(cudaMemcpyPeerAsync(a, 0, b, 1, N * sizeof(int), s1));  // pushed back by 1
    add_one<<<64, 256, 0, s1>>>(b, N);  // after the copy: a must not see it
    EXPECT_OK(cudaMemcpyPeerAsync(b, 1, a, 0, N * sizeof(int), s1));  // pulled by 1: b = a
    add_one<<<64, 256, 0, s1>>>(b, N);
    EXPECT_OK(cudaStreamSynchronize(s1));
    REQUIRE_OK(cudaMemcpy(back.data(), b, N * sizeof(int), cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int i = 0; i < N; ++i) ok = ok && back[i] == src[i] + 2;
    EXPECT_TRUE(ok, "asynchronous copies between servers keep their streams' order");
    cudaStreamDestroy(s1);
    cudaFree(b);
    REQUIRE_OK(cudaSetDevice(0));
    cudaStreamDestroy(s0);
    cudaFree(a);
  }

  // The other server's earlier work: a slow kernel on the legacy stream of the passive GPU (the
  // one whose stream does not run the copy), then the copy at once.  cudaMemcpyPeer pulled by 1
  // must read what the kernel wrote on 0; a copy pushed by 0 into 1 must land after 1's kernel.
  {
    const int N = 4096;
    int *a, *b;
    std::vector<int> back(N);
    REQUIRE_OK(cudaSetDevice(0));
    REQUIRE_OK(cudaMalloc(&a, N * sizeof(int)));
    REQUIRE_OK(cudaMemset(a, 0, N * sizeof(int)));
    REQUIRE_OK(cudaSetDevice(1));
    REQUIRE_OK(cudaMalloc(&b, N * sizeof(int)));
    REQUIRE_OK(cudaMemset(b, 0, N * sizeof(int)));
    REQUIRE_OK(cudaDeviceSynchronize());
    REQUIRE_OK(cudaSetDevice(0));
    slow_fill<<<1, 256>>>(a, 7, N, 300ull * 1000 * 1000);  // 0.3 s, then a = 7
    REQUIRE_OK(cudaGetLastError());
    EXPECT_OK(cudaMemcpyPeer(b, 1, a, 0, N * sizeof(int)));
    REQUIRE_OK(cudaSetDevice(1));
    REQUIRE_OK(cudaMemcpy(back.data(), b, N * sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT_TRUE(all_equal(back.data(), N, 7), "a copy waits for the source server's earlier work");
    slow_fill<<<1, 256>>>(b, 9, N, 300ull * 1000 * 1000);  // 0.3 s, then b = 9
    REQUIRE_OK(cudaGetLastError());
    REQUIRE_OK(cudaSetDevice(0));
    cudaStream_t s0;
    REQUIRE_OK(cudaStreamCreate(&s0));
    EXPECT_OK(cudaMemcpyPeerAsync(b, 1, a, 0, N * sizeof(int), s0));  // pushed by 0: b = 7
    EXPECT_OK(cudaStreamSynchronize(s0));
    REQUIRE_OK(cudaSetDevice(1));
    REQUIRE_OK(cudaMemcpy(back.data(), b, N * sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT_TRUE(all_equal(back.data(), N, 7),
                "a copy lands after the destination server's earlier work");
    cudaFree(b);
    REQUIRE_OK(cudaSetDevice(0));
    cudaStreamDestroy(s0);
    cudaFree(a);
  }
  // The same buffers again (between rgpuds on one machine, the direct path): a slow kernel on
  // the passive server's legacy stream before each copy, pulled and pushed; then the source freed
  // and allocated again each time (what a mapping of the old memory would not see).
  {
    const int N = 4096;
    int *a, *b;
    std::vector<int> back(N);
    REQUIRE_OK(cudaSetDevice(0));
    REQUIRE_OK(cudaMalloc(&a, N * sizeof(int)));
    REQUIRE_OK(cudaSetDevice(1));
    REQUIRE_OK(cudaMalloc(&b, N * sizeof(int)));
    cudaStream_t s1;
    REQUIRE_OK(cudaStreamCreate(&s1));
    bool pulled = true, pushed = true, fresh = true;
    for (int i = 1; i <= 4; ++i) {
      REQUIRE_OK(cudaSetDevice(0));
      slow_fill<<<1, 256>>>(a, 100 + i, N, 100ull * 1000 * 1000);
      REQUIRE_OK(cudaSetDevice(1));
      EXPECT_OK(cudaMemcpyPeerAsync(b, 1, a, 0, N * sizeof(int), s1));  // pulled by 1
      add_one<<<64, 256, 0, s1>>>(b, N);
      EXPECT_OK(cudaStreamSynchronize(s1));
      REQUIRE_OK(cudaMemcpy(back.data(), b, N * sizeof(int), cudaMemcpyDeviceToHost));
      pulled = pulled && all_equal(back.data(), N, 100 + i + 1);
      REQUIRE_OK(cudaSetDevice(0));
      slow_fill<<<1, 256>>>(a, 7, N, 100ull * 1000 * 1000);
      REQUIRE_OK(cudaSetDevice(1));
      EXPECT_OK(cudaMemcpyPeerAsync(a, 0, b, 1, N * sizeof(int), s1));  // pushed by 1
      EXPECT_OK(cudaStreamSynchronize(s1));
      REQUIRE_OK(cudaSetDevice(0));
      REQUIRE_OK(cudaMemcpy(back.data(), a, N * sizeof(int), cudaMemcpyDeviceToHost));
      pushed = pushed && all_equal(back.data(), N, 100 + i + 1);
    }
    for (int i = 0; i < 4; ++i) {
      REQUIRE_OK(cudaSetDevice(0));
      REQUIRE_OK(cudaFree(a));
      REQUIRE_OK(cudaMalloc(&a, N * sizeof(int)));
      slow_fill<<<1, 256>>>(a, 200 + i, N, 0);
      REQUIRE_OK(cudaSetDevice(1));
      EXPECT_OK(cudaMemcpyPeerAsync(b, 1, a, 0, N * sizeof(int), s1));
      EXPECT_OK(cudaStreamSynchronize(s1));
      REQUIRE_OK(cudaMemcpy(back.data(), b, N * sizeof(int), cudaMemcpyDeviceToHost));
      fresh = fresh && all_equal(back.data(), N, 200 + i);
    }
    EXPECT_TRUE(pulled, "repeated copies pulled from a server wait for its earlier work");
    EXPECT_TRUE(pushed, "repeated copies pushed to a server land after its earlier work");
    EXPECT_TRUE(fresh, "copies from memory freed and allocated again read the new memory");
    cudaStreamDestroy(s1);
    cudaFree(b);
    REQUIRE_OK(cudaSetDevice(0));
    cudaFree(a);
  }
  // Memory freed on the passive server while copies from it run (pulled by 0 from 1): each copy
  // either completes or fails cleanly (the free came before the copy began there: its rows are
  // no allocation any more), and server 1 goes on serving (it once crashed on the host backend).
  {
    const size_t n = 128u << 20;  // long enough that a free 20 ms in lands in its middle
    void* a;
    REQUIRE_OK(cudaSetDevice(0));
    REQUIRE_OK(cudaMalloc(&a, n));
    cudaStream_t s0;
    REQUIRE_OK(cudaStreamCreate(&s0));
    bool clean = true;
    for (int i = 0; i < 6; ++i) {
      void* b;
      REQUIRE_OK(cudaSetDevice(1));
      REQUIRE_OK(cudaMalloc(&b, n));
      REQUIRE_OK(cudaMemset(b, i, n));
      REQUIRE_OK(cudaDeviceSynchronize());
      REQUIRE_OK(cudaSetDevice(0));
      cudaError_t e = cudaMemcpyPeerAsync(a, 0, b, 1, n, s0);
      if (i % 2) usleep(20000);  // the copy has begun on server 1 (else: not yet)
      REQUIRE_OK(cudaSetDevice(1));
      cudaError_t f = cudaFree(b);
      cudaDeviceSynchronize();  // the free is done
      // The memory handed out again at once and overwritten: a copy still reading it would
      // deliver this instead of its source.
      void* c = nullptr;
      if (cudaMalloc(&c, n) == cudaSuccess) cudaMemset(c, 0xee, n);
      REQUIRE_OK(cudaSetDevice(0));
      cudaError_t w = cudaStreamSynchronize(s0);
      cudaGetLastError();
      for (cudaError_t r : {e, f, w})
        if (r != cudaSuccess && r != cudaErrorInvalidValue) {
          printf("free during a copy %d: %s\n", i, cudaGetErrorName(r));
          clean = false;
        }
      if (e == cudaSuccess && w == cudaSuccess) {
        std::vector<unsigned char> got(n);
        REQUIRE_OK(cudaMemcpy(got.data(), a, n, cudaMemcpyDeviceToHost));
        size_t wrong = 0;
        for (unsigned char v : got) wrong += v != static_cast<unsigned char>(i);
        if (wrong) {
          printf("free during a copy %d: %zu bytes are not the source's\n", i, wrong);
          clean = false;
        }
      }
      REQUIRE_OK(cudaSetDevice(1));
      cudaFree(c);
      REQUIRE_OK(cudaDeviceSynchronize());
    }
    EXPECT_TRUE(clean, "copies whose source is freed meanwhile complete or fail cleanly");
    std::vector<unsigned char> back(4096);
    void* c;
    REQUIRE_OK(cudaSetDevice(1));
    EXPECT_OK(cudaMalloc(&c, back.size()));
    EXPECT_OK(cudaMemset(c, 0x5a, back.size()));
    EXPECT_OK(cudaMemcpy(back.data(), c, back.size(), cudaMemcpyDeviceToHost));
    bool same = true;
    for (unsigned char v : back) same = same && v == 0x5a;
    EXPECT_TRUE(same, "the passive server goes on after frees during copies");
    cudaFree(c);
    REQUIRE_OK(cudaSetDevice(0));
    cudaStreamDestroy(s0);
    cudaFree(a);
  }
  return finish("peer_copies");
}
