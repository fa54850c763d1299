// The device attributes the host backend (CI's test double) reports: every attribute CUDA 13's
// driver has, so that NVIDIA's runtime, which reads about 70 of them at start, runs on it. Values
// marked (H200) were read from an H200 (scripts/gpu-probes/attr_dump.cu); the others are those of
// a mid-size Hopper-class part chosen for the tests (132 SMs, compute capability 9.0).
#include "backend/host/host_attributes.h"

namespace rgpu::backend {

const std::vector<std::pair<uint32_t, int32_t>>& host_device_attributes() {
  static const std::vector<std::pair<uint32_t, int32_t>> attrs = {
      {1, 1024},         // max_threads_per_block
      {2, 1024},         // max_block_dim_x
      {3, 1024},         // max_block_dim_y
      {4, 64},           // max_block_dim_z
      {5, 2147483647},   // max_grid_dim_x
      {6, 65535},        // max_grid_dim_y
      {7, 65535},        // max_grid_dim_z
      {8, 49152},        // max_shared_memory_per_block
      {9, 65536},        // total_constant_memory
      {10, 32},          // warp_size
      {11, 2147483647},  // max_pitch
      {12, 65536},       // max_registers_per_block
      {13, 1980000},     // clock_rate
      {14, 512},         // texture_alignment
      {15, 1},           // gpu_overlap
      {16, 132},         // multiprocessor_count
      {17, 0},           // kernel_exec_timeout
      {18, 0},           // integrated
      {19, 1},           // can_map_host_memory
      {20, 0},           // compute_mode
      {21, 131072},      // maximum_texture1d_width (H200)
      {22, 131072},      // maximum_texture2d_width (H200)
      {23, 65536},       // maximum_texture2d_height (H200)
      {24, 16384},       // maximum_texture3d_width (H200)
      {25, 16384},       // maximum_texture3d_height (H200)
      {26, 16384},       // maximum_texture3d_depth (H200)
      {27, 32768},       // maximum_texture2d_layered_width (H200)
      {28, 32768},       // maximum_texture2d_layered_height (H200)
      {29, 2048},        // maximum_texture2d_layered_layers (H200)
      {30, 512},         // surface_alignment
      {31, 1},           // concurrent_kernels
      {32, 0},           // ecc_enabled
      {33, 0},           // pci_bus_id
      {34, 0},           // pci_device_id
      {35, 0},           // tcc_driver
      {36, 2619000},     // memory_clock_rate
      {37, 5120},        // global_memory_bus_width
      {38, 52428800},    // l2_cache_size
      {39, 2048},        // max_threads_per_multiprocessor
      {40, 3},           // async_engine_count
      {41, 1},           // unified_addressing
      {42, 32768},       // maximum_texture1d_layered_width (H200)
      {43, 2048},        // maximum_texture1d_layered_layers (H200)
      {44, 1},           // can_tex2d_gather (H200)
      {45, 32768},       // maximum_texture2d_gather_width (H200)
      {46, 32768},       // maximum_texture2d_gather_height (H200)
      {47, 8192},        // maximum_texture3d_width_alternate (H200)
      {48, 8192},        // maximum_texture3d_height_alternate (H200)
      {49, 32768},       // maximum_texture3d_depth_alternate (H200)
      {50, 0},           // pci_domain_id
      {51, 32},          // texture_pitch_alignment
      {52, 32768},       // maximum_texturecubemap_width (H200)
      {53, 32768},       // maximum_texturecubemap_layered_width (H200)
      {54, 2046},        // maximum_texturecubemap_layered_layers (H200)
      {55, 32768},       // maximum_surface1d_width (H200)
      {56, 131072},      // maximum_surface2d_width (H200)
      {57, 65536},       // maximum_surface2d_height (H200)
      {58, 16384},       // maximum_surface3d_width (H200)
      {59, 16384},       // maximum_surface3d_height (H200)
      {60, 16384},       // maximum_surface3d_depth (H200)
      {61, 32768},       // maximum_surface1d_layered_width (H200)
      {62, 2048},        // maximum_surface1d_layered_layers (H200)
      {63, 32768},       // maximum_surface2d_layered_width (H200)
      {64, 32768},       // maximum_surface2d_layered_height (H200)
      {65, 2048},        // maximum_surface2d_layered_layers (H200)
      {66, 32768},       // maximum_surfacecubemap_width (H200)
      {67, 32768},       // maximum_surfacecubemap_layered_width (H200)
      {68, 2046},        // maximum_surfacecubemap_layered_layers (H200)
      {69, 268435456},   // maximum_texture1d_linear_width (H200)
      {70, 131072},      // maximum_texture2d_linear_width (H200)
      {71, 65000},       // maximum_texture2d_linear_height (H200)
      {72, 2097120},     // maximum_texture2d_linear_pitch (H200)
      {73, 32768},       // maximum_texture2d_mipmapped_width (H200)
      {74, 32768},       // maximum_texture2d_mipmapped_height (H200)
      {75, 9},           // compute_capability_major
      {76, 0},           // compute_capability_minor
      {77, 32768},       // maximum_texture1d_mipmapped_width (H200)
      {78, 1},           // stream_priorities_supported
      {79, 1},           // global_l1_cache_supported
      {80, 1},           // local_l1_cache_supported
      {81, 233472},      // max_shared_memory_per_multiprocessor
      {82, 65536},       // max_registers_per_multiprocessor
      {83, 1},           // managed_memory
      {84, 0},           // multi_gpu_board
      {85, 0},           // multi_gpu_board_group_id
      {86, 0},           // host_native_atomic_supported
      {87, 2},           // single_to_double_precision_perf_ratio (H200)
      {88, 0},           // pageable_memory_access
      {89, 1},           // concurrent_managed_access
      {90, 1},           // compute_preemption_supported
      {91, 0},           // can_use_host_pointer_for_registered_mem
      {92, 0},           // can_use_stream_mem_ops_v1 (H200)
      {93, 0},           // can_use_64_bit_stream_mem_ops_v1 (H200)
      {94, 0},           // can_use_stream_wait_value_nor_v1 (H200)
      {95, 1},           // cooperative_launch
      {96, 1},           // cooperative_multi_device_launch (H200)
      {97, 232448},      // max_shared_memory_per_block_optin
      {98, 0},           // can_flush_remote_writes (H200)
      {99, 1},           // host_register_supported
      {100, 0},          // pageable_memory_access_uses_host_page_tables (H200)
      {101, 0},          // direct_managed_mem_access_from_host (H200)
      {102, 1},          // virtual_address_management_supported (H200)
      {103, 1},          // handle_type_posix_file_descriptor_supported (H200)
      {104, 0},          // handle_type_win32_handle_supported (H200)
      {105, 0},          // handle_type_win32_kmt_handle_supported (H200)
      {106, 32},         // max_blocks_per_multiprocessor
      {107, 1},          // generic_compression_supported (H200)
      {108, 0},          // max_persisting_l2_cache_size
      {109, 134213632},  // max_access_policy_window_size
      {110, 1},          // gpu_direct_rdma_with_cuda_vmm_supported (H200)
      {111, 1024},       // reserved_shared_memory_per_block
      {112, 1},          // sparse_cuda_array_supported (H200)
      {113, 1},          // read_only_host_register_supported (H200)
      {114, 1},          // timeline_semaphore_interop_supported (H200)
      {115, 1},          // memory_pools_supported
      {116, 1},          // gpu_direct_rdma_supported (H200)
      {117, 1},          // gpu_direct_rdma_flush_writes_options (H200)
      {118, 100},        // gpu_direct_rdma_writes_ordering (H200)
      {119, 9},          // mempool_supported_handle_types (H200)
      {120, 1},          // cluster_launch
      {121, 1},          // deferred_mapping_cuda_array_supported (H200)
      {122, 1},          // can_use_64_bit_stream_mem_ops (H200)
      {123, 1},          // can_use_stream_wait_value_nor (H200)
      {124, 1},          // dma_buf_supported (H200)
      {125, 1},          // ipc_event_supported
      {126, 4},          // mem_sync_domain_count
      {127, 1},          // tensor_map_access_supported (H200)
      {128, 1},          // handle_type_fabric_supported (H200)
      {129, 1},          // unified_function_pointers (H200)
      {130, 0},          // numa_config
      {131, -1},         // numa_id
      {132, 0},          // multicast_supported (H200)
      {133, 0},          // mps_enabled
      {134, -1},         // host_numa_id
      {135, 0},          // d3d12_cig_supported (H200)
      {136, 0},          // mem_decompress_algorithm_mask (H200)
      {137, 0},          // mem_decompress_maximum_length (H200)
      {138, 0},          // vulkan_cig_supported (H200)
      {139, 590680286},  // gpu_pci_device_id (H200)
      {140, 415174878},  // gpu_pci_subsystem_id (H200)
      {141, 1},          // host_numa_virtual_memory_management_supported (H200)
      {142, 1},          // host_numa_memory_pools_supported (H200)
      {143, 0},          // host_numa_multinode_ipc_supported (H200)
      {144, 1},          // host_memory_pools_supported (H200)
      {145, 1},          // host_virtual_memory_management_supported (H200)
      {146, 0},          // host_alloc_dma_buf_supported (H200)
      {147, 0},          // only_partial_host_native_atomic_supported (H200)
  };
  return attrs;
}

}  // namespace rgpu::backend
