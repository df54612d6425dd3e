// AVX-512 twins of flash-attention pieces of simd_x86_math.cpp. The f16 accumulator (simd_math::
// accumulate_f16): the same per-element operations (an fma of the widened f16 value by the
// key's weight onto the accumulator, rounded to f16 after each key; the rescale rounded the
// same way) on 16 dimensions per register instead of 8, so a 64-dimension head takes 4 chains
// of 4 operations per key instead of 8; for 64- and 128-dimension heads, up to 4 and 2 heads of
// a kv group at once. At depth the accumulator is decode's largest cost outside the weights (18 % of
// one-thread Q4_K_M decode at depth 1500 in AVX2). The scores likewise: each key row widened
// once for 4 heads (or 2; rows of 64 or 128 elements), and reduce16's steps done for 16
// (head, key) pairs by shuffles. The tiles' GEMM (simd_math::gemm_acc, prefill's scores and
// weighted values) in 16-wide registers, 4 rows x 64 columns per block: the AVX2 block's 4 x 16
// held its fmas to half the 512-bit peak.
#include "simd_x86_avx512.hpp"
#include "simd_x86_math_avx512.hpp"

#include <cmath>

#include "simd_math.hpp"

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
    fetch_row(values + keys[i + value_ahead] * stride, 32 * W);
    const std::uint16_t* v = values + keys[i] * stride;
    const __m512 p = _mm512_set1_ps(weight[i]);
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) acc[w] = round16(_mm512_fmadd_ps(widen16(v + 16 * w), p, acc[w]));
  }
#pragma GCC unroll 8
  for (int w = 0; w < W; ++w) _mm512_storeu_ps(out + 16 * w, acc[w]);
}

// H heads of D dimensions (64 or 128) over the same keys and values: each key's value row
// widened once for all of them, and D / 16 x H independent chains. (128-dimension heads go two
// at a time: 16 accumulators and 8 widened vectors fill the 32 registers.)
template <int D, int H>
SPITE_AVX512 void accumulate_heads(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                                   const float* weight, const float* rescale, std::int64_t w_stride, std::int64_t n,
                                   float* sums) {
  constexpr int W = D / 16;
  __m512 acc[H][W];
  __m128 sum[H];
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) acc[h][w] = _mm512_loadu_ps(out + D * h + 16 * w);
    sum[h] = _mm_set_ss(sums[h]);
  }
  for (std::int64_t i = 0; i < n; ++i) {
    fetch_row(values + keys[i + value_ahead] * stride, 2 * D);
    const std::uint16_t* v = values + keys[i] * stride;
    __m512 vw[W];
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) vw[w] = widen16(v + 16 * w);
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      const float r = rescale[h * w_stride + i], p = weight[h * w_stride + i];
      if (r != 1.0f) {
        const __m512 s = _mm512_set1_ps(r);
#pragma GCC unroll 8
        for (int w = 0; w < W; ++w) acc[h][w] = round16(_mm512_mul_ps(acc[h][w], s));
      }
      const __m512 pv = _mm512_set1_ps(p);
#pragma GCC unroll 8
      for (int w = 0; w < W; ++w) acc[h][w] = round16(_mm512_fmadd_ps(vw[w], pv, acc[h][w]));
      sum[h] = _mm_fmadd_ss(sum[h], _mm_set_ss(r), _mm_set_ss(p));
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) _mm512_storeu_ps(out + D * h + 16 * w, acc[h][w]);
    sums[h] = _mm_cvtss_f32(sum[h]);
  }
}

// One D-element row (64 or 128) against HN = 4 or 2 queries (q + D h), as vec_dot_f16 sums it,
// up to reduce16: group g = e % 64 / 16 is register g (for 128 elements, its second block's
// product fma'd onto its first's, vec_dot_f16's accumulator over two steps), groups folded
// (0 + 2) + (1 + 3), then reduce16's first two steps (lanes j + j + 8, then j + j + 4) for the
// heads together: 128-bit chunk h of the result holds head h % HN's 4 partial sums.
template <int D, int HN>
SPITE_AVX512 inline __m512 fold_heads(const __m512 (&k)[D / 16], const float* q) {
  __m512 l[HN];
#pragma GCC unroll 4
  for (int h = 0; h < HN; ++h) {
    const float* qh = q + D * h;
    if constexpr (D == 64) {
      // (p0 + p2) + (p1 + p3) with p0 and p1 taken by fmas onto p2 and p3: every product is
      // exact, so the fma rounds its sum as the addition did (two operations fewer, same bits).
      const __m512 p2 = _mm512_mul_ps(k[2], _mm512_loadu_ps(qh + 32)), p3 = _mm512_mul_ps(k[3], _mm512_loadu_ps(qh + 48));
      l[h] = _mm512_add_ps(_mm512_fmadd_ps(k[0], _mm512_loadu_ps(qh), p2), _mm512_fmadd_ps(k[1], _mm512_loadu_ps(qh + 16), p3));
    } else {
      static_assert(D == 128);
      __m512 p[4];
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        p[g] = _mm512_fmadd_ps(k[4 + g], _mm512_loadu_ps(qh + 64 + 16 * g), _mm512_mul_ps(k[g], _mm512_loadu_ps(qh + 16 * g)));
      }
      l[h] = _mm512_add_ps(_mm512_add_ps(p[0], p[2]), _mm512_add_ps(p[1], p[3]));
    }
  }
  // Lanes j + j + 8: chunks (0 + 2, 1 + 3) of two heads side by side.
  const __m512 t01 = _mm512_add_ps(_mm512_shuffle_f32x4(l[0], l[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(l[0], l[1], _MM_SHUFFLE(3, 2, 3, 2)));
  __m512 t23 = t01;
  if constexpr (HN == 4) {
    t23 = _mm512_add_ps(_mm512_shuffle_f32x4(l[2], l[3], _MM_SHUFFLE(1, 0, 1, 0)),
                        _mm512_shuffle_f32x4(l[2], l[3], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // Lanes j + j + 4: chunk 0 + chunk 1 of each head.
  return _mm512_add_ps(_mm512_shuffle_f32x4(t01, t23, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_f32x4(t01, t23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// reduce16's last step, (s0 + s2) + (s1 + s3), for 4 keys' fold_4_heads: lane 4 h + p of the
// result is head h's score of key p.
SPITE_AVX512 inline __m512 finish_4x4(__m512 s0, __m512 s1, __m512 s2, __m512 s3) {
  // Per chunk: [key 0's s0 + s2, its s1 + s3, key 1's s0 + s2, its s1 + s3], and the same of keys 2, 3.
  const __m512 g01 = _mm512_add_ps(_mm512_shuffle_ps(s0, s1, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(s0, s1, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 g23 = _mm512_add_ps(_mm512_shuffle_ps(s2, s3, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(s2, s3, _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_ps(g01, g23, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(g01, g23, _MM_SHUFFLE(3, 1, 3, 1)));
}

}  // namespace

namespace {

// Heads [h0, h0 + HN) of D elements, keys [0, keys4) in groups of 4.
template <int D, int HN>
SPITE_AVX512 void dot_rows_heads(const std::uint16_t* rows, std::int64_t stride, const std::int32_t* keys, std::int64_t keys4,
                                 const float* q, float* out, std::int64_t out_stride, std::int64_t h0) {
  const float* qh = q + D * h0;
  for (std::int64_t i = 0; i < keys4; i += 4) {
    __m512 s[4];
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      // The first heads' pass fetches ahead; the others find the rows in the caches.
      if (h0 == 0) fetch_row(rows + keys[i + p + key_ahead] * stride, 2 * D);
      const std::uint16_t* row = rows + keys[i + p] * stride;
      __m512 k[D / 16];
#pragma GCC unroll 8
      for (int g = 0; g < D / 16; ++g) k[g] = widen16(row + 16 * g);
      s[p] = fold_heads<D, HN>(k, qh);
    }
    const __m512 r = finish_4x4(s[0], s[1], s[2], s[3]);
    // (Immediates written out: an unrolled loop's index is no constant at -O1.)
    _mm_storeu_ps(out + h0 * out_stride + i, _mm512_castps512_ps128(r));
    _mm_storeu_ps(out + (h0 + 1) * out_stride + i, _mm512_extractf32x4_ps(r, 1));
    if constexpr (HN == 4) {
      _mm_storeu_ps(out + (h0 + 2) * out_stride + i, _mm512_extractf32x4_ps(r, 2));
      _mm_storeu_ps(out + (h0 + 3) * out_stride + i, _mm512_extractf32x4_ps(r, 3));
    }
  }
}

template <int D>
SPITE_AVX512 void dot_rows_all_heads(const std::uint16_t* rows, std::int64_t stride, const std::int32_t* keys, std::int64_t keys4,
                                     const float* q, float* out, std::int64_t out_stride, std::int64_t heads) {
  std::int64_t h = 0;
  for (; h + 4 <= heads; h += 4) dot_rows_heads<D, 4>(rows, stride, keys, keys4, q, out, out_stride, h);
  if (h + 2 <= heads) dot_rows_heads<D, 2>(rows, stride, keys, keys4, q, out, out_stride, h);
}

}  // namespace

std::int64_t dot_f16_rows_heads_avx512(const std::uint16_t* rows, std::int64_t stride, const std::int32_t* keys, std::int64_t count,
                                       const float* q, std::int64_t n, float* out, std::int64_t out_stride, std::int64_t heads) {
  const std::int64_t keys4 = count / 4 * 4;
  if (n == 64) {
    dot_rows_all_heads<64>(rows, stride, keys, keys4, q, out, out_stride, heads);
  } else if (n == 128) {
    dot_rows_all_heads<128>(rows, stride, keys, keys4, q, out, out_stride, heads);
  } else {
    return 0;
  }
  return keys4;
}

void accumulate_f16_heads_avx512(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                                 const float* weight, const float* rescale, std::int64_t w_stride, std::int64_t n,
                                 float* sums, std::int64_t heads, std::int64_t dv) {
  std::int64_t h = 0;
  const auto run = [&]<int D, int H>() {
    accumulate_heads<D, H>(out + D * h, values, stride, keys, weight + h * w_stride, rescale + h * w_stride, w_stride, n, sums + h);
    h += H;
  };
  if (dv == 64) {
    while (h + 4 <= heads) run.template operator()<64, 4>();
    while (h + 2 <= heads) run.template operator()<64, 2>();
    while (h < heads) run.template operator()<64, 1>();
  } else {
    while (h + 2 <= heads) run.template operator()<128, 2>();
    while (h < heads) run.template operator()<128, 1>();
  }
}

namespace {

// A block of R rows x 16 W columns of c in registers over the whole k loop: per k step W loads
// of b, R broadcasts of a and R x W fmas (4 x 4: 16 fmas for 8 loads, the fma units the bound).
// Each element's chain is gemm_block's (simd_x86_math.cpp): from its value in c, k in order.
template <int R, int W>
SPITE_AVX512 inline void gemm_block16(float* c, const float* a, const float* b, std::int64_t k, std::int64_t n) {
  __m512 acc[R][W];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int w = 0; w < W; ++w) acc[r][w] = _mm512_loadu_ps(c + r * n + 16 * w);
  }
  for (std::int64_t kk = 0; kk < k; ++kk) {
    __m512 bv[W];
#pragma GCC unroll 4
    for (int w = 0; w < W; ++w) bv[w] = _mm512_loadu_ps(b + kk * n + 16 * w);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * k + kk]);
#pragma GCC unroll 4
      for (int w = 0; w < W; ++w) acc[r][w] = _mm512_fmadd_ps(av, bv[w], acc[r][w]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int w = 0; w < W; ++w) _mm512_storeu_ps(c + r * n + 16 * w, acc[r][w]);
  }
}

template <int R>
SPITE_AVX512 void gemm_rows16(float* c, const float* a, const float* b, std::int64_t k, std::int64_t n) {
  std::int64_t j = 0;
  for (; j + 64 <= n; j += 64) gemm_block16<R, 4>(c + j, a, b + j, k, n);
  for (; j < n; j += 16) gemm_block16<R, 1>(c + j, a, b + j, k, n);
}

// 2^e for e in [-126, 127], exact.
SPITE_AVX512 inline __m512 pow2_16(__m512i e) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(127)), 23));
}

// expf8 (simd_x86_math.cpp: ref_expf) on 16 lanes, operation for operation.
SPITE_AVX512 inline __m512 expf16(__m512 x) {
  const __m512 r = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
  const __m512 n = _mm512_sub_ps(z, r);
  const __m512 neg_n = _mm512_sub_ps(_mm512_setzero_ps(), n);
  const __m512 b = _mm512_fmadd_ps(neg_n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fmadd_ps(neg_n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 j = _mm512_fmadd_ps(
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
      u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  const __m512i ni = _mm512_cvtps_epi32(n);
  const __m512i half = _mm512_srai_epi32(ni, 1);
  __m512 result = _mm512_mul_ps(_mm512_mul_ps(j, pow2_16(half)), pow2_16(_mm512_sub_epi32(ni, half)));
  const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
  const __mmask16 positive = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_GT_OQ);
  result = _mm512_mask_blend_ps(big, result, _mm512_maskz_mov_ps(positive, _mm512_set1_ps(__builtin_inff())));
  const __mmask16 minus_inf = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-__builtin_inff()), _CMP_EQ_OQ);
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~minus_inf), result);
}

// exp16: the chunk's exps in place, their reduce16 sum returned.
SPITE_AVX512 inline float exp_chunk(float* chunk, float max) {
  const __m512 e = expf16(_mm512_sub_ps(_mm512_loadu_ps(chunk), _mm512_set1_ps(max)));
  _mm512_storeu_ps(chunk, e);
  // reduce16: lanes 0-7 + 8-15, the halves of that added, then (s4[0] + s4[2]) + (s4[1] + s4[3]).
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(e), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

}  // namespace

SPITE_AVX512 float exp16_avx512(float* chunk, float max) { return exp_chunk(chunk, max); }

SPITE_AVX512 double exp_row_avx512(float* s, std::int64_t n, float max) {
  double sum = 0.0;
  for (std::int64_t j = 0; j < n; j += 16) sum += exp_chunk(s + j, max);
  return sum;
}

SPITE_AVX512 void swiglu_row_avx512(const float* g, const float* u, float* h, std::int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < n; i += 16) {
    const __m512 x = _mm512_loadu_ps(g + i);
    const __m512 e = expf16(_mm512_sub_ps(zero, x));
    _mm512_storeu_ps(h + i, _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(one, e)), _mm512_loadu_ps(u + i)));
  }
}

SPITE_AVX512 std::int64_t exp_nonpositive_avx512(const float* x, float* y, std::int64_t n, const std::int64_t* table) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 8);
  const __m512i t2 = _mm512_loadu_si512(table + 16), t3 = _mm512_loadu_si512(table + 24);
  const __m512d c0 = _mm512_set1_pd(0x1.c6af84b912394p-5 / 32 / 32 / 32), c1 = _mm512_set1_pd(0x1.ebfce50fac4f3p-3 / 32 / 32),
                c2 = _mm512_set1_pd(0x1.62e42ff0c52d6p-1 / 32), shift = _mm512_set1_pd(0x1.8p+52);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xf = _mm256_loadu_ps(x + i);
    const __m512d z = _mm512_mul_pd(_mm512_set1_pd(0x1.71547652b82fep0 * 32), _mm512_cvtps_pd(xf));
    const __m512d kd_shifted = _mm512_add_pd(z, shift);
    const __m512i ki = _mm512_castpd_si512(kd_shifted);
    const __m512d r = _mm512_sub_pd(z, _mm512_sub_pd(kd_shifted, shift));
    // The table's entry k % 32: two 16-entry lookups (VPERMT2Q takes index bits 0-3), bit 4
    // choosing between them.
    const __m512i lo = _mm512_permutex2var_epi64(t0, ki, t1), hi = _mm512_permutex2var_epi64(t2, ki, t3);
    const __m512i entry = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo, hi);
    const __m512i t = _mm512_add_epi64(entry, _mm512_slli_epi64(ki, 47));
    const __m512d p = _mm512_fmadd_pd(_mm512_fmadd_pd(c0, r, c1), _mm512_mul_pd(r, r), _mm512_fmadd_pd(c2, r, _mm512_set1_pd(1.0)));
    const __m256 e = _mm512_cvtpd_ps(_mm512_mul_pd(p, _mm512_castsi512_pd(t)));
    _mm256_storeu_ps(y + i, _mm256_andnot_ps(_mm256_cmp_ps(xf, _mm256_set1_ps(-0x1.9fe368p6f), _CMP_LT_OQ), e));
  }
  return i;
}

SPITE_AVX512 std::int64_t online_max_avx512(float* weight, float* rescale, std::int64_t n, float scale, float& max) {
  const __m512 lowest = _mm512_set1_ps(-__builtin_inff()), sc = _mm512_set1_ps(scale);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i up1 = _mm512_sub_epi32(lane, _mm512_set1_epi32(1)), up2 = _mm512_sub_epi32(lane, _mm512_set1_epi32(2));
  const __m512i up4 = _mm512_sub_epi32(lane, _mm512_set1_epi32(4)), up8 = _mm512_sub_epi32(lane, _mm512_set1_epi32(8));
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 s = _mm512_mul_ps(_mm512_loadu_ps(weight + i), sc);
    if (_mm512_cmp_ps_mask(s, s, _CMP_UNORD_Q) != 0) {
      max = online_max_scalar(weight + i, rescale + i, 16, scale, max);
      continue;
    }
    // The running maximum through each lane: each step takes the maximum with the lane k
    // before (the earlier value kept on ties, as the scalar pass keeps its maximum).
    __m512 v = _mm512_max_ps(s, _mm512_mask_permutexvar_ps(lowest, 0xfffe, up1, s));
    v = _mm512_max_ps(v, _mm512_mask_permutexvar_ps(lowest, 0xfffc, up2, v));
    v = _mm512_max_ps(v, _mm512_mask_permutexvar_ps(lowest, 0xfff0, up4, v));
    v = _mm512_max_ps(v, _mm512_mask_permutexvar_ps(lowest, 0xff00, up8, v));
    const __m512 before = _mm512_set1_ps(max);
    const __m512 through = _mm512_max_ps(v, before);                                  // the maximum after each key
    const __m512 prior = _mm512_mask_permutexvar_ps(before, 0xfffe, up1, through);   // ... before it
    const __mmask16 beats = _mm512_cmp_ps_mask(s, prior, _CMP_GT_OQ);
    _mm512_storeu_ps(weight + i, _mm512_maskz_sub_ps(static_cast<__mmask16>(~beats), s, through));
    _mm512_storeu_ps(rescale + i, _mm512_set1_ps(1.0f));
    if (beats != 0) {
      alignas(64) float sv[16], pv[16];
      _mm512_store_ps(sv, s);
      _mm512_store_ps(pv, prior);
      for (unsigned bits = beats; bits != 0; bits &= bits - 1) {
        const int l = __builtin_ctz(bits);
        rescale[i + l] = std::exp(pv[l] - sv[l]);
      }
    }
    max = _mm_cvtss_f32(_mm_permute_ps(_mm512_extractf32x4_ps(through, 3), 0xff));  // lane 15
  }
  return i;
}

SPITE_AVX512 float scale_mask_max_avx512(float* s, std::int64_t n, float scale, const std::uint8_t* visible) {
  const __m512 sc = _mm512_set1_ps(scale), lowest = _mm512_set1_ps(-__builtin_inff());
  __m512 m = lowest;
  for (std::int64_t j = 0; j < n; j += 16) {
    __m512 v = _mm512_mul_ps(_mm512_loadu_ps(s + j), sc);
    if (visible != nullptr) {
      const __mmask16 seen = _mm_test_epi8_mask(_mm_loadu_si128(reinterpret_cast<const __m128i*>(visible + j)), _mm_set1_epi8(-1));
      v = _mm512_mask_blend_ps(seen, lowest, v);
    }
    _mm512_storeu_ps(s + j, v);
    m = _mm512_max_ps(v, m);
  }
  return _mm512_reduce_max_ps(m);
}

SPITE_AVX512 void gemm_acc_avx512(float* c, const float* a, const float* b, std::int64_t m, std::int64_t k, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 4 <= m; i += 4) gemm_rows16<4>(c + i * n, a + i * k, b, k, n);
  for (; i < m; ++i) gemm_rows16<1>(c + i * n, a + i * k, b, k, n);
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
