# Kernel plug-in host tests: fixture libraries in plain C built against the frozen v1 header,
# one per way a library can be good or broken, loaded by the real loader and dispatcher.
set(_fixture_src "${CMAKE_CURRENT_LIST_DIR}/plugin_fixtures/fixture_kernel.c")
set(_fixture_dir "${PROJECT_BINARY_DIR}/tests/plugin_fixtures")
set(_fixture_names "")
# name|definition|definition...
set(_fixtures
  "good_generic|FIXTURE_ID=\"generic/generic/x86_64\""
  "good_family|FIXTURE_ID=\"llama/generic/x86_64\""
  "good_model|FIXTURE_ID=\"llama/llama3/x86_64\""
  "good_model_v2|FIXTURE_ID=\"llama/llama3/x86_64_v2\""
  "other_model|FIXTURE_ID=\"qwen/qwen2/x86_64\""
  "high_score|FIXTURE_ID=\"generic/generic/x86_64\"|FIXTURE_PROBE_SCORE=90|FIXTURE_NAME=\"rms_norm_high\""
  "no_entry|FIXTURE_NO_ENTRY"
  "wrong_abi|FIXTURE_ABI_MAJOR=99"
  "wrong_result|FIXTURE_WRONG_RESULT"
  "init_fails|FIXTURE_INIT_FAILS"
  "garbage_probe|FIXTURE_PROBE_SCORE=2147483647"
  "run_fails|FIXTURE_RUN_FAILS"
  "matmul_f32|FIXTURE_ID=\"generic/generic/x86_64\"|FIXTURE_MATMUL_F32")
foreach(_f IN LISTS _fixtures)
  string(REPLACE "|" ";" _parts "${_f}")
  list(POP_FRONT _parts _name)
  set(_target spite_fixture_${_name})
  add_library(${_target} MODULE "${_fixture_src}")
  target_include_directories(${_target} PRIVATE "${CMAKE_CURRENT_LIST_DIR}/fixtures/abi_v1")
  target_compile_definitions(${_target} PRIVATE ${_parts})
  set_target_properties(${_target} PROPERTIES C_STANDARD 11 PREFIX "" OUTPUT_NAME "${_name}"
                        LIBRARY_OUTPUT_DIRECTORY "${_fixture_dir}")
  target_link_libraries(${_target} PRIVATE m)
  list(APPEND _fixture_names ${_target})
endforeach()

spite_add_catch_test(test_plugins HAS_SLOW
  SOURCES unit/dispatch/plugin_test.cpp unit/dispatch/kernel_watcher_test.cpp
  DEPS spite::dispatch spite::executor)
target_compile_definitions(test_plugins PRIVATE SPITE_FIXTURE_DIR="${_fixture_dir}")
add_dependencies(test_plugins ${_fixture_names})

spite_add_catch_test(test_spitectl_kernels
  SOURCES e2e/dispatch_test.cpp
  DEPS spite::dispatch)
target_compile_definitions(test_spitectl_kernels PRIVATE
  SPITECTL_PATH="$<TARGET_FILE:spitectl>"
  SPITE_FIXTURE_DIR="${_fixture_dir}"
  SPITE_BUILD_KERNEL_DIR="${PROJECT_BINARY_DIR}/kernels"
  SPITE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
add_dependencies(test_spitectl_kernels spitectl ${_fixture_names})
if(TARGET spite_kernel_llama_llama3_x86_64_v4)
  add_dependencies(test_spitectl_kernels spite_kernel_llama_llama3_x86_64_v4)
endif()

# spited as a real process (control socket, sd_notify, hot reload, socket activation).
spite_add_catch_test(test_spited HAS_SLOW
  SOURCES e2e/daemon_test.cpp e2e/daemon_lifecycle_test.cpp
  DEPS nlohmann_json::nlohmann_json)
target_compile_definitions(test_spited PRIVATE
  SPITED_PATH="$<TARGET_FILE:spited>"
  SPITECTL_PATH="$<TARGET_FILE:spitectl>"
  SPITE_FIXTURE_DIR="${_fixture_dir}")
add_dependencies(test_spited spited spitectl ${_fixture_names})
