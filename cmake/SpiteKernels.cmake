# Kernel plug-in build: options, GPU arch selection and spite_add_kernel_library().
#
# Included once from the top-level CMakeLists.txt (file scope, because enable_language(CUDA)
# must run there), before add_subdirectory(kernels):
#
#   include(SpiteKernels)
#   add_subdirectory(kernels)
#
# Options (cache variables):
#   SPITE_MODELS     "llama/llama4;qwen/qwen3_5": the kernels/<family>/<model>/ folders to build
#                    ("llama" alone = every llama model). Empty (default): every folder present.
#                    kernels/generic/generic/ (the fallbacks) is always built.
#   SPITE_GPU_ARCHS  "RTX_4090;sm_80;gfx1030": card names or aliases (the card table,
#                    daemon/dispatch/data/cards.tsv via cmake/cards.cmake) or archs. Empty
#                    (default): no GPU plug-in is built, and CUDA/HIP are not even looked for,
#                    so a plain configure stays fast on a machine that has nvcc.
#   SPITE_CUDA       AUTO (default) | ON | OFF. AUTO builds CUDA plug-ins when SPITE_GPU_ARCHS
#                    names an NVIDIA arch and check_language(CUDA) finds nvcc; ON makes both
#                    mandatory.
#   SPITE_HIP        AUTO (default) | ON | OFF. The same for AMD archs and hipcc (driven through
#                    add_custom_command: enable_language(HIP) does not work with Debian's ROCm).
#   SPITE_CHECK_KERNEL_TEMPLATE  OFF (default): ON compiles kernels/llama/llama4/sm_89/
#                    KERNEL_TEMPLATE.cu (CUDA on and an arch >= sm_89 selected) as a check; it is
#                    never installed.
#
# Which arch directory is built (kernels/CMakeLists.txt asks spite_kernel_arch_plan()):
#   sm_XY      (CUDA) code that needs compute capability >= X.Y. Built when some selected NVIDIA
#              arch is >= XY, compiled for every such selected arch (SASS for each, plus PTX of
#              the newest so later cards can JIT it). sm_XYa / sm_XYf (arch-specific features)
#              are built only for exactly that arch.
#   gfxNNNN    (HIP) built when exactly that arch is selected.
#   rdna3, cdna2, ... (HIP) an AMD family (cards.cmake): built for the selected archs in it.
#   x86_64*, avx*, aarch64*, arm64*, neon*, sve*, riscv64*, rvv*, cpu  (CPU) always built when
#              the host processor fits (x86_64_vN gets -march=x86-64-vN).
#   xe_hpg, xe2_hpg, xe_hpc (Level Zero) not buildable yet: reported and skipped.
include_guard(GLOBAL)
include(CheckLanguage)
include("${CMAKE_CURRENT_LIST_DIR}/cards.cmake")

set(SPITE_MODELS "" CACHE STRING "Kernel model folders to build (family/model;...); empty = all present")
set(SPITE_GPU_ARCHS "" CACHE STRING "GPU cards or archs to build plug-ins for (RTX_4090;sm_80;gfx1030); empty = none")
set(SPITE_CUDA AUTO CACHE STRING "Build CUDA kernel plug-ins: AUTO, ON or OFF")
set_property(CACHE SPITE_CUDA PROPERTY STRINGS AUTO ON OFF)
set(SPITE_HIP AUTO CACHE STRING "Build HIP kernel plug-ins (hipcc): AUTO, ON or OFF")
set_property(CACHE SPITE_HIP PROPERTY STRINGS AUTO ON OFF)
option(SPITE_CHECK_KERNEL_TEMPLATE "Compile kernels/llama/llama4/sm_89/KERNEL_TEMPLATE.cu as a check" OFF)

set(SPITE_KERNELS_SOURCE_DIR "${PROJECT_SOURCE_DIR}/kernels")
set(SPITE_KERNEL_ABI_DIR "${SPITE_KERNELS_SOURCE_DIR}/abi")

foreach(_opt SPITE_CUDA SPITE_HIP)
  string(TOUPPER "${${_opt}}" _val)
  if(NOT _val MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${_opt}=${${_opt}}: use AUTO, ON or OFF")
  endif()
  set(_spite_${_opt} "${_val}")
endforeach()

# ---- SPITE_GPU_ARCHS -> NVIDIA compute capabilities ("80", "89", "90a"), AMD gfx archs, others.
# Same rules as spite::dispatch::resolve_gpu_archs() (`spitectl cards --resolve LIST`): an entry
# is an arch (sm_XY[a|f], gfxNNNN, or an arch of the card table such as xe_hpg) or a card name or
# alias; ',' separates like ';'.
set(SPITE_SELECTED_CUDA_ARCHS "")
set(SPITE_SELECTED_HIP_ARCHS "")
set(SPITE_SELECTED_OTHER_ARCHS "")
string(REPLACE "," ";" _spite_gpu_entries "${SPITE_GPU_ARCHS}")
foreach(_entry IN LISTS _spite_gpu_entries)
  string(STRIP "${_entry}" _entry)
  string(TOLOWER "${_entry}" _lower)
  if(_entry STREQUAL "")
    continue()
  endif()
  set(_arch "")
  if(_lower MATCHES "^sm_[0-9][0-9][0-9]?[af]?$" OR _lower MATCHES "^gfx[0-9][0-9]?[0-9a-f][0-9a-f]$")
    set(_arch "${_lower}")
  else()
    spite_card_is_arch("${_lower}" _is_arch)
    if(_is_arch)
      set(_arch "${_lower}")
    else()
      spite_card_lookup("${_entry}" _vendor _arch _mem SUPPORTED _supported NOTE _note CANONICAL _card)
      if(NOT _arch)
        spite_card_suggest("${_entry}" _like)
        if(_like)
          list(JOIN _like ", " _like)
          set(_like "; did you mean ${_like}?")
        else()
          set(_like " (spitectl cards lists the known cards)")
        endif()
        message(FATAL_ERROR "SPITE_GPU_ARCHS: unknown GPU card or arch '${_entry}'${_like}")
      endif()
      if(NOT _supported STREQUAL "yes")
        message(FATAL_ERROR "SPITE_GPU_ARCHS: card ${_card} cannot be targeted: ${_note}")
      endif()
    endif()
  endif()
  if(_arch MATCHES "^sm_(.+)$")
    list(APPEND SPITE_SELECTED_CUDA_ARCHS "${CMAKE_MATCH_1}")
  elseif(_arch MATCHES "^gfx")
    list(APPEND SPITE_SELECTED_HIP_ARCHS "${_arch}")
  else()
    list(APPEND SPITE_SELECTED_OTHER_ARCHS "${_arch}")
  endif()
endforeach()
foreach(_list SPITE_SELECTED_CUDA_ARCHS SPITE_SELECTED_HIP_ARCHS SPITE_SELECTED_OTHER_ARCHS)
  list(REMOVE_DUPLICATES ${_list})
  list(SORT ${_list} COMPARE NATURAL)
endforeach()
if(SPITE_SELECTED_OTHER_ARCHS)
  message(WARNING "SPITE_GPU_ARCHS: no GPU plug-in build support for ${SPITE_SELECTED_OTHER_ARCHS} "
                  "(Intel Level Zero plug-ins are not buildable yet); those cards run the CPU fallback")
endif()

# ---- CUDA: looked for only when an NVIDIA arch is selected (check_language runs nvcc: seconds)
set(SPITE_CUDA_ENABLED OFF)
if(_spite_SPITE_CUDA STREQUAL "ON" AND NOT SPITE_SELECTED_CUDA_ARCHS)
  message(FATAL_ERROR "SPITE_CUDA=ON but SPITE_GPU_ARCHS names no NVIDIA card or sm_XY arch "
                      "(e.g. -DSPITE_GPU_ARCHS=RTX_4090)")
endif()
if(SPITE_SELECTED_CUDA_ARCHS AND NOT _spite_SPITE_CUDA STREQUAL "OFF")
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Only for CMake's compiler checks; each plug-in sets its own list.
      list(GET SPITE_SELECTED_CUDA_ARCHS 0 _first)
      set(CMAKE_CUDA_ARCHITECTURES "${_first}")
    endif()
    if(SPITE_CCACHE AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
      set(CMAKE_CUDA_COMPILER_LAUNCHER "${SPITE_CCACHE}")
    endif()
    enable_language(CUDA)
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA"
       AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
      # CMake 3.25 does not know that nvcc >= 12 speaks C++20 (CUDA_STANDARD 20 would fail).
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
      list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
    endif()
    find_package(CUDAToolkit QUIET)
    set(SPITE_CUDA_ENABLED ON)
    message(STATUS "spite kernels: CUDA ${CMAKE_CUDA_COMPILER_VERSION} for sm ${SPITE_SELECTED_CUDA_ARCHS}")
  elseif(_spite_SPITE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SPITE_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER or "
                        "put nvcc on PATH)")
  else()
    message(WARNING "SPITE_GPU_ARCHS selects sm ${SPITE_SELECTED_CUDA_ARCHS} but nvcc was not found: "
                    "no CUDA plug-ins (SPITE_CUDA=AUTO)")
  endif()
elseif(SPITE_SELECTED_CUDA_ARCHS)
  message(STATUS "spite kernels: SPITE_CUDA=OFF, NVIDIA archs ${SPITE_SELECTED_CUDA_ARCHS} ignored")
endif()

# ---- HIP: hipcc as an external tool
set(SPITE_HIP_ENABLED OFF)
if(_spite_SPITE_HIP STREQUAL "ON" AND NOT SPITE_SELECTED_HIP_ARCHS)
  message(FATAL_ERROR "SPITE_HIP=ON but SPITE_GPU_ARCHS names no AMD card or gfx arch "
                      "(e.g. -DSPITE_GPU_ARCHS=RX_6800_XT)")
endif()
if(SPITE_SELECTED_HIP_ARCHS AND NOT _spite_SPITE_HIP STREQUAL "OFF")
  find_program(SPITE_HIPCC hipcc HINTS "$ENV{ROCM_PATH}/bin" /opt/rocm/bin)
  if(SPITE_HIPCC)
    set(SPITE_HIP_ENABLED ON)
    message(STATUS "spite kernels: HIP (${SPITE_HIPCC}) for ${SPITE_SELECTED_HIP_ARCHS}")
  elseif(_spite_SPITE_HIP STREQUAL "ON")
    message(FATAL_ERROR "SPITE_HIP=ON but hipcc was not found (Debian: apt-get install hipcc)")
  else()
    message(WARNING "SPITE_GPU_ARCHS selects ${SPITE_SELECTED_HIP_ARCHS} but hipcc was not found: "
                    "no HIP plug-ins (SPITE_HIP=AUTO)")
  endif()
elseif(SPITE_SELECTED_HIP_ARCHS)
  message(STATUS "spite kernels: SPITE_HIP=OFF, AMD archs ${SPITE_SELECTED_HIP_ARCHS} ignored")
endif()

# Every plug-in exports exactly one symbol; cudart_static and everything else stay local.
set(SPITE_KERNEL_VERSION_SCRIPT "${PROJECT_BINARY_DIR}/spite_kernel.map")
file(CONFIGURE OUTPUT "${SPITE_KERNEL_VERSION_SCRIPT}"
     CONTENT "{\n  global: spite_kernel_library_v1;\n  local: *;\n};\n")

# spite_kernel_arch_plan(ARCH OUT_KIND OUT_TARGETS OUT_WHY)
#   OUT_KIND    CPU, CUDA, HIP, LEVEL_ZERO or UNKNOWN
#   OUT_TARGETS what to compile for: CUDA_ARCHITECTURES entries ("80-real;89"), gfx archs, or
#               "host" for a CPU directory; empty when the directory is not built
#   OUT_WHY     why it is not built (empty when it is)
function(spite_kernel_arch_plan arch out_kind out_targets out_why)
  set(kind UNKNOWN)
  set(targets "")
  set(why "")
  if(arch MATCHES "^sm_([0-9]+)([af]?)$")
    set(kind CUDA)
    set(dir_cc "${CMAKE_MATCH_1}")
    set(dir_suffix "${CMAKE_MATCH_2}")
    set(chosen "")
    foreach(cc IN LISTS SPITE_SELECTED_CUDA_ARCHS)
      string(REGEX MATCH "^[0-9]+" cc_num "${cc}")
      if(dir_suffix)
        if(cc STREQUAL "${dir_cc}${dir_suffix}")
          list(APPEND chosen "${cc}")
        endif()
      elseif(cc_num GREATER_EQUAL dir_cc)
        list(APPEND chosen "${cc}")
      endif()
    endforeach()
    if(NOT SPITE_CUDA_ENABLED)
      set(why "CUDA off (SPITE_GPU_ARCHS has no NVIDIA arch, SPITE_CUDA=OFF or no nvcc)")
    elseif(NOT chosen AND dir_suffix)
      set(why "${arch} not selected (arch-specific code is built for exactly that arch)")
    elseif(NOT chosen)
      set(why "no selected NVIDIA arch >= ${arch}")
    else()
      # SASS for each chosen arch; the newest also as PTX (JIT on later cards) unless it is an
      # arch-specific target, whose PTX no later card can run.
      list(POP_BACK chosen newest)
      list(TRANSFORM chosen APPEND "-real")
      if(newest MATCHES "[af]$")
        list(APPEND chosen "${newest}-real")
      else()
        list(APPEND chosen "${newest}")
      endif()
      set(targets "${chosen}")
    endif()
  elseif(arch MATCHES "^gfx[0-9a-f]+$" OR arch MATCHES "^(gcn|cdna|rdna)[0-9_]*$")
    set(kind HIP)
    if(arch MATCHES "^gfx")
      set(wanted "${arch}")
    else()
      spite_amd_family_archs("${arch}" wanted)
    endif()
    set(chosen "")
    foreach(gfx IN LISTS SPITE_SELECTED_HIP_ARCHS)
      if(gfx IN_LIST wanted)
        list(APPEND chosen "${gfx}")
      endif()
    endforeach()
    if(NOT wanted)
      set(why "unknown AMD arch family '${arch}' (see SPITE_AMD_ARCH_FAMILIES in cmake/cards.cmake)")
    elseif(NOT SPITE_HIP_ENABLED)
      set(why "HIP off (SPITE_GPU_ARCHS has no AMD arch, SPITE_HIP=OFF or no hipcc)")
    elseif(NOT chosen)
      set(why "no selected AMD arch in ${arch}")
    else()
      set(targets "${chosen}")
    endif()
  elseif(arch MATCHES "^xe")
    set(kind LEVEL_ZERO)
    set(why "no Level Zero plug-in build support yet")
  elseif(arch MATCHES "^(x86_64|x86-64|amd64|avx|sse)")
    set(kind CPU)
    if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
      set(targets host)
    else()
      set(why "x86-64 code, host is ${CMAKE_SYSTEM_PROCESSOR}")
    endif()
  elseif(arch MATCHES "^(aarch64|arm64|neon|sve)")
    set(kind CPU)
    if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
      set(targets host)
    else()
      set(why "Arm64 code, host is ${CMAKE_SYSTEM_PROCESSOR}")
    endif()
  elseif(arch MATCHES "^(riscv64|rvv)")
    set(kind CPU)
    if(CMAKE_SYSTEM_PROCESSOR MATCHES "^riscv64$")
      set(targets host)
    else()
      set(why "RISC-V code, host is ${CMAKE_SYSTEM_PROCESSOR}")
    endif()
  elseif(arch STREQUAL "cpu")
    set(kind CPU)
    set(targets host)
  else()
    set(why "unknown arch '${arch}' (sm_XY, gfxNNNN, rdna3, x86_64_v3, aarch64, ...)")
  endif()
  set(${out_kind} "${kind}" PARENT_SCOPE)
  set(${out_targets} "${targets}" PARENT_SCOPE)
  set(${out_why} "${why}" PARENT_SCOPE)
endfunction()

# spite_add_kernel_library(ID family/model/arch SOURCES src... [CUDA] [HIP]
#                          [COMPILE_OPTIONS opt...] [COMPILE_DEFINITIONS def...]
#                          [OUTPUT_DIRECTORY dir] [NO_INSTALL])
#
# Builds the plug-in lib spite_kernel_<family>_<model>_<arch>.so (a MODULE: dlopen only) into
# ${PROJECT_BINARY_DIR}/kernels/<family>/<model>/<arch>/ and installs it to
# <prefix>/kernels/<family>/<model>/<arch>/ (component "kernels"). Sources see only
# kernels/abi (#include "spite_kernel.h") and these definitions:
#   SPITE_KERNEL_ID="family/model/arch"   use it for the descriptor's id
#   SPITE_CUDA_ARCHS="75-real,80-real,89"  (CUDA) what the fat binary holds
#   SPITE_HIP_ARCHS="gfx90a,gfx1030"        (HIP)
# Inside kernels/ the ID must equal the directory (the descriptor id is authoritative at run
# time; a mismatch would be rejected there, so it is rejected here first).
# Sets SPITE_KERNEL_TARGET in the caller: the target name, or empty when the arch is not built.
# A HIP library is a custom target (hipcc via add_custom_command); its file is in the target
# property SPITE_KERNEL_FILE, which CUDA and CPU targets carry too.
function(spite_add_kernel_library)
  cmake_parse_arguments(ARG "CUDA;HIP;NO_INSTALL" "ID;OUTPUT_DIRECTORY"
                        "SOURCES;COMPILE_OPTIONS;COMPILE_DEFINITIONS" ${ARGN})
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "spite_add_kernel_library: unexpected arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_ID MATCHES "^([a-z0-9_]+)/([a-z0-9_]+)/([a-z0-9_]+)$")
    message(FATAL_ERROR "spite_add_kernel_library: ID '${ARG_ID}' must be family/model/arch "
                        "(lower case, digits, '_')")
  endif()
  set(arch "${CMAKE_MATCH_3}")
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "spite_add_kernel_library(${ARG_ID}): no SOURCES")
  endif()
  if(ARG_CUDA AND ARG_HIP)
    message(FATAL_ERROR "spite_add_kernel_library(${ARG_ID}): CUDA and HIP are exclusive")
  endif()
  file(RELATIVE_PATH rel "${SPITE_KERNELS_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT rel MATCHES "^\\.\\." AND NOT ARG_NO_INSTALL AND NOT rel STREQUAL ARG_ID)
    message(FATAL_ERROR "spite_add_kernel_library: ID '${ARG_ID}' does not match its directory "
                        "kernels/${rel}/")
  endif()

  spite_kernel_arch_plan("${arch}" kind targets why)
  if(ARG_CUDA AND NOT kind STREQUAL "CUDA")
    message(FATAL_ERROR "spite_add_kernel_library(${ARG_ID}): CUDA plug-ins live in sm_XY directories")
  endif()
  if(ARG_HIP AND NOT kind STREQUAL "HIP")
    message(FATAL_ERROR "spite_add_kernel_library(${ARG_ID}): HIP plug-ins live in gfxNNNN or AMD family directories")
  endif()
  if((kind STREQUAL "CUDA" AND NOT ARG_CUDA) OR (kind STREQUAL "HIP" AND NOT ARG_HIP))
    message(FATAL_ERROR "spite_add_kernel_library(${ARG_ID}): a ${kind} arch directory needs the ${kind} keyword")
  endif()
  set(SPITE_KERNEL_TARGET "" PARENT_SCOPE)
  if(NOT targets)
    message(STATUS "spite kernels: ${ARG_ID} not built: ${why}")
    return()
  endif()

  string(REPLACE "/" "_" name "spite_kernel_${ARG_ID}")
  if(ARG_OUTPUT_DIRECTORY)
    set(out_dir "${ARG_OUTPUT_DIRECTORY}")
  else()
    set(out_dir "${PROJECT_BINARY_DIR}/kernels/${ARG_ID}")
  endif()
  set(defs "SPITE_KERNEL_ID=\"${ARG_ID}\"" ${ARG_COMPILE_DEFINITIONS})

  if(ARG_HIP)
    set(file "${out_dir}/lib${name}.so")
    list(TRANSFORM targets PREPEND "--offload-arch=" OUTPUT_VARIABLE arch_flags)
    list(JOIN targets "," hip_archs)
    list(APPEND defs "SPITE_HIP_ARCHS=\"${hip_archs}\"")
    list(TRANSFORM defs PREPEND "-D" OUTPUT_VARIABLE def_flags)
    set(sources "")
    foreach(src IN LISTS ARG_SOURCES)
      get_filename_component(src "${src}" ABSOLUTE)
      list(APPEND sources "${src}")
    endforeach()
    set(build_type_flags -O3 -DNDEBUG)
    if(CMAKE_BUILD_TYPE STREQUAL "Debug")
      set(build_type_flags -O0 -g)
    endif()
    add_custom_command(OUTPUT "${file}"
      COMMAND "${CMAKE_COMMAND}" -E make_directory "${out_dir}"
      COMMAND "${SPITE_HIPCC}" -std=c++20 ${build_type_flags} -fPIC -shared ${arch_flags}
              "-I${SPITE_KERNEL_ABI_DIR}" ${def_flags} ${ARG_COMPILE_OPTIONS}
              "-Wl,--version-script=${SPITE_KERNEL_VERSION_SCRIPT}" -o "${file}" ${sources}
      DEPENDS ${sources} "${SPITE_KERNEL_ABI_DIR}/spite_kernel.h"
      COMMENT "hipcc ${ARG_ID} (${hip_archs})"
      VERBATIM COMMAND_EXPAND_LISTS)
    add_custom_target(${name} ALL DEPENDS "${file}")
    set_target_properties(${name} PROPERTIES SPITE_KERNEL_FILE "${file}" SPITE_KERNEL_ID "${ARG_ID}")
    if(NOT ARG_NO_INSTALL)
      install(FILES "${file}" DESTINATION "kernels/${ARG_ID}" COMPONENT kernels
              PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                          WORLD_READ WORLD_EXECUTE)
    endif()
    set(SPITE_KERNEL_TARGET "${name}" PARENT_SCOPE)
    return()
  endif()

  add_library(${name} MODULE ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE "${SPITE_KERNEL_ABI_DIR}")
  target_compile_definitions(${name} PRIVATE ${defs})
  target_compile_options(${name} PRIVATE
    $<$<COMPILE_LANGUAGE:C,CXX>:-Wall -Wextra -Wno-missing-field-initializers>
    $<$<AND:$<BOOL:${SPITE_WERROR}>,$<COMPILE_LANGUAGE:C,CXX>>:-Werror>
    ${ARG_COMPILE_OPTIONS})
  set_target_properties(${name} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME "${name}"
    LIBRARY_OUTPUT_DIRECTORY "${out_dir}"
    POSITION_INDEPENDENT_CODE ON
    CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF
    SKIP_BUILD_RPATH ON
    SPITE_KERNEL_FILE "${out_dir}/lib${name}.so"
    SPITE_KERNEL_ID "${ARG_ID}")
  target_link_options(${name} PRIVATE "LINKER:--version-script=${SPITE_KERNEL_VERSION_SCRIPT}")
  if(NOT SPITE_SANITIZE AND NOT SPITE_FUZZ)
    # Unresolved symbols fail the build, not the dlopen on a user's machine.
    target_link_options(${name} PRIVATE "LINKER:-z,defs")
  endif()
  set_property(TARGET ${name} APPEND PROPERTY LINK_DEPENDS "${SPITE_KERNEL_VERSION_SCRIPT}")

  if(ARG_CUDA)
    list(JOIN targets "," cuda_archs)
    target_compile_definitions(${name} PRIVATE "SPITE_CUDA_ARCHS=\"${cuda_archs}\"")
    target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
    # Static cudart: the plug-in needs only libcuda.so.1 (the driver) at run time and loads with
    # no CUDA installed at all (init() then reports the missing driver).
    set_target_properties(${name} PROPERTIES
      CUDA_ARCHITECTURES "${targets}"
      CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF
      CUDA_RUNTIME_LIBRARY Static
      CUDA_SEPARABLE_COMPILATION OFF)
  elseif(arch MATCHES "^x86_64_v([234])$")
    target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:C,CXX>:-march=x86-64-v${CMAKE_MATCH_1}>)
  endif()

  if(NOT ARG_NO_INSTALL)
    install(TARGETS ${name} LIBRARY DESTINATION "kernels/${ARG_ID}" COMPONENT kernels)
  endif()
  set(SPITE_KERNEL_TARGET "${name}" PARENT_SCOPE)
endfunction()
