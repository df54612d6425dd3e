# Kernel plug-in tests. Included from tests/CMakeLists.txt; the plug-in targets come from
# kernels/ (include(SpiteKernels) + add_subdirectory(kernels) in the top-level CMakeLists.txt),
# which may be added before or after tests/: if kernels/ has not been configured yet, the wiring
# runs at the end of the top-level directory (cmake_language(DEFER)).
#
# test_cuda_plugin exists only when the generic CUDA plug-in is built (SPITE_GPU_ARCHS names an
# NVIDIA arch and nvcc is found). Its [gpu] case carries the ctest label "gpu" and, where no CUDA
# device is usable, warns "skipped: <reason>", which ctest reports as skipped; the other cases
# (label "cpu") run everywhere and check that init() refuses cleanly without a driver.
function(spite_kernel_plugin_tests tests_dir)
  set(plugin spite_kernel_generic_generic_sm_75)
  if(NOT TARGET ${plugin})
    return()
  endif()
  # A deferred call runs in the top-level directory, which does not see tests/' imported
  # targets and Catch.cmake's variables: find them again there (cheap, cached).
  if(NOT TARGET Catch2::Catch2WithMain)
    find_package(Catch2 2 CONFIG REQUIRED)
    include(Catch)
  endif()
  spite_add_catch_test(test_cuda_plugin
    SOURCES "${tests_dir}/unit/dispatch/cuda_plugin_test.cpp"
    DEPS ${CMAKE_DL_LIBS})
  # The [gpu] case prints "skipped: <reason>" without a usable device: ctest reports it skipped.
  catch_discover_tests(test_cuda_plugin TEST_SPEC "[gpu]"
    PROPERTIES LABELS gpu SKIP_REGULAR_EXPRESSION "skipped: ")
  get_target_property(id ${plugin} SPITE_KERNEL_ID)
  target_include_directories(test_cuda_plugin PRIVATE "${PROJECT_SOURCE_DIR}/kernels/abi")
  target_compile_definitions(test_cuda_plugin PRIVATE
    "SPITE_CUDA_PLUGIN_PATH=\"$<TARGET_FILE:${plugin}>\""
    "SPITE_CUDA_PLUGIN_ID=\"${id}\"")
  if(TARGET CUDA::cudart_static)
    # Device buffers for the [gpu] case. Static, like the plug-in: no libcudart.so needed.
    target_link_libraries(test_cuda_plugin PRIVATE CUDA::cudart_static)
    target_compile_definitions(test_cuda_plugin PRIVATE SPITE_TEST_HAS_CUDART=1)
  else()
    target_compile_definitions(test_cuda_plugin PRIVATE SPITE_TEST_HAS_CUDART=0)
  endif()
  add_dependencies(test_cuda_plugin ${plugin})
endfunction()

get_property(_spite_kernels_configured GLOBAL PROPERTY SPITE_KERNELS_CONFIGURED)
if(_spite_kernels_configured)
  spite_kernel_plugin_tests("${CMAKE_CURRENT_LIST_DIR}")
else()
  # DEFER evaluates its arguments when the call runs; EVAL pins today's values.
  cmake_language(EVAL CODE "
    cmake_language(DEFER DIRECTORY [[${PROJECT_SOURCE_DIR}]] CALL spite_kernel_plugin_tests
                   [[${CMAKE_CURRENT_LIST_DIR}]])")
endif()
