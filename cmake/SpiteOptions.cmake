# Build options and toolchain settings shared by every target.
option(SPITE_BUILD_TESTS "Build the test suite" ON)
option(SPITE_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(SPITE_FUZZ "Build libFuzzer targets (needs clang)" OFF)
option(SPITE_WERROR "Treat warnings as errors" OFF)
option(SPITE_KERNELS_ONLY "Build only the CPU kernels (core, gguf, dispatch) and their tests, e.g. when cross-building" OFF)

# ccache on a 2-core machine turns most rebuilds into cache hits.
find_program(SPITE_CCACHE ccache)
# The test executables use a precompiled header (tests/CMakeLists.txt), which ccache caches only
# with these sloppiness settings (its documented requirement for precompiled headers); without
# them every test file compiled uncached.
if(SPITE_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_C_COMPILER_LAUNCHER "${SPITE_CCACHE}")
  set(CMAKE_CXX_COMPILER_LAUNCHER "${CMAKE_COMMAND}" -E env "CCACHE_SLOPPINESS=pch_defines,time_macros" "${SPITE_CCACHE}")
endif()

add_library(spite_warnings INTERFACE)
target_compile_options(spite_warnings INTERFACE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers
                                                 $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local>)
# Release builds at -O3 (CMake's default), which the kernels, the forward pass, the GGUF reader
# and the benchmark probes want; code whose speed comes from its algorithms rather than from
# vectorised loops (HTTP, control socket, config, chat templates, tokenizer, grammar, sampling,
# spitectl) links this for -O2: 15-20 % less compile time on its template-heavy files
# (completions.cpp 30 -> 25 s).
add_library(spite_plain_optimization INTERFACE)
target_compile_options(spite_plain_optimization INTERFACE $<$<CONFIG:Release>:-O2>)

if(SPITE_WERROR)
  target_compile_options(spite_warnings INTERFACE -Werror)
endif()

if(SPITE_FUZZ)
  # Every library gets coverage instrumentation; the fuzzer binaries add the libFuzzer driver.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

if(SPITE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
endif()

# Where tests find the shared reference data (models, golden outputs); SPITE_SHARED_DIR in the
# environment overrides it at run time.
set(SPITE_SHARED_DIR "${PROJECT_SOURCE_DIR}/../shared" CACHE PATH "Shared test data folder")
