// Device and context settings, pitched and 3-D memory, device printf and assert (issue 11 items
// 6, 7, 10).  Copies and memsets are checked byte by byte against a host model.  The last part
// makes a device assert fail: its message must reach stderr before cudaDeviceSynchronize returns
// (the program writes a marker line to stderr after it), and the context is unusable afterwards.
#include <cuda_profiler_api.h>
#include <unistd.h>

#include <cassert>
#include <cstring>
#include <vector>

#include "check.h"

extern "C" __global__ void pitch_fill(unsigned char* p, size_t pitch, int width, int height) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < width && y < height) p[y * pitch + x] = static_cast<unsigned char>(x * 3 + y);
}

extern "C" __global__ void devmem_say(int v) { printf("devmem: device says %d\n", v); }

extern "C" __global__ void devmem_assert(int v) { assert(v == 0); }

static unsigned char pattern(size_t i) { return static_cast<unsigned char>(i * 7 + 3); }

// A box copy in host memory: the model of cudaMemcpy3D between linear operands.
static void model_copy(unsigned char* dst, size_t dpitch, size_t drows, cudaPos dpos,
                       const unsigned char* src, size_t spitch, size_t srows, cudaPos spos,
                       cudaExtent e) {
  for (size_t z = 0; z < e.depth; ++z)
    for (size_t y = 0; y < e.height; ++y)
      memcpy(dst + (dpos.z + z) * dpitch * drows + (dpos.y + y) * dpitch + dpos.x,
             src + (spos.z + z) * spitch * srows + (spos.y + y) * spitch + spos.x, e.width);
}

static void settings() {
  EXPECT_OK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync | cudaDeviceMapHost));
  unsigned flags = 0;
  EXPECT_OK(cudaGetDeviceFlags(&flags));
  EXPECT_TRUE((flags & cudaDeviceScheduleMask) == cudaDeviceScheduleBlockingSync,
              "device flags: blocking sync");
  EXPECT_ERR(cudaSetDeviceFlags(0x10000), cudaErrorInvalidValue);

  size_t v = 0;
  EXPECT_OK(cudaDeviceSetLimit(cudaLimitStackSize, 4096));
  EXPECT_OK(cudaDeviceGetLimit(&v, cudaLimitStackSize));
  EXPECT_TRUE(v == 4096, "stack size limit is 4096");
  EXPECT_OK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 64u << 20));
  EXPECT_OK(cudaDeviceGetLimit(&v, cudaLimitMallocHeapSize));
  EXPECT_TRUE(v == (64u << 20), "malloc heap limit is 64 MiB");
  EXPECT_OK(cudaDeviceSetLimit(cudaLimitPrintfFifoSize, 4u << 20));
  EXPECT_OK(cudaDeviceGetLimit(&v, cudaLimitPrintfFifoSize));
  EXPECT_TRUE(v == (4u << 20), "printf FIFO limit is 4 MiB");
  EXPECT_ERR(cudaDeviceGetLimit(&v, static_cast<cudaLimit>(99)), cudaErrorInvalidValue);

  cudaFuncCache cache;
  EXPECT_OK(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared));
  EXPECT_OK(cudaDeviceGetCacheConfig(&cache));
  cudaSharedMemConfig shm;
  EXPECT_OK(cudaDeviceSetSharedMemConfig(cudaSharedMemBankSizeFourByte));
  EXPECT_OK(cudaDeviceGetSharedMemConfig(&shm));
  EXPECT_OK(cudaProfilerStart());
  EXPECT_OK(cudaProfilerStop());
  EXPECT_OK(cudaCtxResetPersistingL2Cache());

  char bus[32] = {}, shorter[32] = {};
  int dev = -1;
  EXPECT_OK(cudaDeviceGetPCIBusId(bus, sizeof bus, 0));
  EXPECT_OK(cudaDeviceGetByPCIBusId(&dev, bus));
  EXPECT_TRUE(dev == 0, "PCI bus id names device 0");
  strncpy(shorter, bus + 5, sizeof shorter - 1);  // "bus:device.function"
  dev = -1;
  EXPECT_OK(cudaDeviceGetByPCIBusId(&dev, shorter));
  EXPECT_TRUE(dev == 0, "short PCI bus id names device 0");
  EXPECT_ERR(cudaDeviceGetByPCIBusId(&dev, "not a bus id"), cudaErrorInvalidValue);

  int count = 0;
  REQUIRE_OK(cudaGetDeviceCount(&count));
  if (count > 1) {
    int a = -1;
    EXPECT_OK(cudaDeviceGetP2PAttribute(&a, cudaDevP2PAttrAccessSupported, 0, 1));
    EXPECT_TRUE(a == 0 || a == 1, "P2P access attribute is 0 or 1");
  }
  EXPECT_ERR(cudaDeviceGetP2PAttribute(&dev, cudaDevP2PAttrAccessSupported, 0, 0),
             cudaErrorInvalidDevice);
  cudaDeviceProp want{};
  want.major = 1;
  dev = -1;
  EXPECT_OK(cudaChooseDevice(&dev, &want));
  EXPECT_TRUE(dev >= 0 && dev < count, "cudaChooseDevice picks a device");
  int valid[] = {0};
  EXPECT_OK(cudaSetValidDevices(valid, 1));
  cudaGetLastError();  // the refusals above set it
}

static void pitched() {
  const size_t w = 100, h = 7;
  unsigned char* d = nullptr;
  size_t pitch = 0;
  REQUIRE_OK(cudaMallocPitch(reinterpret_cast<void**>(&d), &pitch, w, h));
  int align = 0;
  REQUIRE_OK(cudaDeviceGetAttribute(&align, cudaDevAttrTexturePitchAlignment, 0));
  EXPECT_TRUE(pitch >= w && pitch % align == 0, "pitch covers a row and is aligned");

  // The kernel sees the pitch layout; then a 2-D memset of a sub-rectangle.
  pitch_fill<<<dim3(1, h), 128>>>(d, pitch, w, h);
  EXPECT_OK(cudaGetLastError());
  EXPECT_OK(cudaMemset2D(d + 2 * pitch + 10, pitch, 0xab, 20, 4));
  std::vector<unsigned char> got(w * h), model(w * h);
  for (size_t y = 0; y < h; ++y)
    for (size_t x = 0; x < w; ++x)
      model[y * w + x] = (y >= 2 && y < 6 && x >= 10 && x < 30) ? 0xab : (x * 3 + y) & 0xff;
  EXPECT_OK(cudaMemcpy2D(got.data(), w, d, pitch, w, h, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(got == model, "pitched kernel fill + cudaMemset2D byte-exact");
  EXPECT_OK(cudaFree(d));
}

static void three_d() {
  const cudaExtent e = make_cudaExtent(37, 5, 4);
  cudaPitchedPtr a{}, b{};
  REQUIRE_OK(cudaMalloc3D(&a, e));
  REQUIRE_OK(cudaMalloc3D(&b, e));
  EXPECT_TRUE(a.pitch >= e.width && a.xsize == e.width && a.ysize == e.height,
              "cudaMalloc3D pitched pointer");
  const size_t n = e.width * e.height * e.depth;
  std::vector<unsigned char> src(n), got(n);
  for (size_t i = 0; i < n; ++i) src[i] = pattern(i);

  // Whole box, host -> device -> host.
  cudaMemcpy3DParms p{};
  p.srcPtr = make_cudaPitchedPtr(src.data(), e.width, e.width, e.height);
  p.dstPtr = a;
  p.extent = e;
  p.kind = cudaMemcpyHostToDevice;
  EXPECT_OK(cudaMemcpy3D(&p));
  p = cudaMemcpy3DParms{};
  p.srcPtr = a;
  p.dstPtr = make_cudaPitchedPtr(got.data(), e.width, e.width, e.height);
  p.extent = e;
  p.kind = cudaMemcpyDeviceToHost;
  EXPECT_OK(cudaMemcpy3D(&p));
  EXPECT_TRUE(got == src, "3-D copy host -> device -> host byte-exact");

  // A sub-box into a host buffer of another shape (slices that do not follow each other).
  const size_t hp = 50, hr = 6, hd = 3;
  std::vector<unsigned char> box(hp * hr * hd, 0x11), model(box);
  std::vector<unsigned char> dev_model(a.pitch * e.height * e.depth, 0);
  for (size_t z = 0; z < e.depth; ++z)
    for (size_t y = 0; y < e.height; ++y)
      memcpy(&dev_model[(z * e.height + y) * a.pitch], &src[(z * e.height + y) * e.width], e.width);
  const cudaExtent sub = make_cudaExtent(20, 3, 2);
  p = cudaMemcpy3DParms{};
  p.srcPtr = a;
  p.srcPos = make_cudaPos(5, 1, 1);
  p.dstPtr = make_cudaPitchedPtr(box.data(), hp, hp, hr);
  p.dstPos = make_cudaPos(2, 2, 1);
  p.extent = sub;
  p.kind = cudaMemcpyDeviceToHost;
  EXPECT_OK(cudaMemcpy3D(&p));
  model_copy(model.data(), hp, hr, p.dstPos, dev_model.data(), a.pitch, e.height, p.srcPos, sub);
  EXPECT_TRUE(box == model, "3-D sub-box device -> host byte-exact");

  // Device -> device (whole box), a 3-D memset of a sub-box, on a stream.
  cudaStream_t s;
  REQUIRE_OK(cudaStreamCreate(&s));
  p = cudaMemcpy3DParms{};
  p.srcPtr = a;
  p.dstPtr = b;
  p.extent = e;
  p.kind = cudaMemcpyDeviceToDevice;
  EXPECT_OK(cudaMemcpy3DAsync(&p, s));
  cudaPitchedPtr inner = b;
  inner.ptr = static_cast<char*>(b.ptr) + 1 * b.pitch * b.ysize + 1 * b.pitch + 3;
  EXPECT_OK(cudaMemset3DAsync(inner, 0x5a, make_cudaExtent(9, 2, 2), s));
  EXPECT_OK(cudaStreamSynchronize(s));
  for (size_t z = 1; z < 3; ++z)
    for (size_t y = 1; y < 3; ++y) memset(&dev_model[(z * e.height + y) * a.pitch + 3], 0x5a, 9);
  std::vector<unsigned char> whole(dev_model.size(), 0);
  EXPECT_OK(cudaMemcpy(whole.data(), b.ptr, whole.size(), cudaMemcpyDeviceToHost));
  bool same = true;
  for (size_t z = 0; z < e.depth; ++z)
    for (size_t y = 0; y < e.height; ++y)
      same = same && !memcmp(&whole[(z * e.height + y) * b.pitch],
                             &dev_model[(z * e.height + y) * a.pitch], e.width);
  EXPECT_TRUE(same, "3-D device -> device copy + cudaMemset3D byte-exact");

  // The peer form on one device.
  cudaMemcpy3DPeerParms pp{};
  pp.srcPtr = b;
  pp.srcDevice = 0;
  pp.dstPtr = a;
  pp.dstDevice = 0;
  pp.extent = e;
  EXPECT_OK(cudaMemcpy3DPeer(&pp));
  std::vector<unsigned char> again(whole.size(), 0);
  EXPECT_OK(cudaMemcpy(again.data(), a.ptr, again.size(), cudaMemcpyDeviceToHost));
  same = true;
  for (size_t r = 0; r < e.height * e.depth; ++r)
    same = same && !memcmp(&again[r * a.pitch], &whole[r * b.pitch], e.width);
  EXPECT_TRUE(same, "cudaMemcpy3DPeer on one device byte-exact");

  // Batches: three 1-D copies, then a 3-D batch of one box, on the stream.
  std::vector<unsigned char> parts[3];
  void* dsts[3];
  const void* srcs[3];
  size_t sizes[3];
  unsigned char* lin = nullptr;
  REQUIRE_OK(cudaMalloc(reinterpret_cast<void**>(&lin), 3 * 1000));
  for (int i = 0; i < 3; ++i) {
    parts[i].assign(1000, static_cast<unsigned char>(0x30 + i));
    dsts[i] = lin + i * 1000;
    srcs[i] = parts[i].data();
    sizes[i] = 1000;
  }
  cudaMemcpyAttributes attr{};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t idx = 0;
  EXPECT_OK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 3, &attr, &idx, 1, s));
  std::vector<unsigned char> back(3000, 0), packed(n, 0);
  cudaMemcpy3DBatchOp op{};
  op.src.type = cudaMemcpyOperandTypePointer;
  op.src.op.ptr.ptr = a.ptr;
  op.src.op.ptr.rowLength = a.pitch;
  op.src.op.ptr.layerHeight = e.height;
  op.dst.type = cudaMemcpyOperandTypePointer;
  op.dst.op.ptr.ptr = packed.data();
  op.extent = e;
  op.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  EXPECT_OK(cudaMemcpy3DBatchAsync(1, &op, 0, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  EXPECT_OK(cudaMemcpy(back.data(), lin, 3000, cudaMemcpyDeviceToHost));
  same = true;
  for (int i = 0; i < 3; ++i) same = same && !memcmp(&back[i * 1000], parts[i].data(), 1000);
  EXPECT_TRUE(same, "cudaMemcpyBatchAsync byte-exact");
  same = true;
  for (size_t r = 0; r < e.height * e.depth; ++r)
    same = same && !memcmp(&packed[r * e.width], &again[r * a.pitch], e.width);
  EXPECT_TRUE(same, "cudaMemcpy3DBatchAsync byte-exact");

  EXPECT_OK(cudaStreamDestroy(s));
  EXPECT_OK(cudaFree(lin));
  EXPECT_OK(cudaFree(a.ptr));
  EXPECT_OK(cudaFree(b.ptr));
}

// Memsets of page-locked host memory: CUDA reaches it through unified addressing.  A synchronous
// one is done when it returns; an asynchronous one runs in stream order (after a copy into the
// same memory on that stream).  Pageable memory stays refused (errors.cu).
static void CUDART_CB nap_then_mark(void* p) {
  usleep(200 * 1000);
  if (p) *static_cast<unsigned char*>(p) = 0x99;
}

static void host_memsets() {
  const size_t n = 1 << 16;
  unsigned char* h = nullptr;
  REQUIRE_OK(cudaMallocHost(&h, n));
  memset(h, 0, n);
  // The legacy stream is held 200 ms by a host function that then writes h[0]: the synchronous
  // memset runs after it (on the legacy stream) and is done when it returns.
  EXPECT_OK(cudaLaunchHostFunc(0, nap_then_mark, h));
  EXPECT_OK(cudaMemset(h, 0x5a, n));
  bool ok = true;
  for (size_t i = 0; i < n; ++i) ok = ok && h[i] == 0x5a;
  EXPECT_TRUE(ok, "cudaMemset of page-locked host memory runs after the legacy stream's work");
  EXPECT_OK(cudaDeviceSynchronize());
  EXPECT_TRUE(h[0] == 0x5a, "nothing of the legacy stream ran after the synchronous memset");
  unsigned char* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, n));
  EXPECT_OK(cudaMemset(d, 0x11, n));
  EXPECT_OK(cudaDeviceSynchronize());  // the stream below does not wait for the legacy stream
  cudaStream_t s;
  EXPECT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // The stream is held 200 ms before the copy: a memset done before the copy would be
  // overwritten by it.
  EXPECT_OK(cudaLaunchHostFunc(s, nap_then_mark, nullptr));
  EXPECT_OK(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s));
  EXPECT_OK(cudaMemsetAsync(h + 1000, 0x77, 500, s));
  EXPECT_OK(cudaMemset2DAsync(h + 4096, 256, 0x33, 100, 4, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  ok = true;
  for (size_t i = 0; i < n; ++i) {
    const bool set = i >= 1000 && i < 1500;
    const bool set2 = i >= 4096 && i < 4096 + 4 * 256 && (i - 4096) % 256 < 100;
    const unsigned char want = set ? 0x77 : set2 ? 0x33 : 0x11;
    if (ok && h[i] != want) printf("host_memsets: byte %zu is 0x%02x, not 0x%02x\n", i, h[i], want);
    ok = ok && h[i] == want;
  }
  EXPECT_TRUE(ok, "cudaMemsetAsync/cudaMemset2DAsync of page-locked memory after the copy");
  // A host-to-device copy from memory a memset just set sees the new bytes.
  EXPECT_OK(cudaMemsetAsync(h, 0x44, n, s));
  EXPECT_OK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
  EXPECT_OK(cudaMemsetAsync(h, 0, n, s));
  EXPECT_OK(cudaStreamSynchronize(s));
  std::vector<unsigned char> back(n);
  EXPECT_OK(cudaMemcpy(back.data(), d, n, cudaMemcpyDeviceToHost));
  ok = true;
  for (size_t i = 0; i < n; ++i) ok = ok && back[i] == 0x44;
  EXPECT_TRUE(ok, "a copy from page-locked memory reads what the memset before it wrote");
  EXPECT_OK(cudaStreamDestroy(s));
  EXPECT_OK(cudaFree(d));
  EXPECT_OK(cudaFreeHost(h));
}

int main() {
  settings();
  host_memsets();
  pitched();
  three_d();
  devmem_say<<<1, 1>>>(42);
  EXPECT_OK(cudaDeviceSynchronize());
  // Last: a failed assert makes the context unusable.
  devmem_assert<<<1, 1>>>(1);
  cudaError_t e = cudaDeviceSynchronize();
  fprintf(stderr, "devmem: host after the assert\n");
  EXPECT_ERR(e, cudaErrorAssert);
  return finish("devmem");
}
