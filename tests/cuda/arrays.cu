// CUDA arrays, texture and surface objects (issue 11, item 2): channel descriptors, every copy
// form to, from and between arrays (checked byte by byte against a host model), 3-D, layered and
// cubemap arrays, texture fetches (point, normalized coordinates with linear filtering at texel
// midpoints, a mipmap level), a surface write, and the getters.  Lines are the same natively and
// through rgpu.
#include <cstring>
#include <vector>

#include "check.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // cudaMemcpy{To,From}Array

extern "C" __global__ void arrays_tex_fetch(cudaTextureObject_t tex, float* out, int w, int h,
                                            int normalized) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x >= w || y >= h) return;
  // Point: the texel's centre; normalized + linear: halfway between texels x and x + 1.
  out[y * w + x] = normalized ? tex2D<float>(tex, (x + 1.0f) / w, (y + 0.5f) / h)
                              : tex2D<float>(tex, x + 0.5f, y + 0.5f);
}

extern "C" __global__ void arrays_tex_lod(cudaTextureObject_t tex, float* out, int w, int h,
                                          float level) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2DLod<float>(tex, (x + 0.5f) / w, (y + 0.5f) / h, level);
}

extern "C" __global__ void arrays_tex_layered(cudaTextureObject_t tex, float* out, int w, int h,
                                              int layer) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2DLayered<float>(tex, x + 0.5f, y + 0.5f, layer);
}

extern "C" __global__ void arrays_surf_write(cudaSurfaceObject_t surf, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h)
    surf2Dwrite<float>(x * 10.0f + y, surf, x * static_cast<int>(sizeof(float)), y);
}

static unsigned char pat(size_t i, int seed) { return static_cast<unsigned char>(i * 13 + seed); }

static std::vector<unsigned char> bytes(size_t n, int seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = pat(i, seed);
  return v;
}

static void channel_descs() {
  cudaChannelFormatDesc f = cudaCreateChannelDesc<float>();
  EXPECT_TRUE(f.x == 32 && f.y == 0 && f.z == 0 && f.w == 0 && f.f == cudaChannelFormatKindFloat,
              "cudaCreateChannelDesc<float>");
  cudaChannelFormatDesc u = cudaCreateChannelDesc(8, 8, 8, 8, cudaChannelFormatKindUnsigned);
  EXPECT_TRUE(u.x == 8 && u.w == 8 && u.f == cudaChannelFormatKindUnsigned,
              "cudaCreateChannelDesc(8,8,8,8,unsigned)");
  cudaChannelFormatDesc s = cudaCreateChannelDesc<short2>();
  EXPECT_TRUE(s.x == 16 && s.y == 16 && s.z == 0 && s.f == cudaChannelFormatKindSigned,
              "cudaCreateChannelDesc<short2>");
}

// 2-D copies to and from a float array, with offsets, pitches and every direction.
static void copies_2d() {
  const int W = 37, H = 19;
  const size_t row = W * sizeof(float);
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
  cudaArray_t a = nullptr, b = nullptr;
  REQUIRE_OK(cudaMallocArray(&a, &desc, W, H));
  REQUIRE_OK(cudaMallocArray(&b, &desc, W, H));
  cudaChannelFormatDesc got{};
  EXPECT_OK(cudaGetChannelDesc(&got, a));
  size_t widest = 0;
  EXPECT_OK(cudaDeviceGetTexture1DLinearMaxWidth(&widest, &desc, 0));
  EXPECT_TRUE(widest >= (size_t{1} << 27), "the widest 1-D linear float texture: 2^27 or more");
  EXPECT_ERR(cudaDeviceGetTexture1DLinearMaxWidth(&widest, &desc, 99), cudaErrorInvalidDevice);
  cudaGetLastError();
  EXPECT_TRUE(got.x == 32 && got.f == cudaChannelFormatKindFloat, "cudaGetChannelDesc: float");
  cudaExtent ext{};
  unsigned flags = 99;
  EXPECT_OK(cudaArrayGetInfo(&got, &ext, &flags, a));
  EXPECT_TRUE(ext.width == W && ext.height == H && ext.depth == 0 && flags == 0,
              "cudaArrayGetInfo: 37 x 19 x 0, flags 0");

  // Whole array from a padded host buffer, back into another pitch.
  const size_t spitch = row + 24, dpitch = row + 8;
  std::vector<unsigned char> src = bytes(spitch * H, 1), back(dpitch * H, 0), model(row * H);
  for (int y = 0; y < H; ++y) memcpy(model.data() + y * row, src.data() + y * spitch, row);
  EXPECT_OK(cudaMemcpy2DToArray(a, 0, 0, src.data(), spitch, row, H, cudaMemcpyHostToDevice));
  EXPECT_OK(cudaMemcpy2DFromArray(back.data(), dpitch, a, 0, 0, row, H, cudaMemcpyDeviceToHost));
  bool same = true;
  for (int y = 0; y < H; ++y)
    same &= !memcmp(back.data() + y * dpitch, model.data() + y * row, row);
  EXPECT_TRUE(same, "2-D host -> array -> host round trip, pitches 172/156");
  // The padding of the destination was not written.
  same = true;
  for (int y = 0; y < H; ++y)
    for (size_t x = row; x < dpitch; ++x) same &= back[y * dpitch + x] == 0;
  EXPECT_TRUE(same, "2-D copy from an array leaves the destination's padding alone");

  // A 5 x 3 box at element (3, 2) from a host buffer (cudaMemcpyDefault).
  std::vector<unsigned char> box = bytes(5 * sizeof(float) * 3, 7);
  EXPECT_OK(cudaMemcpy2DToArray(a, 3 * sizeof(float), 2, box.data(), 5 * sizeof(float),
                                5 * sizeof(float), 3, cudaMemcpyDefault));
  for (int y = 0; y < 3; ++y)
    memcpy(model.data() + (2 + y) * row + 3 * sizeof(float), box.data() + y * 5 * sizeof(float),
           5 * sizeof(float));
  std::vector<unsigned char> whole(row * H);
  EXPECT_OK(cudaMemcpy2DFromArray(whole.data(), row, a, 0, 0, row, H, cudaMemcpyDefault));
  EXPECT_TRUE(whole == model, "a 5 x 3 box at (3, 2) lands where it should");
  std::vector<unsigned char> part(4 * sizeof(float) * 2);
  EXPECT_OK(cudaMemcpy2DFromArray(part.data(), 4 * sizeof(float), a, 4 * sizeof(float), 3,
                                  4 * sizeof(float), 2, cudaMemcpyDeviceToHost));
  same = true;
  for (int y = 0; y < 2; ++y)
    same &= !memcmp(part.data() + y * 16, model.data() + (3 + y) * row + 16, 16);
  EXPECT_TRUE(same, "a 4 x 2 box read from (4, 3)");

  // Device memory <-> array, and array -> array.
  void* d = nullptr;
  REQUIRE_OK(cudaMalloc(&d, row * H));
  EXPECT_OK(cudaMemcpy2DFromArray(d, row, a, 0, 0, row, H, cudaMemcpyDeviceToDevice));
  EXPECT_OK(cudaMemcpy2DToArray(b, 0, 0, d, row, row, H, cudaMemcpyDeviceToDevice));
  std::fill(whole.begin(), whole.end(), 0);
  EXPECT_OK(cudaMemcpy2DFromArray(whole.data(), row, b, 0, 0, row, H, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(whole == model, "array -> device memory -> array");
  EXPECT_OK(cudaMemset(d, 0, row * H));
  EXPECT_OK(cudaMemcpy2DArrayToArray(b, 0, 1, a, 0, 0, row, H - 1, cudaMemcpyDeviceToDevice));
  EXPECT_OK(cudaMemcpy2DFromArray(whole.data(), row, b, 0, 0, row, H, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(!memcmp(whole.data() + row, model.data(), row * (H - 1)),
              "cudaMemcpy2DArrayToArray one row down");

  // Asynchronous forms on a stream.
  cudaStream_t st;
  REQUIRE_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::vector<unsigned char> src2 = bytes(row * H, 5), back2(row * H, 0);
  EXPECT_OK(
      cudaMemcpy2DToArrayAsync(b, 0, 0, src2.data(), row, row, H, cudaMemcpyHostToDevice, st));
  EXPECT_OK(
      cudaMemcpy2DFromArrayAsync(back2.data(), row, b, 0, 0, row, H, cudaMemcpyDeviceToHost, st));
  EXPECT_OK(cudaStreamSynchronize(st));
  EXPECT_TRUE(back2 == src2, "asynchronous 2-D round trip on a stream");

  // The deprecated 1-D forms run on across rows: 100 bytes from byte 20 of row 3.
  std::vector<unsigned char> lin = bytes(100, 9), lin_back(100, 0);
  EXPECT_OK(cudaMemcpyToArray(a, 20, 3, lin.data(), 100, cudaMemcpyHostToDevice));
  EXPECT_OK(cudaMemcpyFromArray(lin_back.data(), a, 20, 3, 100, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(lin_back == lin, "cudaMemcpyToArray/FromArray across rows");
  memcpy(model.data() + 3 * row + 20, lin.data(), 100);
  EXPECT_OK(cudaMemcpy2DFromArray(whole.data(), row, a, 0, 0, row, H, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(whole == model, "the 1-D copy wrote the bytes after (20, 3) in row order");
  EXPECT_OK(cudaMemcpyToArrayAsync(a, 0, 0, src2.data(), row * H, cudaMemcpyHostToDevice, st));
  EXPECT_OK(cudaMemcpyFromArrayAsync(back2.data(), a, 0, 0, row * H, cudaMemcpyDeviceToHost, st));
  EXPECT_OK(cudaStreamSynchronize(st));
  EXPECT_TRUE(back2 == src2, "cudaMemcpyToArrayAsync/FromArrayAsync, the whole array");
  EXPECT_OK(cudaMemcpyArrayToArray(b, 8, 1, a, 4, 2, 300, cudaMemcpyDeviceToDevice));
  std::vector<unsigned char> bb(row * H);
  EXPECT_OK(cudaMemcpy2DFromArray(bb.data(), row, b, 0, 0, row, H, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(!memcmp(bb.data() + row + 8, src2.data() + 2 * row + 4, 300),
              "cudaMemcpyArrayToArray with different offsets");

  // Memory requirements: only for an array made with deferred mapping, as the driver says.
  cudaArrayMemoryRequirements req{};
  EXPECT_ERR(cudaArrayGetMemoryRequirements(&req, a, 0), cudaErrorInvalidValue);
  cudaGetLastError();
  cudaArray_t deferred = nullptr;
  EXPECT_OK(
      cudaMalloc3DArray(&deferred, &desc, make_cudaExtent(W, H, 0), cudaArrayDeferredMapping));
  EXPECT_OK(cudaArrayGetMemoryRequirements(&req, deferred, 0));
  EXPECT_TRUE(req.size >= row * H && req.alignment > 0, "memory requirements cover the array");
  EXPECT_OK(cudaFreeArray(deferred));
  EXPECT_OK(cudaStreamDestroy(st));
  EXPECT_OK(cudaFree(d));
  EXPECT_OK(cudaFreeArray(a));
  EXPECT_OK(cudaFreeArray(b));
}

// 3-D, layered and cubemap arrays through cudaMemcpy3D, and a copy larger than one staging chunk.
static void copies_3d() {
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<uchar4>();
  const size_t W = 9, D = 5, e = 4, row = W * e;
  const unsigned kinds[3] = {0, cudaArrayLayered, cudaArrayCubemap};
  const char* names[3] = {"3-D array 9 x 6 x 5", "layered array 9 x 6, 5 layers",
                          "cubemap array 6 x 6, 6 faces"};
  for (int k = 0; k < 3; ++k) {
    size_t w = k == 2 ? 6 : W, h = 6, d = k == 2 ? 6 : D, r = w * e;
    cudaArray_t a = nullptr;
    REQUIRE_OK(cudaMalloc3DArray(&a, &desc, make_cudaExtent(w, h, d), kinds[k]));
    unsigned flags = 0;
    cudaExtent ext{};
    EXPECT_OK(cudaArrayGetInfo(nullptr, &ext, &flags, a));
    EXPECT_TRUE(flags == kinds[k] && ext.width == w && ext.depth == d, names[k]);
    size_t pitch = r + 12;
    std::vector<unsigned char> src = bytes(pitch * h * d, 11 + k), back(r * h * d, 0);
    cudaMemcpy3DParms p{};
    p.srcPtr = make_cudaPitchedPtr(src.data(), pitch, w, h);
    p.dstArray = a;
    p.extent = make_cudaExtent(w, h, d);
    p.kind = cudaMemcpyHostToDevice;
    EXPECT_OK(cudaMemcpy3D(&p));
    cudaMemcpy3DParms q{};
    q.srcArray = a;
    q.dstPtr = make_cudaPitchedPtr(back.data(), r, w, h);
    q.extent = p.extent;
    q.kind = cudaMemcpyDeviceToHost;
    EXPECT_OK(cudaMemcpy3D(&q));
    bool same = true;
    for (size_t z = 0; z < d; ++z)
      for (size_t y = 0; y < h; ++y)
        same &= !memcmp(back.data() + (z * h + y) * r, src.data() + (z * h + y) * pitch, r);
    EXPECT_TRUE(same, "cudaMemcpy3D host -> array -> host");
    // A 2 x 3 x 2 box from element (1, 2, 1) into a device buffer, back to the host.
    void* dbuf = nullptr;
    REQUIRE_OK(cudaMalloc(&dbuf, 2 * e * 3 * 2));
    cudaMemcpy3DParms b{};
    b.srcArray = a;
    b.srcPos = make_cudaPos(1, 2, 1);
    b.dstPtr = make_cudaPitchedPtr(dbuf, 2 * e, 2, 3);
    b.extent = make_cudaExtent(2, 3, 2);
    b.kind = cudaMemcpyDeviceToDevice;
    EXPECT_OK(cudaMemcpy3DAsync(&b, 0));
    std::vector<unsigned char> small(2 * e * 3 * 2);
    EXPECT_OK(cudaMemcpy(small.data(), dbuf, small.size(), cudaMemcpyDeviceToHost));
    same = true;
    for (size_t z = 0; z < 2; ++z)
      for (size_t y = 0; y < 3; ++y)
        same &= !memcmp(small.data() + (z * 3 + y) * 2 * e,
                        src.data() + ((1 + z) * h + 2 + y) * pitch + 1 * e, 2 * e);
    EXPECT_TRUE(same, "a box at (1, 2, 1) through device memory");
    EXPECT_OK(cudaFree(dbuf));
    EXPECT_OK(cudaFreeArray(a));
  }
  (void)row;

  // 4096 x 2304 floats (36 MiB): more than one staging chunk each way.
  cudaChannelFormatDesc f = cudaCreateChannelDesc<float>();
  const size_t BW = 4096, BH = 2304, brow = BW * 4;
  cudaArray_t big = nullptr;
  REQUIRE_OK(cudaMallocArray(&big, &f, BW, BH));
  std::vector<unsigned char> src = bytes(brow * BH, 3), back(brow * BH, 0);
  EXPECT_OK(cudaMemcpy2DToArray(big, 0, 0, src.data(), brow, brow, BH, cudaMemcpyHostToDevice));
  EXPECT_OK(cudaMemcpy2DFromArray(back.data(), brow, big, 0, 0, brow, BH, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(back == src, "36 MiB host -> array -> host");
  EXPECT_OK(cudaFreeArray(big));
}

static cudaTextureObject_t texture(const cudaResourceDesc& res, bool normalized, bool linear,
                                   cudaTextureAddressMode mode) {
  cudaTextureDesc td{};
  td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = mode;
  td.filterMode = linear ? cudaFilterModeLinear : cudaFilterModePoint;
  td.readMode = cudaReadModeElementType;
  td.normalizedCoords = normalized;
  cudaTextureObject_t t = 0;
  EXPECT_OK(cudaCreateTextureObject(&t, &res, &td, nullptr));
  return t;
}

static void textures_and_surfaces() {
  const int W = 16, H = 8;
  cudaChannelFormatDesc f = cudaCreateChannelDesc<float>();
  cudaArray_t a = nullptr;
  REQUIRE_OK(cudaMallocArray(&a, &f, W, H, cudaArraySurfaceLoadStore));
  std::vector<float> texels(W * H), out(W * H);
  for (int i = 0; i < W * H; ++i) texels[i] = static_cast<float>(i * 2);
  EXPECT_OK(cudaMemcpy2DToArray(a, 0, 0, texels.data(), W * 4, W * 4, H, cudaMemcpyHostToDevice));
  float* dout = nullptr;
  REQUIRE_OK(cudaMalloc(&dout, W * H * sizeof(float)));
  cudaResourceDesc res{};
  res.resType = cudaResourceTypeArray;
  res.res.array.array = a;

  cudaTextureObject_t point = texture(res, false, false, cudaAddressModeClamp);
  arrays_tex_fetch<<<dim3(1, H), W>>>(point, dout, W, H, 0);
  EXPECT_OK(cudaGetLastError());
  EXPECT_OK(cudaMemcpy(out.data(), dout, W * H * 4, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(out == texels, "tex2D point sampling reads every texel");

  cudaTextureObject_t lin = texture(res, true, true, cudaAddressModeClamp);
  arrays_tex_fetch<<<dim3(1, H), W>>>(lin, dout, W, H, 1);
  EXPECT_OK(cudaMemcpy(out.data(), dout, W * H * 4, cudaMemcpyDeviceToHost));
  bool same = true;
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      float want = x + 1 < W ? (texels[y * W + x] + texels[y * W + x + 1]) / 2 : texels[y * W + x];
      same &= out[y * W + x] == want;
    }
  EXPECT_TRUE(same, "tex2D normalized coordinates, linear filtering between texels");

  cudaResourceDesc got{};
  EXPECT_OK(cudaGetTextureObjectResourceDesc(&got, lin));
  EXPECT_TRUE(got.resType == cudaResourceTypeArray && got.res.array.array == a,
              "cudaGetTextureObjectResourceDesc names the array");
  cudaTextureDesc gtd{};
  EXPECT_OK(cudaGetTextureObjectTextureDesc(&gtd, lin));
  EXPECT_TRUE(gtd.filterMode == cudaFilterModeLinear && gtd.normalizedCoords == 1 &&
                  gtd.addressMode[0] == cudaAddressModeClamp,
              "cudaGetTextureObjectTextureDesc: linear, normalized, clamp");
  EXPECT_OK(cudaDestroyTextureObject(point));
  EXPECT_OK(cudaDestroyTextureObject(lin));

  // Surface write, read back through a copy.
  cudaSurfaceObject_t surf = 0;
  EXPECT_OK(cudaCreateSurfaceObject(&surf, &res));
  arrays_surf_write<<<dim3(1, H), W>>>(surf, W, H);
  EXPECT_OK(cudaGetLastError());
  std::vector<float> back(W * H);
  EXPECT_OK(cudaMemcpy2DFromArray(back.data(), W * 4, a, 0, 0, W * 4, H, cudaMemcpyDeviceToHost));
  same = true;
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) same &= back[y * W + x] == x * 10.0f + y;
  EXPECT_TRUE(same, "surf2Dwrite wrote every element of the array");
  cudaResourceDesc sres{};
  EXPECT_OK(cudaGetSurfaceObjectResourceDesc(&sres, surf));
  EXPECT_TRUE(sres.res.array.array == a, "cudaGetSurfaceObjectResourceDesc names the array");
  EXPECT_OK(cudaDestroySurfaceObject(surf));

  // A mipmapped array: level 1 (8 x 4) read with tex2DLod.
  cudaMipmappedArray_t mip = nullptr;
  REQUIRE_OK(cudaMallocMipmappedArray(&mip, &f, make_cudaExtent(W, H, 0), 3));
  cudaArray_t l1 = nullptr, l1again = nullptr;
  EXPECT_OK(cudaGetMipmappedArrayLevel(&l1, mip, 1));
  EXPECT_OK(cudaGetMipmappedArrayLevel(&l1again, mip, 1));
  cudaExtent lext{};
  EXPECT_OK(cudaArrayGetInfo(nullptr, &lext, nullptr, l1));
  EXPECT_TRUE(lext.width == 8 && lext.height == 4, "mipmap level 1 is 8 x 4");
  std::vector<float> lv(8 * 4), lout(8 * 4);
  for (int i = 0; i < 32; ++i) lv[i] = 100.0f + i;
  EXPECT_OK(cudaMemcpy2DToArray(l1, 0, 0, lv.data(), 32, 32, 4, cudaMemcpyHostToDevice));
  cudaResourceDesc mres{};
  mres.resType = cudaResourceTypeMipmappedArray;
  mres.res.mipmap.mipmap = mip;
  cudaTextureDesc mtd{};
  mtd.addressMode[0] = mtd.addressMode[1] = cudaAddressModeClamp;
  mtd.filterMode = cudaFilterModePoint;
  mtd.mipmapFilterMode = cudaFilterModePoint;
  mtd.normalizedCoords = 1;
  mtd.maxMipmapLevelClamp = 2;
  cudaTextureObject_t mt = 0;
  EXPECT_OK(cudaCreateTextureObject(&mt, &mres, &mtd, nullptr));
  arrays_tex_lod<<<dim3(1, 4), 8>>>(mt, dout, 8, 4, 1.0f);
  EXPECT_OK(cudaMemcpy(lout.data(), dout, 32 * 4, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(lout == lv, "tex2DLod reads mipmap level 1");
  EXPECT_OK(cudaDestroyTextureObject(mt));
  EXPECT_OK(cudaFreeMipmappedArray(mip));

  // A layered array read by layer.
  cudaArray_t layered = nullptr;
  REQUIRE_OK(cudaMalloc3DArray(&layered, &f, make_cudaExtent(W, H, 3), cudaArrayLayered));
  std::vector<float> layers(W * H * 3);
  for (size_t i = 0; i < layers.size(); ++i) layers[i] = static_cast<float>(i) + 0.5f;
  cudaMemcpy3DParms p{};
  p.srcPtr = make_cudaPitchedPtr(layers.data(), W * 4, W, H);
  p.dstArray = layered;
  p.extent = make_cudaExtent(W, H, 3);
  p.kind = cudaMemcpyHostToDevice;
  EXPECT_OK(cudaMemcpy3D(&p));
  cudaResourceDesc lres{};
  lres.resType = cudaResourceTypeArray;
  lres.res.array.array = layered;
  cudaTextureObject_t lt = texture(lres, false, false, cudaAddressModeClamp);
  arrays_tex_layered<<<dim3(1, H), W>>>(lt, dout, W, H, 2);
  EXPECT_OK(cudaMemcpy(out.data(), dout, W * H * 4, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(!memcmp(out.data(), layers.data() + 2 * W * H, W * H * 4),
              "tex2DLayered reads layer 2");
  EXPECT_OK(cudaDestroyTextureObject(lt));
  EXPECT_OK(cudaFreeArray(layered));
  EXPECT_OK(cudaFree(dout));
  EXPECT_OK(cudaFreeArray(a));
}

int main() {
  channel_descs();
  copies_2d();
  copies_3d();
  textures_and_surfaces();
  EXPECT_OK(cudaDeviceSynchronize());
  return finish("arrays");
}
