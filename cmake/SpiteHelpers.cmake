# spite_add_library(NAME ALIAS SOURCES... [DEPS ...]): one library per layer, exported as the
# alias (spite::core, spite::gguf, ...), with its public headers under include/.
function(spite_add_library name alias)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  add_library(${alias} ALIAS ${name})
  target_include_directories(${name} PUBLIC "${CMAKE_CURRENT_SOURCE_DIR}/include"
                                     PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}/src")
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE spite_warnings ${ARG_PRIVATE_DEPS})
endfunction()

# spite_add_catch_test(TARGET SOURCES... [DEPS ...] [SLOW]): a Catch2 v2 test executable whose
# test cases are registered with ctest one by one. Test cases tagged [slow] get the ctest label
# "slow", [gpu] the label "gpu", all others "cpu"; every case also carries the executable's name
# as a label, so that `ctest -L '^test_gguf$'` runs one executable's cases (CI's sanitizer step).
function(spite_add_catch_test target)
  cmake_parse_arguments(ARG "HAS_SLOW;HAS_GPU" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_DEPS} spite_test_support Catch2::Catch2WithMain spite_warnings)
  target_precompile_headers(${target} REUSE_FROM spite_test_pch)
  set_target_properties(${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/tests")
  set(env "SPITE_SHARED_DIR_DEFAULT=${SPITE_SHARED_DIR}")
  set(kinds cpu)
  catch_discover_tests(${target} TEST_SPEC "~[slow]~[gpu]" TEST_LIST ${target}_cpu_cases
                       PROPERTIES LABELS cpu ENVIRONMENT "${env}")
  if(ARG_HAS_SLOW)
    list(APPEND kinds slow)
    catch_discover_tests(${target} TEST_SPEC "[slow]" TEST_LIST ${target}_slow_cases
                         PROPERTIES LABELS slow ENVIRONMENT "${env}")
  endif()
  if(ARG_HAS_GPU)
    list(APPEND kinds gpu)
    catch_discover_tests(${target} TEST_SPEC "[gpu]" TEST_LIST ${target}_gpu_cases
                         PROPERTIES LABELS gpu ENVIRONMENT "${env}")
  endif()
  # The executable's name as a second label. Not through PROPERTIES above: Catch's discovery
  # script splits a list value there into separate arguments. The cases are known only once the
  # executable is built, so this runs where ctest reads them, after the discovery's own files
  # (which define the ${target}_<kind>_cases lists). ctest knows set_tests_properties, not
  # set_property, so both labels are set again.
  set(script "${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake")
  set(body "")
  foreach(kind IN LISTS kinds)
    string(APPEND body "if(${target}_${kind}_cases)\n"
                       "  set_tests_properties(\${${target}_${kind}_cases} PROPERTIES LABELS \"${kind};${target}\")\n"
                       "endif()\n")
  endforeach()
  file(WRITE "${script}" "${body}")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${script}")
endfunction()
