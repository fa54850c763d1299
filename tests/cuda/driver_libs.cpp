// Driver calls NVIDIA's libraries need (issue 12, drvlibs), through the driver API alone: tensor
// maps (encode, replace the address, the documented argument errors), the potential block size
// occupancy query with and without a dynamic shared memory callback (against the same search done
// here over cuOccupancyMaxActiveBlocksPerMultiprocessor), stream memory operations ordering work
// across streams (waits before and after the writes, every comparison, 64-bit, batches, mapped
// page-locked memory the host writes), and the small calls (stream context, SYNC_MEMOPS, function
// loading, the legacy device queries).  Built like driver_api.cpp; the same lines natively and
// through rgpu.
#include <cuda.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "launch_lib_cubin.h"
#include "launch_lib_ptx.h"

#include "driver_check.h"

// rgpu's host backend (CI's test double) makes a descriptor it documents
// (backend/host/host_drvlibs.h); a real driver's is opaque.
static constexpr unsigned long long kHostMapMagic = 0x50414d5455504752ull;
static bool host_double(const CUtensorMap& m) { return m.opaque[0] == kHostMapMagic; }

// ---- tensor maps ------------------------------------------------------------------------------

static void tensor_maps(CUdeviceptr d) {
  void* base = reinterpret_cast<void*>(d);
  void* moved = reinterpret_cast<void*>(d + 4096);
  const cuuint64_t dims[2] = {64, 32};
  const cuuint64_t strides[1] = {256};
  const cuuint32_t box[2] = {32, 16};
  const cuuint32_t elem[2] = {1, 1};
  CUtensorMap a{}, b{};
  auto tiled = [&](CUtensorMap* m, void* addr) {
    return cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, addr, dims, strides, box,
                                  elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  };
  EXPECT_OK(tiled(&a, base));
  EXPECT_OK(tiled(&b, moved));
  CUtensorMap r = a;
  EXPECT_OK(cuTensorMapReplaceAddress(&r, moved));
  EXPECT_TRUE(memcmp(&r, &b, sizeof r) == 0,
              "cuTensorMapReplaceAddress gives the map encoded at the new address");
  EXPECT_TRUE(memcmp(&a, &b, sizeof a) != 0, "maps of two addresses differ");
  bool intact = true;
  if (host_double(a)) {  // every argument arrived as given
    const unsigned long long w2 = 0ull | CU_TENSOR_MAP_DATA_TYPE_FLOAT32 << 8 | 2ull << 16 |
                                  (unsigned long long)CU_TENSOR_MAP_L2_PROMOTION_L2_128B << 40;
    intact = a.opaque[1] == d && a.opaque[2] == w2 && a.opaque[3] == 64 && a.opaque[4] == 32 &&
             a.opaque[8] == 256 && a.opaque[12] == (32ull | 16ull << 12) &&
             a.opaque[13] == (1ull | 1ull << 4) && b.opaque[1] == d + 4096;
  }
  EXPECT_TRUE(intact, "cuTensorMapEncodeTiled: the arguments reach the driver intact");

  // Im2col: NHWC half-precision, 64 channels, 8x8 pixels, 2 images.
  const cuuint64_t idims[4] = {64, 8, 8, 2};
  const cuuint64_t istrides[3] = {128, 1024, 8192};
  const cuuint32_t ielem[4] = {1, 1, 1, 1};
  const int lower[2] = {-1, -1}, upper[2] = {-1, -1};
  CUtensorMap c{}, c2{};
  auto im2col = [&](CUtensorMap* m, void* addr) {
    return cuTensorMapEncodeIm2col(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, addr, idims, istrides,
                                   lower, upper, 64, 32, ielem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                   CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  };
  EXPECT_OK(im2col(&c, base));
  EXPECT_OK(im2col(&c2, moved));
  EXPECT_OK(cuTensorMapReplaceAddress(&c, moved));
  EXPECT_TRUE(memcmp(&c, &c2, sizeof c) == 0, "im2col: replaced address equals a new encoding");
  if (host_double(c2)) {
    const bool ok = c2.opaque[6] == 2 && c2.opaque[10] == 8192 &&
                    c2.opaque[13] == (0x1111ull | 64ull << 20 | 32ull << 40) &&
                    c2.opaque[14] == 0xffffffffull;
    if (!ok) ++g_failures, printf("FAIL im2col arguments arrive intact\n");
  }

  // What cuda.h documents as invalid, refused before anything is sent.
  const cuuint64_t bad_strides[1] = {250};
  const cuuint32_t bad_box[2] = {0, 16}, big_box[2] = {32, 257}, bad_elem[2] = {1, 9};
  auto e = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  auto il = CU_TENSOR_MAP_INTERLEAVE_NONE;
  auto sw = CU_TENSOR_MAP_SWIZZLE_NONE;
  auto l2 = CU_TENSOR_MAP_L2_PROMOTION_NONE;
  auto oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
  EXPECT_ERR(cuTensorMapEncodeTiled(nullptr, e, 2, base, dims, strides, box, elem, il, sw, l2, oob),
             CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuTensorMapEncodeTiled(&a, e, 0, base, dims, strides, box, elem, il, sw, l2, oob),
             CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuTensorMapEncodeTiled(&a, e, 6, base, dims, strides, box, elem, il, sw, l2, oob),
             CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuTensorMapEncodeTiled(&a, e, 2, reinterpret_cast<void*>(d + 8), dims, strides, box,
                                    elem, il, sw, l2, oob),
             CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuTensorMapEncodeTiled(&a, e, 2, base, nullptr, strides, box, elem, il, sw, l2, oob),
             CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuTensorMapEncodeTiled(&a, e, 2, base, dims, bad_strides, box, elem, il, sw, l2, oob),
             CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuTensorMapEncodeTiled(&a, e, 2, base, dims, strides, bad_box, elem, il, sw, l2, oob),
             CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuTensorMapEncodeTiled(&a, e, 2, base, dims, strides, big_box, elem, il, sw, l2, oob),
             CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuTensorMapEncodeTiled(&a, e, 2, base, dims, strides, box, bad_elem, il, sw, l2, oob),
             CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuTensorMapEncodeTiled(&a, e, 2, base, dims, strides, box, elem,
                                    CU_TENSOR_MAP_INTERLEAVE_16B, sw, l2, oob),
             CUDA_ERROR_INVALID_VALUE);  // interleaved layouts need rank 3 or more
  EXPECT_ERR(cuTensorMapEncodeIm2col(&c, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, base, idims, istrides,
                                     lower, upper, 64, 32, ielem, il, sw, l2, oob),
             CUDA_ERROR_INVALID_VALUE);  // im2col needs rank 3 to 5
  EXPECT_ERR(cuTensorMapEncodeIm2col(&c, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, base, idims, istrides,
                                     nullptr, upper, 64, 32, ielem, il, sw, l2, oob),
             CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuTensorMapEncodeIm2colWide(&c, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, base, idims,
                                         istrides, -1, 1, 64, 32, ielem, il,
                                         CU_TENSOR_MAP_IM2COL_WIDE_MODE_W, sw, l2, oob),
             CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuTensorMapReplaceAddress(nullptr, moved), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuTensorMapReplaceAddress(&r, reinterpret_cast<void*>(d + 4)),
             CUDA_ERROR_INVALID_VALUE);
  // An error of the driver's own comes back: the test double refuses a map it did not make.
  CUtensorMap junk{};
  junk.opaque[0] = kHostMapMagic;
  const bool double_refuses =
      !host_double(a) || cuTensorMapReplaceAddress(&junk, moved) == CUDA_ERROR_INVALID_VALUE;
  EXPECT_TRUE(double_refuses, "the server's refusal of a tensor map comes back");
}

// ---- occupancy --------------------------------------------------------------------------------

static size_t smem_64_per_thread(int block) { return static_cast<size_t>(block) * 64; }

// The search cuda.h documents (cudaOccupancyMaxPotentialBlockSize), done here with the
// per-block-size occupancy query: the largest block allowed, then every smaller multiple of the
// warp size; most resident threads wins, the larger block on a tie.
static void expected_block_size(CUfunction f, CUoccupancyB2DSize fn, size_t smem, int limit,
                                int* grid, int* block) {
  int warp = 0, sms = 0, dev_max = 0, per_sm = 0, fmax = 0;
  cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0);
  cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
  cuDeviceGetAttribute(&dev_max, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0);
  cuDeviceGetAttribute(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 0);
  cuFuncGetAttribute(&fmax, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f);
  int top = dev_max < fmax ? dev_max : fmax;
  if (limit > 0 && limit < top) top = limit;
  int best = 0, best_block = 0, best_blocks = 0;
  for (int aligned = (top + warp - 1) / warp * warp; aligned > 0; aligned -= warp) {
    const int bs = aligned < top ? aligned : top;
    int n = 0;
    cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, bs, fn ? fn(bs) : smem);
    if (bs * n > best) {
      best = bs * n, best_block = bs, best_blocks = n;
      if (best == per_sm) break;
    }
  }
  *grid = best_blocks * sms;
  *block = best_block;
}

static void occupancy(CUfunction f) {
  char line[200];
  struct Case {
    CUoccupancyB2DSize fn;
    size_t smem;
    int limit;
    const char* what;
  } cases[] = {{nullptr, 0, 0, "no callback, no shared memory"},
               {nullptr, 40000, 0, "no callback, 40000 bytes"},
               {nullptr, 0, 100, "no callback, at most 100 threads"},
               {smem_64_per_thread, 0, 0, "callback: 64 bytes per thread"},
               {smem_64_per_thread, 0, 200, "callback, at most 200 threads"}};
  for (const Case& c : cases) {
    int grid = -1, block = -1, want_grid = -2, want_block = -2;
    EXPECT_OK(cuOccupancyMaxPotentialBlockSize(&grid, &block, f, c.fn, c.smem, c.limit));
    expected_block_size(f, c.fn, c.smem, c.limit, &want_grid, &want_block);
    snprintf(line, sizeof line, "potential block size (%s) is the documented search's answer",
             c.what);
    EXPECT_TRUE(grid == want_grid && block == want_block && block > 0, line);
    if (grid != want_grid || block != want_block)
      printf("     got grid %d block %d, want grid %d block %d\n", grid, block, want_grid,
             want_block);
  }
  int grid = 0, block = 0;
  EXPECT_OK(cuOccupancyMaxPotentialBlockSizeWithFlags(&grid, &block, f, smem_64_per_thread, 0, 0,
                                                      CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE));
  EXPECT_ERR(cuOccupancyMaxPotentialBlockSize(nullptr, &block, f, nullptr, 0, 0),
             CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuOccupancyMaxPotentialBlockSizeWithFlags(&grid, &block, f, nullptr, 0, 0, 8),
             CUDA_ERROR_INVALID_VALUE);
}

// ---- stream memory operations ---------------------------------------------------------------

static unsigned read32(CUdeviceptr p) {
  unsigned v = 0;
  cuMemcpyDtoH(&v, p, sizeof v);
  return v;
}
static unsigned long long read64(CUdeviceptr p) {
  unsigned long long v = 0;
  cuMemcpyDtoH(&v, p, sizeof v);
  return v;
}
// True when `s` still has work after a while (a wait that must not be satisfied yet).
static bool still_waiting(CUstream s) {
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return cuStreamQuery(s) == CUDA_ERROR_NOT_READY;
}

// Stream `a` waits on word `w` (flags, value); `b` then writes `first` (must not release it) and
// `release` (must); a write after the wait on `a` shows when it passed.
static void wait_case(CUstream a, CUstream b, CUdeviceptr w, CUdeviceptr done, unsigned flags,
                      unsigned value, unsigned initial, unsigned first, unsigned release,
                      const char* what) {
  char line[200];
  cuMemsetD32(w, initial, 1);
  cuMemsetD32(done, 0, 1);
  cuCtxSynchronize();  // the memsets are done before the streams (non-blocking) use the words
  EXPECT_OK(cuStreamWaitValue32(a, w, value, flags));
  EXPECT_OK(cuStreamWriteValue32(a, done, 1, 0));
  snprintf(line, sizeof line, "%s: the stream waits while the word is %#x", what, initial);
  EXPECT_TRUE(still_waiting(a), line);
  EXPECT_OK(cuStreamWriteValue32(b, w, first, 0));
  cuStreamSynchronize(b);
  snprintf(line, sizeof line, "%s: ... and still while it is %#x", what, first);
  EXPECT_TRUE(still_waiting(a) && read32(done) == 0, line);
  EXPECT_OK(cuStreamWriteValue32(b, w, release, 0));
  EXPECT_OK(cuStreamSynchronize(a));
  snprintf(line, sizeof line, "%s: %#x releases it, in order", what, release);
  EXPECT_TRUE(read32(done) == 1, line);
}

static void mem_ops(CUdeviceptr d) {
  CUstream a = nullptr, b = nullptr;
  cuStreamCreate(&a, CU_STREAM_NON_BLOCKING);
  cuStreamCreate(&b, CU_STREAM_NON_BLOCKING);
  const CUdeviceptr w = d, done = d + 4, w64 = d + 16, out = d + 32;
  cuMemsetD32(d, 0, 64);
  cuCtxSynchronize();

  // Written before the wait is enqueued: it passes at once.
  EXPECT_OK(cuStreamWriteValue32(b, w, 5, 0));
  EXPECT_OK(cuStreamSynchronize(b));
  EXPECT_OK(cuStreamWaitValue32(a, w, 5, CU_STREAM_WAIT_VALUE_GEQ));
  EXPECT_OK(cuStreamWriteValue32(a, done, 7, 0));
  EXPECT_OK(cuStreamSynchronize(a));
  EXPECT_TRUE(read32(done) == 7, "a wait on a value already written passes");

  // Enqueued before the write: each comparison.
  wait_case(a, b, w, done, CU_STREAM_WAIT_VALUE_GEQ, 10, 0, 9, 11, "GEQ 10");
  wait_case(a, b, w, done, CU_STREAM_WAIT_VALUE_GEQ, 2, 0xfffffff0u, 1, 2, "GEQ 2 (cyclic)");
  wait_case(a, b, w, done, CU_STREAM_WAIT_VALUE_EQ, 42, 0, 43, 42, "EQ 42");
  wait_case(a, b, w, done, CU_STREAM_WAIT_VALUE_AND, 0x4, 0, 0x3, 0x6, "AND 0x4");
  wait_case(a, b, w, done, CU_STREAM_WAIT_VALUE_NOR, 0xfffffff0u, 0xf, 0x1f, 0x0, "NOR 0xfffffff0");

  // 64-bit, cyclic.
  unsigned long long all = ~0ull;
  cuMemcpyHtoD(w64, &all, sizeof all);
  cuMemsetD32(done, 0, 1);
  cuCtxSynchronize();
  EXPECT_OK(cuStreamWaitValue64(a, w64, 1ull << 40, CU_STREAM_WAIT_VALUE_GEQ));
  EXPECT_OK(cuStreamWriteValue32(a, done, 1, 0));
  EXPECT_TRUE(still_waiting(a), "64-bit GEQ 2^40: waits while the word is -1");
  EXPECT_OK(cuStreamWriteValue64(b, w64, (1ull << 40) + 3, 0));
  EXPECT_OK(cuStreamSynchronize(a));
  EXPECT_TRUE(read32(done) == 1 && read64(w64) == (1ull << 40) + 3, "64-bit write releases it");

  // A batch: a satisfied wait, writes of both widths, a barrier, in order.
  CUstreamBatchMemOpParams p[4];
  memset(p, 0, sizeof p);
  p[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
  p[0].waitValue.address = w64;
  p[0].waitValue.value64 = 1ull << 40;
  p[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  p[1].writeValue.address = out;
  p[1].writeValue.value = 0xabcd;
  p[2].memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
  p[2].memoryBarrier.flags = CU_STREAM_MEMORY_BARRIER_TYPE_GPU;
  p[3].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
  p[3].writeValue.address = out + 8;
  p[3].writeValue.value64 = 0x123456789abcull;
  EXPECT_OK(cuStreamBatchMemOp(a, 4, p, 0));
  EXPECT_OK(cuStreamSynchronize(a));
  EXPECT_TRUE(read32(out) == 0xabcd && read64(out + 8) == 0x123456789abcull,
              "cuStreamBatchMemOp: both writes done");

  // The first API exists where the device says so (current GPUs: not).
  int v1 = 0;
  cuDeviceGetAttribute(&v1, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, 0);
  void* fn = nullptr;
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  EXPECT_OK(
      cuGetProcAddress("cuStreamWriteValue32", &fn, 11000, CU_GET_PROC_ADDRESS_DEFAULT, &found));
  if (fn) {
    auto write_v1 = reinterpret_cast<CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned)>(fn);
    const CUresult r = write_v1(a, out, 5, 0);
    cuStreamSynchronize(a);
    EXPECT_TRUE(v1 ? r == CUDA_SUCCESS && read32(out) == 5 : r == CUDA_ERROR_NOT_SUPPORTED,
                "the first API's cuStreamWriteValue32 follows CAN_USE_STREAM_MEM_OPS_V1");
  } else {
    EXPECT_TRUE(false, "cuGetProcAddress finds the first cuStreamWriteValue32");
  }

  // Errors cuda.h documents.
  unsigned host_word = 0;
  EXPECT_ERR(cuStreamWaitValue32(a, w, 1, 7), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuStreamWriteValue32(a, w, 1, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER),
             CUDA_ERROR_INVALID_VALUE);  // not in the _v2 API
  EXPECT_ERR(cuStreamWriteValue32(a, reinterpret_cast<CUdeviceptr>(&host_word), 1, 0),
             CUDA_ERROR_INVALID_VALUE);  // not memory the GPU reaches
  EXPECT_ERR(cuStreamWaitValue32(a, w + 2, 1, 0), CUDA_ERROR_INVALID_VALUE);  // unaligned
  EXPECT_ERR(cuStreamWriteValue64(a, w64 + 4, 1, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuStreamBatchMemOp(a, 0, p, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuStreamBatchMemOp(a, 4, p, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_OK(cuStreamSynchronize(a));

  // Mapped page-locked memory the host writes (not available over every link).
  // Over a network rgpu emulates mapped memory with managed memory, which cannot carry signals
  // while work runs: there the wait is refused (CUDA_ERROR_NOT_SUPPORTED) and nothing is queued.
  unsigned* h = nullptr;
  CUdeviceptr hd = 0;
  bool usable = false;
  if (cuMemHostAlloc(reinterpret_cast<void**>(&h), 4096, CU_MEMHOSTALLOC_DEVICEMAP) ==
      CUDA_SUCCESS) {
    __atomic_store_n(h, 0u, __ATOMIC_SEQ_CST);
    cuMemHostGetDevicePointer(&hd, h, 0);
    usable = cuStreamWaitValue32(a, hd, 0, CU_STREAM_WAIT_VALUE_EQ) != CUDA_ERROR_NOT_SUPPORTED;
    if (!usable) cuMemFreeHost(h);
  }
  if (usable) {
    EXPECT_OK(cuStreamSynchronize(a));
    cuMemsetD32(done, 0, 1);
    cuCtxSynchronize();
    EXPECT_OK(cuStreamWaitValue32(a, hd, 3, CU_STREAM_WAIT_VALUE_EQ));
    EXPECT_OK(cuStreamWriteValue32(a, done, 1, 0));
    const bool waited = still_waiting(a);
    __atomic_store_n(h, 3u, __ATOMIC_SEQ_CST);
    EXPECT_OK(cuStreamSynchronize(a));
    EXPECT_TRUE(waited && read32(done) == 1,
                "mapped page-locked memory: the host's store releases the stream");
    EXPECT_OK(cuStreamWriteValue32(a, hd + 4, 99, 0));
    EXPECT_OK(cuStreamSynchronize(a));
    EXPECT_TRUE(__atomic_load_n(h + 1, __ATOMIC_SEQ_CST) == 99u,
                "mapped page-locked memory: the stream's write reaches the host");
    cuMemFreeHost(h);
  } else {
    printf("ok   mapped page-locked memory: not available over this link\n");
  }
  cuStreamDestroy(a);
  cuStreamDestroy(b);
}

// ---- linking -----------------------------------------------------------------------------------

// lib_add(x, 3, n) from a module loaded from a linked image; true when x[i] went from i to i + 3.
static bool run_linked(const void* image, CUdeviceptr d) {
  CUmodule m = nullptr;
  CUfunction f = nullptr;
  if (cuModuleLoadData(&m, image) != CUDA_SUCCESS) return false;
  bool ok = cuModuleGetFunction(&f, m, "lib_add") == CUDA_SUCCESS;
  const int n = 256;
  std::vector<int> h(n);
  for (int i = 0; i < n; ++i) h[i] = i;
  cuMemcpyHtoD(d, h.data(), n * sizeof(int));
  int v = 3, count = n;
  void* args[] = {&d, &v, &count};
  ok = ok && cuLaunchKernel(f, 1, 1, 1, n, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS;
  cuMemcpyDtoH(h.data(), d, n * sizeof(int));
  for (int i = 0; i < n; ++i) ok = ok && h[i] == i + 3;
  cuModuleUnload(m);
  return ok;
}

static void linking(CUdeviceptr d) {
  CUlinkState st = nullptr;
  void* image = nullptr;
  size_t size = 0;
  EXPECT_OK(cuLinkCreate(0, nullptr, nullptr, &st));
  EXPECT_OK(cuLinkAddData(st, CU_JIT_INPUT_PTX, const_cast<unsigned char*>(lib_ptx), sizeof lib_ptx,
                          "launch_lib.ptx", 0, nullptr, nullptr));
  EXPECT_ERR(cuLinkAddData(st, CU_JIT_INPUT_PTX, nullptr, 10, "none", 0, nullptr, nullptr),
             CUDA_ERROR_INVALID_VALUE);
  EXPECT_OK(cuLinkComplete(st, &image, &size));
  EXPECT_TRUE(image && size > 0 && run_linked(image, d),
              "cuLinkComplete's image loads as a module and its kernel runs");
  EXPECT_OK(cuLinkDestroy(st));

  char path[] = "/tmp/rgpu-driver-libs-XXXXXX";
  const int fd = mkstemp(path);
  const bool written =
      fd >= 0 && write(fd, lib_ptx, sizeof lib_ptx - 1) == static_cast<ssize_t>(sizeof lib_ptx - 1);
  if (fd >= 0) close(fd);
  EXPECT_TRUE(written, "a PTX file to link");
  EXPECT_OK(cuLinkCreate(0, nullptr, nullptr, &st));
  EXPECT_OK(cuLinkAddFile(st, CU_JIT_INPUT_PTX, path, 0, nullptr, nullptr));
  EXPECT_ERR(cuLinkAddFile(st, CU_JIT_INPUT_PTX, "/nonexistent/rgpu.ptx", 0, nullptr, nullptr),
             CUDA_ERROR_FILE_NOT_FOUND);
  image = nullptr;
  EXPECT_OK(cuLinkComplete(st, &image, &size));
  EXPECT_TRUE(image && run_linked(image, d), "a linked file runs too");
  EXPECT_OK(cuLinkDestroy(st));
  unlink(path);
}

// ---- small calls ------------------------------------------------------------------------------

// The legacy device queries are deprecated in cuda.h; they are what this part checks.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#undef cuDeviceTotalMem
extern "C" CUresult CUDAAPI cuDeviceTotalMem(unsigned int* bytes, CUdevice dev);

static void small_calls(CUcontext ctx, CUfunction f, CUdeviceptr d) {
  CUstream s = nullptr;
  cuStreamCreate(&s, 0);
  CUcontext c = nullptr;
  CUgreenCtx g = reinterpret_cast<CUgreenCtx>(1);
  EXPECT_OK(cuStreamGetCtx_v2(s, &c, &g));
  EXPECT_TRUE(c == ctx && g == nullptr, "cuStreamGetCtx_v2: the stream's context, no green one");
  c = nullptr;
  EXPECT_OK(cuStreamGetCtx_v2(CU_STREAM_LEGACY, &c, &g));
  EXPECT_TRUE(c == ctx, "cuStreamGetCtx_v2 of the legacy stream: the current context");
  EXPECT_ERR(cuStreamGetCtx_v2(s, nullptr, &g), CUDA_ERROR_INVALID_VALUE);
  cuStreamDestroy(s);

  unsigned one = 1;
  int host_int = 0;
  EXPECT_OK(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d));
  EXPECT_ERR(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                                   reinterpret_cast<CUdeviceptr>(&host_int)),
             CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERR(cuPointerSetAttribute(nullptr, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d),
             CUDA_ERROR_INVALID_VALUE);

  CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_MAX;
  EXPECT_OK(cuFuncIsLoaded(&state, f));
  EXPECT_TRUE(state == CU_FUNCTION_LOADING_STATE_LOADED, "cuFuncIsLoaded: loaded");
  EXPECT_OK(cuFuncLoad(f));
  EXPECT_ERR(cuFuncIsLoaded(nullptr, f), CUDA_ERROR_INVALID_VALUE);

  int major = 0, minor = 0, amaj = -1, amin = -1;
  EXPECT_OK(cuDeviceComputeCapability(&major, &minor, 0));
  cuDeviceGetAttribute(&amaj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0);
  cuDeviceGetAttribute(&amin, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0);
  EXPECT_TRUE(major == amaj && minor == amin && major > 0,
              "cuDeviceComputeCapability: the attributes' numbers");
  CUdevprop prop{};
  int threads = 0, warp = 0, smem = 0, gx = 0;
  EXPECT_OK(cuDeviceGetProperties(&prop, 0));
  cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0);
  cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0);
  cuDeviceGetAttribute(&smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 0);
  cuDeviceGetAttribute(&gx, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 0);
  EXPECT_TRUE(prop.maxThreadsPerBlock == threads && prop.SIMDWidth == warp &&
                  prop.sharedMemPerBlock == smem && prop.maxGridSize[0] == gx && threads > 0,
              "cuDeviceGetProperties: the attributes' values");
  EXPECT_ERR(cuDeviceGetProperties(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  unsigned int total32 = 0;
  EXPECT_OK(cuDeviceTotalMem(&total32, 0));
  EXPECT_TRUE(total32 > 0, "cuDeviceTotalMem (first version): some memory");
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  EXPECT_OK(cuInit(0));
  CUcontext ctx = nullptr;
  EXPECT_OK(cuDevicePrimaryCtxRetain(&ctx, 0));
  EXPECT_OK(cuCtxSetCurrent(ctx));
  if (argc > 1 && strcmp(argv[1], "--abandon-wait") == 0) {
    // A stream waits for a word nobody will write; the program leaves (rgpud's session must end).
    CUdeviceptr w = 0;
    CUstream s = nullptr;
    cuMemAlloc(&w, 256);
    cuMemsetD32(w, 0, 1);
    cuCtxSynchronize();
    cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    EXPECT_OK(cuStreamWaitValue32(s, w, 1, CU_STREAM_WAIT_VALUE_EQ));
    EXPECT_TRUE(cuStreamQuery(s) == CUDA_ERROR_NOT_READY, "the stream waits");
    printf("driver_libs: left a stream waiting\n");
    return g_failures ? 1 : 0;
  }
  CUmodule m = nullptr;
  EXPECT_OK(cuModuleLoadData(&m, lib_cubin));
  CUfunction f = nullptr;
  EXPECT_OK(cuModuleGetFunction(&f, m, "lib_add"));
  CUdeviceptr d = 0;
  EXPECT_OK(cuMemAlloc(&d, 1 << 20));

  tensor_maps(d);
  occupancy(f);
  mem_ops(d);
  small_calls(ctx, f, d);
  linking(d);

  cuMemFree(d);
  cuModuleUnload(m);
  cuDevicePrimaryCtxRelease(0);
  if (g_failures) {
    printf("driver_libs: %d FAILED\n", g_failures);
    return 1;
  }
  printf("driver_libs: passed\n");
  return 0;
}
