# spite::dispatch tests: device detection, the card table; spitectl devices / cards.
spite_add_catch_test(test_devices
  SOURCES unit/dispatch/devices_test.cpp
  DEPS spite::dispatch)
target_compile_definitions(test_devices PRIVATE SPITECTL_PATH="$<TARGET_FILE:spitectl>")
add_dependencies(test_devices spitectl)

# The built-in CPU kernels: SIMD matmuls against the reference implementations (internal header).
spite_add_catch_test(test_cpu_kernels
  SOURCES unit/dispatch/cpu_kernels_test.cpp unit/dispatch/fetch_distances_test.cpp unit/dispatch/simd_math_test.cpp unit/dispatch/load_workers_test.cpp
          unit/dispatch/cpu_ops_test.cpp
  DEPS spite::dispatch)
target_include_directories(test_cpu_kernels PRIVATE "${PROJECT_SOURCE_DIR}/daemon/dispatch/src")
# The scalar definitions the tests write out keep each multiply and add apart, as the kernels'
# library does (FMA-capable targets such as AArch64 would otherwise contract them).
target_compile_options(test_cpu_kernels PRIVATE -ffp-contract=off)

# Flash attention: its SIMD pieces bit for bit, both algorithms against exact attention.
spite_add_catch_test(test_flash_attention
  SOURCES unit/dispatch/flash_attention_test.cpp
  DEPS spite::dispatch)
target_include_directories(test_flash_attention PRIVATE "${PROJECT_SOURCE_DIR}/daemon/dispatch/src")
target_compile_options(test_flash_attention PRIVATE -ffp-contract=off)
