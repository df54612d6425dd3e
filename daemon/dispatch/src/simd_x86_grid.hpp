// The grid i-quants' and ternary types' AVX-512 VBMI kernels (simd_x86_iquant_grid_avx512.cpp,
// simd_x86_ternary_avx512.cpp), as the matmuls of simd_x86_iquant_grid.cpp take them, and what
// the IQ1_S kernels of both grid files share. Internal to spite::dispatch; x86-64 only.
#pragma once

#include "simd_x86.hpp"

#if defined(__x86_64__)
namespace spite::dispatch::cpu::x86 {

// simd_x86_iquant_grid_avx512.cpp: the matmul of the grid i-quants with AVX-512 VBMI (grid rows
// looked up in registers), simd_x86_ternary_avx512.cpp that of the ternary types, against
// quantized activation rows (xq: n_tokens rows of w.in / 256 blocks). Null without it, after
// set_avx512(false), and for other blocks.
using grid_matmul_fn = void (*)(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool);
bool enabled_grid_kernels();
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq1_s*);
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq1_m*);
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq2_xxs*);
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq2_xs*);
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq2_s*);
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq3_xxs*);
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq3_s*);
grid_matmul_fn avx512_grid_matmul(const gguf::block_tq1_0*);  // simd_x86_ternary_avx512.cpp
grid_matmul_fn avx512_grid_matmul(const gguf::block_tq2_0*);
template <class Block>
grid_matmul_fn avx512_grid_matmul(const Block*) {
  return nullptr;
}

// The AVX-512 VBMI kernels' constant vectors (their target: SPITE_AVX512_VBMI, simd_x86.hpp): a
// vector's bytes made at compile time and loaded (built in the kernels, GCC stores them one by one
// on every call).
struct alignas(64) vector_bytes {
  std::uint8_t b[64];
};
// Byte i: f(i).
template <class F>
constexpr vector_bytes bytes_of(F f) {
  vector_bytes v{};
  for (int i = 0; i < 64; ++i) v.b[i] = static_cast<std::uint8_t>(f(i));
  return v;
}
// Word w: f(w).
template <class F>
constexpr vector_bytes words_of(F f) {
  vector_bytes v{};
  for (int w = 0; w < 32; ++w) {
    const auto x = static_cast<std::uint16_t>(f(w));
    v.b[2 * w] = static_cast<std::uint8_t>(x & 0xFF);
    v.b[2 * w + 1] = static_cast<std::uint8_t>(x >> 8);
  }
  return v;
}
SPITE_AVX512_VBMI inline __m512i load(const vector_bytes& v) { return _mm512_load_si512(v.b); }

// The ternary types' -1 offsets: the activations' sum over each sub-block (32 elements), lane j
// sub-block j's, as their lanes subtract it.
SPITE_AVX2 inline __m256i ternary_sub_block_sums(const gguf::block_q8_K& y) {
  return _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)), _mm256_set1_epi16(1));
}

// IQ1_S's delta term of a super-block, an integer: the activations' block sums times `delta`
// (int16 pairs, sub-block j's delta sign times its scale at 2j, 2j + 1), summed (exact: any order).
SPITE_AVX2 inline int iq1_s_delta_sum(__m256i delta, const gguf::block_q8_K& y) {
  const __m256i v = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)), delta);
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}
// The same for four activation rows at once, their sums in lanes 0..3 (the same integers).
SPITE_AVX2 inline __m128i iq1_s_delta_sums4(__m256i delta, const __m256i* bsums) {
  const __m256i h01 = _mm256_hadd_epi32(_mm256_madd_epi16(bsums[0], delta), _mm256_madd_epi16(bsums[1], delta));
  const __m256i h23 = _mm256_hadd_epi32(_mm256_madd_epi16(bsums[2], delta), _mm256_madd_epi16(bsums[3], delta));
  const __m256i h = _mm256_hadd_epi32(h01, h23);  // per 128-bit half: the four rows' partial sums
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

}  // namespace spite::dispatch::cpu::x86
#endif
