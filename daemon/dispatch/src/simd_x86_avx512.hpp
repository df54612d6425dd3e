// Shared preamble of the AVX-512 VNNI kernel files (simd_x86_avx512.cpp, simd_x86_q8_0_packed.cpp,
// simd_x86_q4k_x16.cpp): their target attribute. Internal to spite::dispatch; x86-64 only.
#pragma once

// GCC 12's AVX-512 headers build some results from _mm512_undefined values and then warn about
// them (a known false positive); this header is included only by files of AVX-512 kernels.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "simd_x86.hpp"

#define SPITE_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
