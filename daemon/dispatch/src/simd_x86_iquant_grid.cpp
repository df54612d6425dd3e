// AVX2 versions of the grid i-quant and ternary matmuls (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, TQ1_0, TQ2_0): the blocks are decoded as in ref_dot_iquants.cpp (table
// lookups), the 8 integer lanes of each super-block come from maddubs over 32 elements at a
// time and the float lanes from one vector fma, which are the reference's exact integers and
// fmas (iquant_dots.hpp), so the same bits.
#include "simd_x86.hpp"

#if defined(__x86_64__)
#include "iquant_dots.hpp"

namespace spite::dispatch::cpu::x86 {
namespace {

struct avx2_lanes {
  // lane k: sum over sub-blocks ib of scale(ib, k / 4) * (elements 4k..4k+3 of w . q). The
  // signed weights go through maddubs as |w| times q with w's sign (|w| <= 127, |q| <= 127:
  // the int16 pair sums cannot saturate).
  SPITE_AVX2 static void lanes(const iquant::decoded& b, const std::int8_t* q, int* lane) {
    __m256i acc = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.w + 32 * ib));
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * ib));
      const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
      const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(static_cast<std::int16_t>(b.scale16[2 * ib + 1])),
                                              _mm_set1_epi16(static_cast<std::int16_t>(b.scale16[2 * ib])));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, scales));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lane), acc);
  }

  SPITE_AVX2 static void accumulate(float* acc, float d, const int* lane) {
    const __m256 l = _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lane)));
    _mm256_storeu_ps(acc, _mm256_fmadd_ps(_mm256_set1_ps(d), l, _mm256_loadu_ps(acc)));
  }

  // Unsigned digits 0..2 times activations, lane k over elements 4k..4k+3 of every 32, minus the
  // activation sums bsums[2k] + bsums[2k + 1].
  SPITE_AVX2 static void ternary(const std::uint8_t* t, const gguf::block_q8_K& y, int* lane) {
    __m256i acc = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
      acc = _mm256_add_epi32(acc, dot_lanes(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + 32 * c)),
                                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 32 * c))));
    }
    const __m256i sums = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)), _mm256_set1_epi16(1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lane), _mm256_sub_epi32(acc, sums));
  }
};

}  // namespace

std::span<const exact_matmul> grid_iquant_matmuls() {
  // IQ4_XS has a faster kernel of its own (simd_x86_iquants.cpp).
  static const auto table = [] {
    std::vector<exact_matmul> t;
    for (const exact_matmul& m : iquant::matmuls<avx2_lanes>) {
      if (m.type != gguf::tensor_type::iq4_xs) t.push_back(m);
    }
    return t;
  }();
  return table;
}

}  // namespace spite::dispatch::cpu::x86

#endif
