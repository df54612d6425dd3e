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
# "slow", [gpu] the label "gpu", all others "cpu".
function(spite_add_catch_test target)
  cmake_parse_arguments(ARG "HAS_SLOW;HAS_GPU" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_DEPS} spite_test_support Catch2::Catch2WithMain spite_warnings)
  set_target_properties(${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/tests")
  set(env "SPITE_SHARED_DIR_DEFAULT=${SPITE_SHARED_DIR}")
  catch_discover_tests(${target} TEST_SPEC "~[slow]~[gpu]" PROPERTIES LABELS cpu ENVIRONMENT "${env}")
  if(ARG_HAS_SLOW)
    catch_discover_tests(${target} TEST_SPEC "[slow]" PROPERTIES LABELS slow ENVIRONMENT "${env}")
  endif()
  if(ARG_HAS_GPU)
    catch_discover_tests(${target} TEST_SPEC "[gpu]" PROPERTIES LABELS gpu ENVIRONMENT "${env}")
  endif()
endfunction()
