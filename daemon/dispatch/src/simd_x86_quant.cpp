// AVX2 Q8_K activation quantizers, byte for byte the reference's two rules (ref_quant.hpp):
// the scalar one (scale -127 / the first element of largest magnitude, quants min(127, round))
// and the 4-row GEMM one (scale -+127 / amax, - when +amax occurs, quants clamped to
// [-128, 127]). Products and rounding are the same float operations (round to nearest even:
// the scalar code's magic-number rounding and nearbyint agree with cvtps in this range).
#include "simd_x86.hpp"

#if defined(__x86_64__)
#include <cmath>
#include <cstring>

namespace spite::dispatch::cpu {
namespace {

SPITE_AVX2 inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Quants of one block at `iscale`, clamped to [lo, 127], and the block sums per 16.
SPITE_AVX2 inline void quantize_block(const float* x, float iscale, int lo, gguf::block_q8_K& out) {
  const __m256 s = _mm256_set1_ps(iscale);
  const __m256i hi_v = _mm256_set1_epi32(127), lo_v = _mm256_set1_epi32(lo);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int j = 0; j < gguf::qk_k; j += 32) {
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      const __m256i r = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), s));
      q[k] = _mm256_max_epi32(_mm256_min_epi32(r, hi_v), lo_v);
    }
    // packs work per 128-bit lane: the permutation puts the 32 bytes back in element order.
    const __m256i p16a = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs + j), p8);
    // Sums of 16: byte pairs, then the int16 pairs of pairs, to int32, then 4 at a time.
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), p8);
    const __m256i quads = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));  // 8 sums of 4
    const __m128i lo4 = _mm256_castsi256_si128(quads), hi4 = _mm256_extracti128_si256(quads, 1);
    const __m128i sums = _mm_hadd_epi32(_mm_hadd_epi32(lo4, hi4), _mm_setzero_si128());  // [0..15], [16..31]
    out.bsums[j / 16] = static_cast<std::int16_t>(_mm_cvtsi128_si32(sums));
    out.bsums[j / 16 + 1] = static_cast<std::int16_t>(_mm_extract_epi32(sums, 1));
  }
}

SPITE_AVX2 inline float block_amax(const float* xb) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_setzero_ps();
  for (int j = 0; j < gguf::qk_k; j += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(xb + j), abs_mask));
  return hmax8(m);
}

SPITE_AVX2 void quantize_scalar_rule(const float* x, gguf::block_q8_K* out, std::int64_t n) {
  for (std::int64_t b = 0; b < n / gguf::qk_k; ++b) {
    const float* xb = x + b * gguf::qk_k;
    const float amax = block_amax(xb);
    if (amax == 0.0f) {
      std::memset(&out[b], 0, sizeof(gguf::block_q8_K));
      continue;
    }
    float max = 0.0f;  // the first element of that magnitude, with its sign
    for (int j = 0; j < gguf::qk_k; ++j) {
      if (std::fabs(xb[j]) == amax) {
        max = xb[j];
        break;
      }
    }
    const float iscale = -127.f / max;
    quantize_block(xb, iscale, -2147483647 - 1, out[b]);
    out[b].d = 1 / iscale;
  }
}

SPITE_AVX2 void quantize_four_row_rule(const float* x, gguf::block_q8_K* out, std::int64_t n) {
  for (std::int64_t b = 0; b < n / gguf::qk_k; ++b) {
    const float* xb = x + b * gguf::qk_k;
    const float amax = block_amax(xb);
    const __m256 va = _mm256_set1_ps(amax);
    int positive = 0;
    for (int j = 0; j < gguf::qk_k; j += 8) positive |= _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(xb + j), va, _CMP_EQ_OQ));
    float iscale = 0.0f;
    if (amax != 0.0f) iscale = positive != 0 ? -127.f / amax : 127.f / amax;
    quantize_block(xb, iscale, -128, out[b]);
    out[b].d = amax != 0.0f ? 1.0f / iscale : 0.0f;
  }
}

bool has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

}  // namespace

q8_K_quantizer simd_q8_K_quantizer(bool four_row_rule) {
  static const bool usable = has_avx2();
  if (!usable) return nullptr;
  return four_row_rule ? quantize_four_row_rule : quantize_scalar_rule;
}

}  // namespace spite::dispatch::cpu

#else

namespace spite::dispatch::cpu {
q8_K_quantizer simd_q8_K_quantizer(bool) { return nullptr; }
}  // namespace spite::dispatch::cpu

#endif
