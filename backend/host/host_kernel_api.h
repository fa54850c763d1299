/* The host backend's kernel plugin interface (a test double).  The host backend cannot run GPU
   code; instead it runs host implementations of kernels, looked up by mangled name in a plugin
   (`rgpud --host-kernels PLUGIN.so`), so that argument packing, module loading and launching are
   exercised end to end on machines without a GPU.  A kernel without a host implementation fails its
   launch with cudaErrorNotSupported. */
#ifndef RGPU_HOST_KERNEL_API_H
#define RGPU_HOST_KERNEL_API_H

#ifdef __cplusplus
extern "C" {
#endif

/* The memory behind a texture or surface object, in CUDA's element layout: element (x, y, z) is
   at base + z * slice + y * pitch + x * element. */
typedef struct rgpu_host_resource {
  void* base;
  unsigned long long pitch;      /* bytes between rows */
  unsigned long long slice;      /* bytes between slices (layers) */
  unsigned width, height, depth; /* elements, rows, slices: at least 1 each */
  unsigned element;              /* bytes per element */
  unsigned channels;
  int format; /* CUarray_format */
  int surface;
  /* A texture object's CUDA_TEXTURE_DESC: address modes, filter mode, CU_TRSF_* flags. */
  int address_mode[3];
  int filter_mode;
  unsigned flags;
  unsigned levels; /* of a mipmapped array; 1 otherwise */
  float border[4];
} rgpu_host_resource;

typedef struct rgpu_host_launch {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_mem;
  /* Address of a __device__ / __constant__ variable of the kernel's module, or 0. */
  void* (*symbol)(void* ctx, const char* name);
  void* ctx;
  /* Reports a device-side failure (a failed assert: 710, cudaErrorAssert; a trap: 719) as a GPU
     would: the context fails with it at the next synchronization, until the device is reset.
     Write the assert's message to stderr first, as the GPU's runtime does. */
  void (*fail)(void* fail_ctx, int error);
  void* fail_ctx;
  /* Launch attributes (cudaLaunchKernelExC, cudaLaunchCooperativeKernel); 0 when not given.
     `attributes` has bit n set when attribute id n was given. */
  unsigned cluster[3];
  int cooperative;
  int priority;
  int programmatic_serialization;
  int cluster_scheduling;
  unsigned attributes;
  /* Texture and surface objects (cudaCreateTextureObject/cudaCreateSurfaceObject): what object
     `object` reads or writes at mipmap level `level` (0 unless the resource is a mipmapped array).
     Returns 0 and fills `out`, or -1 for an unknown object or level. */
  int (*resource)(void* res_ctx, unsigned long long object, unsigned level,
                  struct rgpu_host_resource* out);
  void* res_ctx;
  /* cudaGraphSetConditional(handle, value), for kernels of graphs with conditional nodes. */
  void (*set_conditional)(void* cond_ctx, unsigned long long handle, unsigned value);
  void* cond_ctx;
} rgpu_host_launch;

/* params[i] points at parameter i, as a kernel's argument list in CUDA. */
typedef void (*rgpu_host_kernel_fn)(const rgpu_host_launch* launch, void** params);

typedef struct rgpu_host_kernel {
  const char* name; /* mangled device name */
  rgpu_host_kernel_fn fn;
} rgpu_host_kernel;

/* Exported by a plugin: its kernels. */
typedef const rgpu_host_kernel* (*rgpu_host_kernels_fn)(unsigned* count);
#define RGPU_HOST_KERNELS_SYMBOL "rgpu_host_kernels"

#ifdef __cplusplus
}
#endif

#endif
