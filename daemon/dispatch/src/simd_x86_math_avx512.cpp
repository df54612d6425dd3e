// AVX-512 twin of the flash-attention f16 accumulator of simd_x86_math.cpp (simd_math::
// accumulate_f16): the same per-element operations (an fma of the widened f16 value by the
// key's weight onto the accumulator, rounded to f16 after each key; the rescale rounded the
// same way) on 16 dimensions per register instead of 8, so a 64-dimension head takes 4 chains
// of 4 operations per key instead of 8; for 64-dimension heads, up to 4 heads of a kv group at
// once. At depth the accumulator is decode's largest cost outside the weights (18 % of
// one-thread Q4_K_M decode at depth 1500 in AVX2).
#include "simd_x86_avx512.hpp"

#if defined(__x86_64__)

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr int k_round = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

SPITE_AVX512 inline __m512 round16(__m512 x) { return _mm512_cvtph_ps(_mm512_cvtps_ph(x, k_round)); }

SPITE_AVX512 inline __m512 widen16(const std::uint16_t* h) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
}

// W registers of 16 dimensions kept over all the keys, starting from out.
template <int W>
SPITE_AVX512 void accumulate_block(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                                   const float* weight, const float* rescale, std::int64_t n) {
  __m512 acc[W];
#pragma GCC unroll 8
  for (int w = 0; w < W; ++w) acc[w] = _mm512_loadu_ps(out + 16 * w);
  for (std::int64_t i = 0; i < n; ++i) {
    if (rescale[i] != 1.0f) {
      const __m512 s = _mm512_set1_ps(rescale[i]);
#pragma GCC unroll 8
      for (int w = 0; w < W; ++w) acc[w] = round16(_mm512_mul_ps(acc[w], s));
    }
    const std::uint16_t* v = values + keys[i] * stride;
    const __m512 p = _mm512_set1_ps(weight[i]);
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) acc[w] = round16(_mm512_fmadd_ps(widen16(v + 16 * w), p, acc[w]));
  }
#pragma GCC unroll 8
  for (int w = 0; w < W; ++w) _mm512_storeu_ps(out + 16 * w, acc[w]);
}

// H heads of 64 dimensions over the same keys and values: each key's value row widened once
// for all of them, and 4 H independent chains, where one head's 4 would wait on each other.
template <int H>
SPITE_AVX512 void accumulate_heads64(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                                     const float* weight, const float* rescale, std::int64_t w_stride, std::int64_t n,
                                     float* sums) {
  __m512 acc[H][4];
  __m128 sum[H];
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
#pragma GCC unroll 4
    for (int w = 0; w < 4; ++w) acc[h][w] = _mm512_loadu_ps(out + 64 * h + 16 * w);
    sum[h] = _mm_set_ss(sums[h]);
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t* v = values + keys[i] * stride;
    __m512 vw[4];
#pragma GCC unroll 4
    for (int w = 0; w < 4; ++w) vw[w] = widen16(v + 16 * w);
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      const float r = rescale[h * w_stride + i], p = weight[h * w_stride + i];
      if (r != 1.0f) {
        const __m512 s = _mm512_set1_ps(r);
#pragma GCC unroll 4
        for (int w = 0; w < 4; ++w) acc[h][w] = round16(_mm512_mul_ps(acc[h][w], s));
      }
      const __m512 pv = _mm512_set1_ps(p);
#pragma GCC unroll 4
      for (int w = 0; w < 4; ++w) acc[h][w] = round16(_mm512_fmadd_ps(vw[w], pv, acc[h][w]));
      sum[h] = _mm_fmadd_ss(sum[h], _mm_set_ss(r), _mm_set_ss(p));
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
#pragma GCC unroll 4
    for (int w = 0; w < 4; ++w) _mm512_storeu_ps(out + 64 * h + 16 * w, acc[h][w]);
    sums[h] = _mm_cvtss_f32(sum[h]);
  }
}

}  // namespace

void accumulate_f16_heads64_avx512(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                                   const float* weight, const float* rescale, std::int64_t w_stride, std::int64_t n,
                                   float* sums, std::int64_t heads) {
  std::int64_t h = 0;
  for (; h + 4 <= heads; h += 4) {
    accumulate_heads64<4>(out + 64 * h, values, stride, keys, weight + h * w_stride, rescale + h * w_stride, w_stride, n, sums + h);
  }
  for (; h + 2 <= heads; h += 2) {
    accumulate_heads64<2>(out + 64 * h, values, stride, keys, weight + h * w_stride, rescale + h * w_stride, w_stride, n, sums + h);
  }
  for (; h < heads; ++h) {
    accumulate_heads64<1>(out + 64 * h, values, stride, keys, weight + h * w_stride, rescale + h * w_stride, w_stride, n, sums + h);
  }
}

std::int64_t accumulate_f16_avx512(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                                   const float* weight, const float* rescale, std::int64_t n, std::int64_t dv) {
  std::int64_t d = 0;
  for (; d + 128 <= dv; d += 128) accumulate_block<8>(out + d, values + d, stride, keys, weight, rescale, n);
  for (; d + 64 <= dv; d += 64) accumulate_block<4>(out + d, values + d, stride, keys, weight, rescale, n);
  for (; d + 16 <= dv; d += 16) accumulate_block<1>(out + d, values + d, stride, keys, weight, rescale, n);
  return d;
}

}  // namespace spite::dispatch::cpu::x86

#endif
