// A small texture unit for the host backend's test kernels: single-channel float elements,
// unnormalized or normalized coordinates, clamp/wrap/mirror/border addressing, point or linear
// filtering (weights with 8 fractional bits, as the hardware's), mipmap levels chosen by the
// caller.  Enough to show that a texture object reaches the kernel and addresses the right array.
#include "tests/host_kernels/texture_kernels.h"

#include <cmath>
#include <cstring>

namespace {

template <class T>
T arg(void** params, int i) {
  T v;
  memcpy(&v, params[i], sizeof v);
  return v;
}

template <class F>
void each_thread(const rgpu_host_launch* l, F f) {
  for (unsigned by = 0; by < l->grid[1]; ++by)
    for (unsigned bx = 0; bx < l->grid[0]; ++bx)
      for (unsigned ty = 0; ty < l->block[1]; ++ty)
        for (unsigned tx = 0; tx < l->block[0]; ++tx)
          f(static_cast<long>(bx) * l->block[0] + tx, static_cast<long>(by) * l->block[1] + ty);
}

// Element i of a dimension of n elements under address mode m (CUaddress_mode); -1: border.
long address(long i, long n, int mode) {
  switch (mode) {
    case 0:
      return ((i % n) + n) % n;  // wrap
    case 2: {                    // mirror
      long p = ((i % (2 * n)) + 2 * n) % (2 * n);
      return p < n ? p : 2 * n - 1 - p;
    }
    case 3:
      return i < 0 || i >= n ? -1 : i;  // border
    default:
      return i < 0 ? 0 : i >= n ? n - 1 : i;  // clamp
  }
}

float texel(const rgpu_host_resource& r, long x, long y, long layer) {
  x = address(x, r.width, r.address_mode[0]);
  y = address(y, r.height, r.address_mode[1]);
  if (x < 0 || y < 0) return r.border[0];
  float v;
  memcpy(&v, static_cast<const char*>(r.base) + layer * r.slice + y * r.pitch + x * r.element,
         sizeof v);
  return v;
}

float sample(const rgpu_host_resource& r, float u, float v, long layer) {
  if (r.flags & 0x02) u *= r.width, v *= r.height;  // CU_TRSF_NORMALIZED_COORDINATES
  if (r.filter_mode == 0)                           // point
    return texel(r, static_cast<long>(std::floor(u)), static_cast<long>(std::floor(v)), layer);
  float xb = u - 0.5f, yb = v - 0.5f;
  long x0 = static_cast<long>(std::floor(xb)), y0 = static_cast<long>(std::floor(yb));
  float a = std::round((xb - x0) * 256) / 256, b = std::round((yb - y0) * 256) / 256;
  return (1 - a) * (1 - b) * texel(r, x0, y0, layer) + a * (1 - b) * texel(r, x0 + 1, y0, layer) +
         (1 - a) * b * texel(r, x0, y0 + 1, layer) + a * b * texel(r, x0 + 1, y0 + 1, layer);
}

bool lookup(const rgpu_host_launch* l, unsigned long long object, unsigned level,
            rgpu_host_resource* r) {
  if (!l->resource || l->resource(l->res_ctx, object, level, r) != 0) {
    l->fail(l->fail_ctx, 400);  // as an invalid handle would fault on a GPU
    return false;
  }
  return true;
}

}  // namespace

void arrays_tex_fetch(const rgpu_host_launch* l, void** p) {
  auto tex = arg<unsigned long long>(p, 0);
  auto out = arg<float*>(p, 1);
  int w = arg<int>(p, 2), h = arg<int>(p, 3), normalized = arg<int>(p, 4);
  rgpu_host_resource r;
  if (!lookup(l, tex, 0, &r)) return;
  each_thread(l, [&](long x, long y) {
    if (x >= w || y >= h) return;
    out[y * w + x] = normalized ? sample(r, (x + 1.0f) / w, (y + 0.5f) / h, 0)
                                : sample(r, x + 0.5f, y + 0.5f, 0);
  });
}

void arrays_tex_lod(const rgpu_host_launch* l, void** p) {
  auto tex = arg<unsigned long long>(p, 0);
  auto out = arg<float*>(p, 1);
  int w = arg<int>(p, 2), h = arg<int>(p, 3);
  float level = arg<float>(p, 4);
  rgpu_host_resource r;
  if (!lookup(l, tex, 0, &r)) return;
  // Point mipmap filtering: the nearest level, within the array's levels.
  unsigned lv = static_cast<unsigned>(std::lround(std::fmax(level, 0.0f)));
  if (lv >= r.levels) lv = r.levels - 1;
  if (!lookup(l, tex, lv, &r)) return;
  each_thread(l, [&](long x, long y) {
    if (x < w && y < h) out[y * w + x] = sample(r, (x + 0.5f) / w, (y + 0.5f) / h, 0);
  });
}

void arrays_tex_layered(const rgpu_host_launch* l, void** p) {
  auto tex = arg<unsigned long long>(p, 0);
  auto out = arg<float*>(p, 1);
  int w = arg<int>(p, 2), h = arg<int>(p, 3), layer = arg<int>(p, 4);
  rgpu_host_resource r;
  if (!lookup(l, tex, 0, &r)) return;
  if (layer < 0 || static_cast<unsigned>(layer) >= r.depth) return;
  each_thread(l, [&](long x, long y) {
    if (x < w && y < h) out[y * w + x] = sample(r, x + 0.5f, y + 0.5f, layer);
  });
}

void arrays_surf_write(const rgpu_host_launch* l, void** p) {
  auto surf = arg<unsigned long long>(p, 0);
  int w = arg<int>(p, 1), h = arg<int>(p, 2);
  rgpu_host_resource r;
  if (!lookup(l, surf, 0, &r)) return;
  each_thread(l, [&](long x, long y) {
    if (x >= w || y >= h || x >= static_cast<long>(r.width) || y >= static_cast<long>(r.height))
      return;
    float v = x * 10.0f + y;
    memcpy(static_cast<char*>(r.base) + y * r.pitch + x * sizeof(float), &v, sizeof v);
  });
}
