// Activation quants permuted for the layouts whose chunks hold two 32-element groups side by
// side (Q3_K's 8-row units, packed Q5_K): each int16 pair sum of a chunk's products then belongs
// to one group, a lane's chunks of a pair of groups add in int16, and one VPMADDWD multiplies
// both groups' sums by their scales. Internal to spite::dispatch; include after simd_x86.hpp.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

namespace spite::dispatch::cpu::x86 {

// One super-block's 256 quants: per pair of groups p (2p, 2p + 1), dword t (0..15) of the 64
// bytes at 64 p holds elements 2t, 2t + 1 of group 2p, then those of group 2p + 1 (lane L's half
// v, elements 4L + 2v and 4L + 2v + 1, is dword 2L + v): the 16-bit units of the two groups
// interleaved. `to` may be `from`.
SPITE_AVX2 inline void interleave_group_pairs(const std::int8_t* from, std::int8_t* to) {
  for (int p = 0; p < 4; ++p) {
    const auto* first = reinterpret_cast<const __m128i*>(from + 64 * p);
    const auto* second = reinterpret_cast<const __m128i*>(from + 64 * p + 32);
    const __m128i a0 = _mm_loadu_si128(first), a1 = _mm_loadu_si128(first + 1);
    const __m128i b0 = _mm_loadu_si128(second), b1 = _mm_loadu_si128(second + 1);
    auto* out = reinterpret_cast<__m128i*>(to + 64 * p);
    _mm_storeu_si128(out, _mm_unpacklo_epi16(a0, b0));
    _mm_storeu_si128(out + 1, _mm_unpackhi_epi16(a0, b0));
    _mm_storeu_si128(out + 2, _mm_unpacklo_epi16(a1, b1));
    _mm_storeu_si128(out + 3, _mm_unpackhi_epi16(a1, b1));
  }
}

}  // namespace spite::dispatch::cpu::x86

#endif
