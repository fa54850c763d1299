# The CUDA programs, built by nvcc (included by tests/cuda/CMakeLists.txt unless another build's
# are reused).
set(RGPU_CUDA_PROGRAMS memcpy_roundtrip errors pointer_attrs device_query unsupported hold_memory
    mem_info kernels_basic kernels_symbols kernels_printf kernels_launch_loop kernels_api
    kernel_no_host_impl async_streams async_stress overlap multi_gpu big_transfer stress_mix flood_async
    limits liveness stream_waits va_windows devmem graphs graphs_query graphs_more graphs_mem pools ipc
    managed arrays misc ipc_events managed_vars pool_share vmm_runtime cross_waits peer_copies graphs_cond
    tenant_ipc module_globals small_loop pinned_args)
set(RGPU_NVCC ${RGPU_CUDA_ROOT}/bin/nvcc)
set(RGPU_NVCC_FLAGS -cudart shared -std=c++17 -O2 -arch=${RGPU_CUDA_ARCH} -Wno-deprecated-gpu-targets)
set(RGPU_CUDA_BIN ${PROJECT_BINARY_DIR}/cuda)
foreach(p ${RGPU_CUDA_PROGRAMS})
  add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/${p}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
    COMMAND ${RGPU_NVCC} ${RGPU_NVCC_FLAGS} -I${CMAKE_CURRENT_SOURCE_DIR}
            -o ${RGPU_CUDA_BIN}/${p} ${CMAKE_CURRENT_SOURCE_DIR}/${p}.cu
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${p}.cu ${CMAKE_CURRENT_SOURCE_DIR}/check.h
            ${CMAKE_CURRENT_SOURCE_DIR}/async_common.h
    COMMENT "nvcc ${p}.cu"
    VERBATIM)
  list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/${p})
endforeach()
# The asynchrony tests again, built with --default-stream per-thread (the _ptsz/_ptds entry points).
foreach(p async_streams async_stress)
  add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/${p}_ptds
    COMMAND ${RGPU_NVCC} ${RGPU_NVCC_FLAGS} --default-stream per-thread -I${CMAKE_CURRENT_SOURCE_DIR}
            -o ${RGPU_CUDA_BIN}/${p}_ptds ${CMAKE_CURRENT_SOURCE_DIR}/${p}.cu
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${p}.cu ${CMAKE_CURRENT_SOURCE_DIR}/check.h
            ${CMAKE_CURRENT_SOURCE_DIR}/async_common.h
    COMMENT "nvcc --default-stream per-thread ${p}.cu"
    VERBATIM)
  list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/${p}_ptds)
endforeach()
# A few programs again with NVIDIA's runtime linked in statically (nvcc's default): they load
# libcuda.so.1 themselves, so through rgpu they run NVIDIA's runtime on rgpu's driver.
foreach(p memcpy_roundtrip kernels_basic async_streams errors)
  add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/${p}_static
    COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
    COMMAND ${RGPU_NVCC} -cudart static -std=c++17 -O2 -arch=${RGPU_CUDA_ARCH}
            -Wno-deprecated-gpu-targets -I${CMAKE_CURRENT_SOURCE_DIR}
            -o ${RGPU_CUDA_BIN}/${p}_static ${CMAKE_CURRENT_SOURCE_DIR}/${p}.cu
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${p}.cu ${CMAKE_CURRENT_SOURCE_DIR}/check.h
            ${CMAKE_CURRENT_SOURCE_DIR}/async_common.h
    COMMENT "nvcc -cudart static ${p}.cu"
    VERBATIM)
  list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/${p}_static)
endforeach()
# launch: launch_lib.cu as a fat binary and as PTX text, embedded as data (bin2c) for its
# library API checks.
set(RGPU_LAUNCH_GEN ${PROJECT_BINARY_DIR}/cuda_gen)
add_custom_command(OUTPUT ${RGPU_LAUNCH_GEN}/launch_lib_fatbin.h ${RGPU_LAUNCH_GEN}/launch_lib_ptx.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_LAUNCH_GEN}
  COMMAND ${RGPU_NVCC} -fatbin -arch=${RGPU_CUDA_ARCH} -Wno-deprecated-gpu-targets
          -o ${RGPU_LAUNCH_GEN}/launch_lib.fatbin ${CMAKE_CURRENT_SOURCE_DIR}/launch_lib.cu
  COMMAND ${RGPU_NVCC} -ptx -arch=${RGPU_CUDA_ARCH} -Wno-deprecated-gpu-targets
          -o ${RGPU_LAUNCH_GEN}/launch_lib.ptx ${CMAKE_CURRENT_SOURCE_DIR}/launch_lib.cu
  COMMAND sh -c "'${RGPU_CUDA_ROOT}/bin/bin2c' --const --name lib_fatbin '${RGPU_LAUNCH_GEN}/launch_lib.fatbin' > '${RGPU_LAUNCH_GEN}/launch_lib_fatbin.h'"
  COMMAND sh -c "'${RGPU_CUDA_ROOT}/bin/bin2c' --const --name lib_ptx --padd 0 '${RGPU_LAUNCH_GEN}/launch_lib.ptx' > '${RGPU_LAUNCH_GEN}/launch_lib_ptx.h'"
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/launch_lib.cu
  COMMENT "nvcc launch_lib.cu (fat binary and PTX, embedded by bin2c)"
  VERBATIM)
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/launch
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
  COMMAND ${RGPU_NVCC} ${RGPU_NVCC_FLAGS} -I${CMAKE_CURRENT_SOURCE_DIR} -I${RGPU_LAUNCH_GEN}
          -o ${RGPU_CUDA_BIN}/launch ${CMAKE_CURRENT_SOURCE_DIR}/launch.cu
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/launch.cu ${CMAKE_CURRENT_SOURCE_DIR}/check.h
          ${RGPU_LAUNCH_GEN}/launch_lib_fatbin.h ${RGPU_LAUNCH_GEN}/launch_lib_ptx.h
  COMMENT "nvcc launch.cu"
  VERBATIM)
list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/launch)
# driver_api: the driver API alone (libcuda.so.1), host code linked against the toolkit's stub
# libcuda.so (no run path: natively it loads NVIDIA's driver, through rgpu ours), with
# launch_lib.cu as a cubin, a fat binary and PTX.
add_custom_command(OUTPUT ${RGPU_LAUNCH_GEN}/launch_lib_cubin.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_LAUNCH_GEN}
  COMMAND ${RGPU_NVCC} -cubin -arch=${RGPU_CUDA_ARCH} -Wno-deprecated-gpu-targets
          -o ${RGPU_LAUNCH_GEN}/launch_lib.cubin ${CMAKE_CURRENT_SOURCE_DIR}/launch_lib.cu
  COMMAND sh -c "'${RGPU_CUDA_ROOT}/bin/bin2c' --const --name lib_cubin '${RGPU_LAUNCH_GEN}/launch_lib.cubin' > '${RGPU_LAUNCH_GEN}/launch_lib_cubin.h'"
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/launch_lib.cu
  COMMENT "nvcc -cubin launch_lib.cu (embedded by bin2c)"
  VERBATIM)
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/driver_api
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
  COMMAND ${RGPU_NVCC} -cudart none -std=c++17 -O2 -I${RGPU_LAUNCH_GEN}
          -o ${RGPU_CUDA_BIN}/driver_api ${CMAKE_CURRENT_SOURCE_DIR}/driver_api.cpp
          -L${RGPU_CUDA_ROOT}/lib64/stubs -lcuda
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/driver_api.cpp ${CMAKE_CURRENT_SOURCE_DIR}/driver_check.h ${RGPU_LAUNCH_GEN}/launch_lib_cubin.h
          ${RGPU_LAUNCH_GEN}/launch_lib_fatbin.h ${RGPU_LAUNCH_GEN}/launch_lib_ptx.h
  COMMENT "nvcc driver_api.cpp (driver API, -lcuda)"
  VERBATIM)
list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/driver_api)
# nvrtc_jit: NVRTC (PTX and cubin) and nvJitLink on the client, modules loaded through the driver
# API; the toolkit's libnvrtc/libnvJitLink found by run path.
string(REPLACE "sm_" "compute_" RGPU_CUDA_COMPUTE "${RGPU_CUDA_ARCH}")
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/nvrtc_jit
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
  COMMAND ${RGPU_NVCC} -cudart none -std=c++17 -O2 -DJIT_ARCH="${RGPU_CUDA_ARCH}"
          -DJIT_COMPUTE="${RGPU_CUDA_COMPUTE}"
          -o ${RGPU_CUDA_BIN}/nvrtc_jit ${CMAKE_CURRENT_SOURCE_DIR}/nvrtc_jit.cpp
          -L${RGPU_CUDA_ROOT}/lib64/stubs -lcuda -L${RGPU_CUDA_ROOT}/lib64 -lnvrtc -lnvJitLink
          -Xlinker -rpath=${RGPU_CUDA_ROOT}/lib64
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/nvrtc_jit.cpp ${CMAKE_CURRENT_SOURCE_DIR}/driver_check.h
  COMMENT "nvcc nvrtc_jit.cpp (NVRTC, nvJitLink, driver API)"
  VERBATIM)
list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/nvrtc_jit)
# sync_call: one synchronous call by the runtime and by the driver API, timed (a measurement for
# scripts/gpu-e2e.sh, not a test).
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/sync_call
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
  COMMAND ${RGPU_NVCC} ${RGPU_NVCC_FLAGS} -o ${RGPU_CUDA_BIN}/sync_call
          ${CMAKE_CURRENT_SOURCE_DIR}/sync_call.cu -L${RGPU_CUDA_ROOT}/lib64/stubs -lcuda
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/sync_call.cu
  COMMENT "nvcc sync_call.cu (runtime and driver API)"
  VERBATIM)
list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/sync_call)
# export_slots: private export-table slots NVIDIA's libraries call, through cuGetExportTable.
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/export_slots
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
  COMMAND ${RGPU_NVCC} -cudart none -std=c++17 -O2
          -o ${RGPU_CUDA_BIN}/export_slots ${CMAKE_CURRENT_SOURCE_DIR}/export_slots.cpp
          -L${RGPU_CUDA_ROOT}/lib64/stubs -lcuda
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/export_slots.cpp
  COMMENT "nvcc export_slots.cpp (private export-table slots, -lcuda)"
  VERBATIM)
list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/export_slots)
# driver_vmm: virtual memory management through the driver API, built like driver_api.
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/driver_vmm
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
  COMMAND ${RGPU_NVCC} -cudart none -std=c++17 -O2 -I${RGPU_LAUNCH_GEN}
          -o ${RGPU_CUDA_BIN}/driver_vmm ${CMAKE_CURRENT_SOURCE_DIR}/driver_vmm.cpp
          -L${RGPU_CUDA_ROOT}/lib64/stubs -lcuda
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/driver_vmm.cpp ${CMAKE_CURRENT_SOURCE_DIR}/driver_check.h ${RGPU_LAUNCH_GEN}/launch_lib_cubin.h
  COMMENT "nvcc driver_vmm.cpp (driver API virtual memory management, -lcuda)"
  VERBATIM)
list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/driver_vmm)
# nvidia_libs: NVIDIA's cuBLAS, cuBLASLt, cuFFT, cuRAND, cuSOLVER and cuSPARSE from the toolkit, found through a run path
# (RUNPATH: LD_LIBRARY_PATH still comes first, so rgpu's runtime and driver replace NVIDIA's).
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/nvidia_libs
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
  COMMAND ${RGPU_NVCC} ${RGPU_NVCC_FLAGS} -I${CMAKE_CURRENT_SOURCE_DIR}
          -o ${RGPU_CUDA_BIN}/nvidia_libs ${CMAKE_CURRENT_SOURCE_DIR}/nvidia_libs.cu
          -lcublas -lcublasLt -lcufft -lcurand -lcusolver -lcusparse -Xlinker --enable-new-dtags
          -Xlinker -rpath=${RGPU_CUDA_ROOT}/lib64
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/nvidia_libs.cu ${CMAKE_CURRENT_SOURCE_DIR}/check.h
  COMMENT "nvcc nvidia_libs.cu (cuBLAS, cuBLASLt, cuFFT, cuRAND, cuSOLVER, cuSPARSE)"
  VERBATIM)
list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/nvidia_libs)
# managed_vars: managed_lib.cu as a fat binary file, for cudaLibraryLoadFromFile.
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/managed_lib.fatbin
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
  COMMAND ${RGPU_NVCC} -fatbin -arch=${RGPU_CUDA_ARCH} -Wno-deprecated-gpu-targets
          -o ${RGPU_CUDA_BIN}/managed_lib.fatbin ${CMAKE_CURRENT_SOURCE_DIR}/managed_lib.cu
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/managed_lib.cu
  COMMENT "nvcc -fatbin managed_lib.cu"
  VERBATIM)
list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/managed_lib.fatbin)
# load_module: module images from files through the driver API, built like driver_api.
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/load_module
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
  COMMAND ${RGPU_NVCC} -cudart none -std=c++17 -O2
          -o ${RGPU_CUDA_BIN}/load_module ${CMAKE_CURRENT_SOURCE_DIR}/load_module.cpp
          -L${RGPU_CUDA_ROOT}/lib64/stubs -lcuda
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/load_module.cpp
  COMMENT "nvcc load_module.cpp (driver API module loads, -lcuda)"
  VERBATIM)
list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/load_module)
# driver_graphs: graphs and stream capture through the driver API alone, built like driver_api.
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/driver_graphs
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
  COMMAND ${RGPU_NVCC} -cudart none -std=c++17 -O2 -I${RGPU_LAUNCH_GEN}
          -o ${RGPU_CUDA_BIN}/driver_graphs ${CMAKE_CURRENT_SOURCE_DIR}/driver_graphs.cpp
          -L${RGPU_CUDA_ROOT}/lib64/stubs -lcuda
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/driver_graphs.cpp ${CMAKE_CURRENT_SOURCE_DIR}/driver_check.h ${RGPU_LAUNCH_GEN}/launch_lib_cubin.h
  COMMENT "nvcc driver_graphs.cpp (driver API graphs, -lcuda)"
  VERBATIM)
list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/driver_graphs)
# driver_libs: driver calls NVIDIA's libraries need (tensor maps, occupancy with a callback, stream
# memory operations, small calls, linking), built like driver_api.
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/driver_libs
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
  COMMAND ${RGPU_NVCC} -cudart none -std=c++17 -O2 -I${RGPU_LAUNCH_GEN}
          -o ${RGPU_CUDA_BIN}/driver_libs ${CMAKE_CURRENT_SOURCE_DIR}/driver_libs.cpp
          -L${RGPU_CUDA_ROOT}/lib64/stubs -lcuda
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/driver_libs.cpp ${CMAKE_CURRENT_SOURCE_DIR}/driver_check.h ${RGPU_LAUNCH_GEN}/launch_lib_cubin.h
          ${RGPU_LAUNCH_GEN}/launch_lib_ptx.h
  COMMENT "nvcc driver_libs.cpp (driver API for NVIDIA's libraries, -lcuda)"
  VERBATIM)
list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/driver_libs)
# mixed_apis: the runtime and the driver API on the same objects (one client core per process),
# -cudart shared and the toolkit's stub libcuda.so.
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/mixed_apis
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
  COMMAND ${RGPU_NVCC} -cudart shared -std=c++17 -O2
          -o ${RGPU_CUDA_BIN}/mixed_apis ${CMAKE_CURRENT_SOURCE_DIR}/mixed_apis.cpp
          -L${RGPU_CUDA_ROOT}/lib64/stubs -lcuda
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/mixed_apis.cpp
  COMMENT "nvcc mixed_apis.cpp (runtime and driver API, -cudart shared -lcuda)"
  VERBATIM)
list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/mixed_apis)
# notify: asynchronous notifications through the runtime and the driver, built like mixed_apis.
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/notify
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
  COMMAND ${RGPU_NVCC} -cudart shared -std=c++17 -O2
          -o ${RGPU_CUDA_BIN}/notify ${CMAKE_CURRENT_SOURCE_DIR}/notify.cpp
          -L${RGPU_CUDA_ROOT}/lib64/stubs -lcuda
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/notify.cpp
  COMMENT "nvcc notify.cpp (async notifications, -cudart shared -lcuda)"
  VERBATIM)
list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/notify)
# Start-up costs (tests/integration/startup_test.cc).  startup_many: many fat binaries (startup_part.cu
# compiled three times, each an image of its own) and one kernel used; startup_blas: cublasCreate
# and one SGEMM with the toolkit's cuBLAS; startup_image: lazy modules through the driver API,
# built like driver_api.
set(RGPU_STARTUP_PARTS)
foreach(i 1 2 3)
  add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/startup_part${i}.o
    COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
    COMMAND ${RGPU_NVCC} ${RGPU_NVCC_FLAGS} -DPART=${i} -c
            -o ${RGPU_CUDA_BIN}/startup_part${i}.o ${CMAKE_CURRENT_SOURCE_DIR}/startup_part.cu
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/startup_part.cu
    COMMENT "nvcc -DPART=${i} startup_part.cu"
    VERBATIM)
  list(APPEND RGPU_STARTUP_PARTS ${RGPU_CUDA_BIN}/startup_part${i}.o)
endforeach()
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/startup_many
  COMMAND ${RGPU_NVCC} ${RGPU_NVCC_FLAGS} -I${CMAKE_CURRENT_SOURCE_DIR}
          -o ${RGPU_CUDA_BIN}/startup_many ${CMAKE_CURRENT_SOURCE_DIR}/startup_many.cu
          ${RGPU_STARTUP_PARTS}
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/startup_many.cu ${CMAKE_CURRENT_SOURCE_DIR}/check.h
          ${RGPU_STARTUP_PARTS}
  COMMENT "nvcc startup_many.cu startup_part{1,2,3}.o"
  VERBATIM)
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/startup_blas
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
  COMMAND ${RGPU_NVCC} ${RGPU_NVCC_FLAGS} -I${CMAKE_CURRENT_SOURCE_DIR}
          -o ${RGPU_CUDA_BIN}/startup_blas ${CMAKE_CURRENT_SOURCE_DIR}/startup_blas.cu
          -lcublas -Xlinker --enable-new-dtags -Xlinker -rpath=${RGPU_CUDA_ROOT}/lib64
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/startup_blas.cu ${CMAKE_CURRENT_SOURCE_DIR}/check.h
  COMMENT "nvcc startup_blas.cu (cuBLAS)"
  VERBATIM)
add_custom_command(OUTPUT ${RGPU_CUDA_BIN}/startup_image
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RGPU_CUDA_BIN}
  COMMAND ${RGPU_NVCC} -cudart none -std=c++17 -O2 -I${RGPU_LAUNCH_GEN}
          -o ${RGPU_CUDA_BIN}/startup_image ${CMAKE_CURRENT_SOURCE_DIR}/startup_image.cpp
          -L${RGPU_CUDA_ROOT}/lib64/stubs -lcuda
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/startup_image.cpp ${CMAKE_CURRENT_SOURCE_DIR}/driver_check.h
          ${RGPU_LAUNCH_GEN}/launch_lib_cubin.h ${RGPU_LAUNCH_GEN}/launch_lib_fatbin.h
  COMMENT "nvcc startup_image.cpp (driver API, -lcuda)"
  VERBATIM)
list(APPEND RGPU_CUDA_OUTPUTS ${RGPU_CUDA_BIN}/startup_many ${RGPU_CUDA_BIN}/startup_blas
     ${RGPU_CUDA_BIN}/startup_image)
add_custom_target(cuda_programs ALL DEPENDS ${RGPU_CUDA_OUTPUTS})
