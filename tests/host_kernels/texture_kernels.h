// Host implementations of tests/cuda/arrays.cu's kernels (texture fetches and a surface write),
// through the host backend's `resource` lookup of texture and surface objects.
#pragma once

#include "backend/host/host_kernel_api.h"

void arrays_tex_fetch(const rgpu_host_launch* l, void** p);
void arrays_tex_lod(const rgpu_host_launch* l, void** p);
void arrays_tex_layered(const rgpu_host_launch* l, void** p);
void arrays_surf_write(const rgpu_host_launch* l, void** p);
