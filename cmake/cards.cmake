# Card table for the build: card name -> vendor, GPU arch, memory.
#
# The project has one card table, daemon/dispatch/data/cards.tsv: spite::dispatch embeds it for
# `spitectl cards` and `--card`, and this file reads it, so SPITE_GPU_ARCHS takes exactly the
# names, aliases and archs spitectl does, matched the same way (spite::dispatch's normalize():
# case, ' ', '-' and '_' ignored, brand prefixes like "GeForce" dropped). To add a card, add a
# line there. Should that file be missing, a small built-in table (the cards the brief names) is
# used instead.
#
# Arch names (the kernels/<family>/<model>/<arch>/ directory names):
#   NVIDIA  sm_XY   compute capability X.Y (sm_XYa / sm_XYf: arch-specific feature sets)
#   AMD     gfxNNNN the LLVM offload arch; a directory may also be named after an AMD family
#                   of SPITE_AMD_ARCH_FAMILIES below (rdna3, cdna2, ...)
#   Intel   xe_hpg, xe2_hpg, xe_hpc (Level Zero; no GPU plug-in build support yet)
#
# After inclusion SPITE_CARDS holds one record per name and alias:
#   "KEY|NAME|vendor|kind|arch|memory_gib|supported|note"   (vendor and kind lower case)
set(SPITE_CARDS_TSV "${CMAKE_CURRENT_LIST_DIR}/../daemon/dispatch/data/cards.tsv")
get_filename_component(SPITE_CARDS_TSV "${SPITE_CARDS_TSV}" ABSOLUTE)

# spite_card_key(TEXT OUT): the lookup key of a card name, as spite::dispatch normalizes it.
function(spite_card_key text out)
  string(STRIP "${text}" key)
  string(TOLOWER "${key}" key)
  string(REGEX REPLACE "[-_ \t]" "" key "${key}")
  string(REPLACE "(r)" "" key "${key}")
  string(REPLACE "(tm)" "" key "${key}")
  set(again ON)
  while(again)
    set(again OFF)
    foreach(brand nvidia geforce tesla amd radeon instinct intel apple)
      if(key MATCHES "^${brand}(.+)$")
        set(key "${CMAKE_MATCH_1}")
        set(again ON)
      endif()
    endforeach()
  endwhile()
  if(key MATCHES "^(.+)graphics$")
    set(key "${CMAKE_MATCH_1}")
  endif()
  set(${out} "${key}" PARENT_SCOPE)
endfunction()

if(EXISTS "${SPITE_CARDS_TSV}")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${SPITE_CARDS_TSV}")
  file(READ "${SPITE_CARDS_TSV}" _spite_tsv)
  # CMake lists: ';' in notes and unbalanced brackets would break the splitting below.
  string(REPLACE ";" "," _spite_tsv "${_spite_tsv}")
  string(REPLACE "[" "(" _spite_tsv "${_spite_tsv}")
  string(REPLACE "]" ")" _spite_tsv "${_spite_tsv}")
  string(REPLACE "|" "/" _spite_tsv "${_spite_tsv}")
  string(REPLACE "\n" ";" _spite_tsv_lines "${_spite_tsv}")
  set(SPITE_CARDS "")
  foreach(_line IN LISTS _spite_tsv_lines)
    if(_line MATCHES "^#" OR _line MATCHES "^name\t" OR NOT _line MATCHES "\t")
      continue()
    endif()
    string(REPLACE "\t" ";" _fields "${_line}")
    list(LENGTH _fields _n)
    if(_n LESS 7)
      message(WARNING "${SPITE_CARDS_TSV}: malformed line '${_line}'")
      continue()
    endif()
    # name aliases vendor kind arch memory_gib supported [note]
    list(GET _fields 0 _name)
    list(GET _fields 1 _aliases)
    list(GET _fields 2 _vendor)
    list(GET _fields 3 _kind)
    list(GET _fields 4 _arch)
    list(GET _fields 5 _mem)
    list(GET _fields 6 _supported)
    set(_note "")
    if(_n GREATER 7)
      list(GET _fields 7 _note)
    endif()
    string(TOLOWER "${_vendor}" _vendor)
    set(_names "${_name}")
    if(NOT _aliases STREQUAL "-")
      string(REPLACE "," ";" _alias_list "${_aliases}")
      list(APPEND _names ${_alias_list})
    endif()
    foreach(_each IN LISTS _names)
      spite_card_key("${_each}" _key)
      list(APPEND SPITE_CARDS "${_key}|${_name}|${_vendor}|${_kind}|${_arch}|${_mem}|${_supported}|${_note}")
    endforeach()
  endforeach()
else()
  message(WARNING "${SPITE_CARDS_TSV} not found: SPITE_GPU_ARCHS knows only a few card names")
  set(SPITE_CARDS
    "rtx3060|RTX_3060|nvidia|cuda|sm_86|12|yes|"
    "rtx4090|RTX_4090|nvidia|cuda|sm_89|24|yes|"
    "rtx5090|RTX_5090|nvidia|cuda|sm_120|32|yes|"
    "a10080gb|A100_80GB|nvidia|cuda|sm_80|80|yes|"
    "h100sxm|H100_SXM|nvidia|cuda|sm_90|80|yes|"
    "h100|H100_SXM|nvidia|cuda|sm_90|80|yes|"
    "rx6800xt|RX_6800_XT|amd|hip|gfx1030|16|yes|"
    "rx7800xt|RX_7800_XT|amd|hip|gfx1101|16|yes|"
    "rx7900xtx|RX_7900_XTX|amd|hip|gfx1100|24|yes|"
    "mi250x|MI250X|amd|hip|gfx90a|128|yes|"
    "arca770|ARC_A770|intel|level_zero|xe_hpg|16|yes|")
endif()

# AMD arch families usable as kernels/<family>/<model>/<arch>/ directory names: a directory named
# after a family is built for the selected gfx archs of that family. "NAME|gfx,gfx,...".
set(SPITE_AMD_ARCH_FAMILIES
  "gcn5|gfx900,gfx906"
  "cdna1|gfx908"
  "cdna2|gfx90a"
  "cdna3|gfx940,gfx941,gfx942"
  "cdna4|gfx950"
  "rdna1|gfx1010,gfx1011,gfx1012"
  "rdna2|gfx1030,gfx1031,gfx1032,gfx1033,gfx1034,gfx1035,gfx1036"
  "rdna3|gfx1100,gfx1101,gfx1102,gfx1103"
  "rdna3_5|gfx1150,gfx1151,gfx1152"
  "rdna4|gfx1200,gfx1201"
)

# spite_card_lookup(NAME OUT_VENDOR OUT_ARCH OUT_MEMORY_GIB [SUPPORTED out] [NOTE out] [CANONICAL out])
# The record of a card by name or alias; the outputs are empty for an unknown name.
function(spite_card_lookup name out_vendor out_arch out_mem)
  cmake_parse_arguments(ARG "" "SUPPORTED;NOTE;CANONICAL" "" ${ARGN})
  spite_card_key("${name}" key)
  set(fields "")
  set(values ";;;;;;;")  # 8 empty fields
  foreach(record IN LISTS SPITE_CARDS)
    string(FIND "${record}" "${key}|" at)
    if(at EQUAL 0)
      string(REPLACE "|" ";" values "${record}")
      break()
    endif()
  endforeach()
  list(GET values 1 canonical)
  list(GET values 2 vendor)
  list(GET values 4 arch)
  list(GET values 5 mem)
  list(GET values 6 supported)
  list(GET values 7 note)
  set(${out_vendor} "${vendor}" PARENT_SCOPE)
  set(${out_arch} "${arch}" PARENT_SCOPE)
  set(${out_mem} "${mem}" PARENT_SCOPE)
  if(ARG_SUPPORTED)
    set(${ARG_SUPPORTED} "${supported}" PARENT_SCOPE)
  endif()
  if(ARG_NOTE)
    set(${ARG_NOTE} "${note}" PARENT_SCOPE)
  endif()
  if(ARG_CANONICAL)
    set(${ARG_CANONICAL} "${canonical}" PARENT_SCOPE)
  endif()
endfunction()

# spite_card_is_arch(TEXT OUT): TEXT is an arch some card of the table has (xe_hpg, ...).
function(spite_card_is_arch text out)
  set(found OFF)
  foreach(record IN LISTS SPITE_CARDS)
    string(REPLACE "|" ";" fields "${record}")
    list(GET fields 3 kind)
    list(GET fields 4 arch)
    if(arch STREQUAL text AND NOT kind STREQUAL "none")
      set(found ON)
      break()
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# spite_card_suggest(TEXT OUT): up to a few card names that look like TEXT (same key prefix).
function(spite_card_suggest text out)
  spite_card_key("${text}" key)
  string(LENGTH "${key}" len)
  set(result "")
  while(len GREATER 1 AND NOT result)
    string(SUBSTRING "${key}" 0 ${len} prefix)
    foreach(record IN LISTS SPITE_CARDS)
      string(REPLACE "|" ";" fields "${record}")
      list(GET fields 0 k)
      list(GET fields 1 canonical)
      string(FIND "${k}" "${prefix}" at)
      if(at EQUAL 0 AND NOT canonical IN_LIST result)
        list(APPEND result "${canonical}")
      endif()
    endforeach()
    math(EXPR len "${len} - 1")
  endwhile()
  list(LENGTH result n)
  if(n GREATER 5)
    list(SUBLIST result 0 5 result)
  endif()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# spite_amd_family_archs(FAMILY OUT): the gfx archs of an AMD family name (empty if unknown).
function(spite_amd_family_archs family out)
  set(result "")
  foreach(record IN LISTS SPITE_AMD_ARCH_FAMILIES)
    string(REPLACE "|" ";" fields "${record}")
    list(GET fields 0 name)
    if(name STREQUAL family)
      list(GET fields 1 archs)
      string(REPLACE "," ";" result "${archs}")
      break()
    endif()
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()
