// AVX2 / FMA / F16C versions of the attention pieces in simd_math.hpp. Each does per lane
// exactly what the scalar reference does per element: the same products, additions and fused
// multiply-adds in the same order, conversions that round the same way (round to nearest even,
// as F16C does), and ldexp as two exact power-of-two scalings, the second rounding once.
#include "simd_math.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ref_math.hpp"
#include "ref_quant.hpp"
#include "simd_x86.hpp"
#include "simd_x86_math_avx512.hpp"

namespace spite::dispatch::cpu {
namespace {

#define SPITE_AVX2 __attribute__((target("avx2,fma,f16c")))

SPITE_AVX2 inline __m256 widen8(const std::uint16_t* h) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
}

SPITE_AVX2 inline __m256 load8(const float* a) { return _mm256_loadu_ps(a); }
SPITE_AVX2 inline __m256 load8(const std::uint16_t* a) { return widen8(a); }

// 16 lane sums of products, `a` as floats or as f16.
template <class A>
SPITE_AVX2 float dot16_of(const A* a, const float* b, std::int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < n; i += 16) {
    lo = _mm256_add_ps(lo, _mm256_mul_ps(load8(a + i), _mm256_loadu_ps(b + i)));
    hi = _mm256_add_ps(hi, _mm256_mul_ps(load8(a + i + 8), _mm256_loadu_ps(b + i + 8)));
  }
  alignas(32) float lanes[16];
  _mm256_store_ps(lanes, lo);
  _mm256_store_ps(lanes + 8, hi);
  return reduce16(lanes);
}

SPITE_AVX2 float dot16(const float* a, const float* b, std::int64_t n) { return dot16_of(a, b, n); }
SPITE_AVX2 float dot16_h(const std::uint16_t* a, const float* b, std::int64_t n) { return dot16_of(a, b, n); }

SPITE_AVX2 void axpy_h(float* acc, const std::uint16_t* v, float p, std::int64_t n) {
  const __m256 pv = _mm256_set1_ps(p);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_mul_ps(pv, widen8(v + i))));
  }
  for (; i < n; ++i) acc[i] += p * _cvtsh_ss(v[i]);
}

SPITE_AVX2 void widen(const std::uint16_t* h, float* out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  }
  for (; i < n; ++i) out[i] = _cvtsh_ss(h[i]);
}

SPITE_AVX2 void round_f16(const float* in, float* out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = _cvtsh_ss(_cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// 2^e for e in [-126, 127], exact.
SPITE_AVX2 inline __m256 pow2(__m256i e) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23)); }

// ref_expf on 8 lanes.
SPITE_AVX2 inline __m256 expf8(__m256 x) {
  const __m256 r = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
  const __m256 n = _mm256_sub_ps(z, r);
  const __m256 neg_n = _mm256_sub_ps(_mm256_setzero_ps(), n);
  const __m256 b = _mm256_fmadd_ps(neg_n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                   _mm256_fmadd_ps(neg_n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
  const __m256i ni = _mm256_cvtps_epi32(n);  // n is an integer already
  // Where every lane has -87 <= x <= 88 (so -126 <= n <= 127), 2^n is one normal float and
  // ldexp(j, n) one multiply, which rounds once as ldexp does: the softmax's and SiLU's usual case
  // (`bench --attention 32:4:64 -d 1536 --tokens 512 -t 1`, AVX2 (Zen 3), alternated: 95.9 -> 92.5 ms).
  const __m256 usual = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ), _mm256_cmp_ps(x, _mm256_set1_ps(88.0f), _CMP_LE_OQ));
  if (_mm256_movemask_ps(usual) == 0xFF) return _mm256_mul_ps(j, pow2(ni));
  // Else ldexp(j, n) for |n| <= 192: two exact scalings by 2^(n/2) and 2^(n - n/2); only the
  // second can round (to a subnormal or infinity), once, as ldexp does.
  const __m256i half = _mm256_srai_epi32(ni, 1);
  __m256 result = _mm256_mul_ps(_mm256_mul_ps(j, pow2(half)), pow2(_mm256_sub_epi32(ni, half)));
  // |n| > 192: infinity or zero; x == -inf: zero.
  const __m256 big = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), n), _mm256_set1_ps(192.0f), _CMP_GT_OQ);
  const __m256 positive = _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_GT_OQ);
  const __m256 saturated = _mm256_and_ps(positive, _mm256_set1_ps(__builtin_inff()));
  result = _mm256_blendv_ps(result, saturated, big);
  const __m256 minus_inf = _mm256_cmp_ps(x, _mm256_set1_ps(-__builtin_inff()), _CMP_EQ_OQ);
  return _mm256_andnot_ps(minus_inf, result);
}

SPITE_AVX2 float exp16(float* chunk, float max) {
  if (has_avx512_kernels()) return x86::exp16_avx512(chunk, max);
  const __m256 m = _mm256_set1_ps(max);
  const __m256 lo = expf8(_mm256_sub_ps(_mm256_loadu_ps(chunk), m)), hi = expf8(_mm256_sub_ps(_mm256_loadu_ps(chunk + 8), m));
  _mm256_storeu_ps(chunk, lo);
  _mm256_storeu_ps(chunk + 8, hi);
  // reduce16: s8 = lanes 0-7 + 8-15, s4 = s8's halves added, then (s4[0] + s4[2]) + (s4[1] + s4[3]).
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

SPITE_AVX2 double exp_row(float* s, std::int64_t n, float max) {
  if (has_avx512_kernels()) return x86::exp_row_avx512(s, n, max);
  double sum = 0.0;
  for (std::int64_t j = 0; j < n; j += 16) sum += exp16(s + j, max);
  return sum;
}

SPITE_AVX2 float scale_mask_max(float* s, std::int64_t n, float scale, const std::uint8_t* visible) {
  if (has_avx512_kernels()) return x86::scale_mask_max_avx512(s, n, scale, visible);
  const __m256 sc = _mm256_set1_ps(scale), lowest = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 m = lowest;
  for (std::int64_t j = 0; j < n; j += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + j), sc);
    if (visible != nullptr) {
      const __m256i seen = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(visible + j)));
      v = _mm256_blendv_ps(lowest, v, _mm256_castsi256_ps(_mm256_cmpgt_epi32(seen, _mm256_setzero_si256())));
    }
    _mm256_storeu_ps(s + j, v);
    m = _mm256_max_ps(v, m);
  }
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_max_ss(h, _mm_shuffle_ps(h, h, 1)));
}

SPITE_AVX2 void swiglu16(const float* g, const float* u, float* h) {
  const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
  for (int i = 0; i < 16; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 e = expf8(_mm256_sub_ps(zero, x));
    _mm256_storeu_ps(h + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
  }
}

SPITE_AVX2 void swiglu_row(const float* g, const float* u, float* h, std::int64_t n) {
  if (has_avx512_kernels()) return x86::swiglu_row_avx512(g, u, h, n);
  for (std::int64_t i = 0; i < n; i += 16) swiglu16(g + i, u + i, h + i);
}

float dot_f16_blocks(const std::uint16_t* a, const float* b, std::int64_t n) { return x86::vec_dot_f16(a, b, n); }

// vec_dot_f16's fold of its lane groups: p[2g + h] is group g's half h; the groups added
// (0 + 2) + (1 + 3) per half, then the halves (reduce16's first step).
SPITE_AVX2 inline __m256 fold_groups(const __m256 (&p)[8]) {
  const __m256 h0 = _mm256_add_ps(_mm256_add_ps(p[0], p[4]), _mm256_add_ps(p[2], p[6]));
  const __m256 h1 = _mm256_add_ps(_mm256_add_ps(p[1], p[5]), _mm256_add_ps(p[3], p[7]));
  return _mm256_add_ps(h0, h1);
}

// fold_groups of the products x[i] * b(i) of a 64-element row, each exact (f16 values times
// f16-valued floats): an fma of one product onto another rounds their sum as the separate
// product and addition do, so groups 0 and 1 go onto 2 and 3 by fmas, with the same bits.
template <class B>
SPITE_AVX2 inline __m256 fold_products(const __m256 (&x)[8], const B& b) {
  const __m256 h0 = _mm256_add_ps(_mm256_fmadd_ps(x[0], b(0), _mm256_mul_ps(x[4], b(4))),
                                  _mm256_fmadd_ps(x[2], b(2), _mm256_mul_ps(x[6], b(6))));
  const __m256 h1 = _mm256_add_ps(_mm256_fmadd_ps(x[1], b(1), _mm256_mul_ps(x[5], b(5))),
                                  _mm256_fmadd_ps(x[3], b(3), _mm256_mul_ps(x[7], b(7))));
  return _mm256_add_ps(h0, h1);
}

// One 64-element row as vec_dot_f16 sums it, up to its 8-lane fold: each of the 64 products
// alone in its lane of group g = e / 16, the groups folded (0 + 2) + (1 + 3) per half and the
// halves added (reduce16's first step).
SPITE_AVX2 inline __m256 fold64(const std::uint16_t* a, const __m256 (&b)[8]) {
  __m256 x[8];
  for (int i = 0; i < 8; ++i) x[i] = widen8(a + 8 * i);
  return fold_products(x, [&](int i) SPITE_AVX2 { return b[i]; });
}

// One 128-element row as vec_dot_f16 sums it, up to its 8-lane fold: lane group g = e % 64 / 16
// takes its second block's product onto its first's (an fma onto zero), then the groups fold as
// in fold64. b from memory: the 16 vectors of a 128-element query do not fit in registers.
SPITE_AVX2 inline __m256 fold128(const std::uint16_t* a, const float* b) {
  __m256 p[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    p[i] = _mm256_fmadd_ps(widen8(a + 8 * i), _mm256_loadu_ps(b + 8 * i), _mm256_setzero_ps());
    p[i] = _mm256_fmadd_ps(widen8(a + 64 + 8 * i), _mm256_loadu_ps(b + 64 + 8 * i), p[i]);
  }
  return fold_groups(p);
}

// reduce16's last steps for four rows at once: s4 = low + high 128 bits, then
// (s4[0] + s4[2]) + (s4[1] + s4[3]) per row.
SPITE_AVX2 inline __m128 finish4(__m256 r0, __m256 r1, __m256 r2, __m256 r3) {
  const auto s4 = [](__m256 v) SPITE_AVX2 { return _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); };
  const __m128 a = s4(r0), b = s4(r1), c = s4(r2), d = s4(r3);
  const __m128 ab = _mm_add_ps(_mm_unpacklo_ps(a, b), _mm_unpackhi_ps(a, b));  // [a02 b02 a13 b13]
  const __m128 cd = _mm_add_ps(_mm_unpacklo_ps(c, d), _mm_unpackhi_ps(c, d));
  return _mm_add_ps(_mm_movelh_ps(ab, cd), _mm_movehl_ps(cd, ab));  // [a b c d]
}

// The keys' fetch distances, shared with the AVX-512 pieces (simd_x86_math_avx512.hpp).
using x86::fetch_row;
using x86::key_ahead;
using x86::value_ahead;

// One row of `blocks` 64-element blocks as vec_dot_f16 sums them, up to its 8-lane fold: lane
// group g = e % 64 / 16 takes the blocks' products in order by fmas from zero (fold128's sums
// for two blocks; one head of 128 keeps fold128, whose fixed two blocks measured faster:
// `bench --attention 32:32:128 -d 1024 -t 1` 30.1 against 35.7 ns per head and key).
SPITE_AVX2 inline __m256 fold_blocks(const std::uint16_t* a, const float* b, std::int64_t blocks) {
  __m256 p[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) p[i] = _mm256_setzero_ps();
  for (std::int64_t k = 0; k < blocks; ++k) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) p[i] = _mm256_fmadd_ps(widen8(a + 64 * k + 8 * i), _mm256_loadu_ps(b + 64 * k + 8 * i), p[i]);
  }
  return fold_groups(p);
}

// vec_dot_f16's tail for four rows: from their block sums, each row's exact products of the
// elements [from, n) added one by one in double (n - from a multiple of 8). The four rows' sums
// are the lanes of one register, so their chains of dependent additions run side by side
// instead of one after another.
SPITE_AVX2 inline __m128 tail4(const std::uint16_t* const (&r)[4], const float* b, std::int64_t from, std::int64_t n, __m128 sums) {
  __m256d s = _mm256_cvtps_pd(sums);
  for (std::int64_t e = from; e < n; e += 8) {
    const __m256 q = _mm256_loadu_ps(b + e);
    const __m256 p0 = _mm256_mul_ps(widen8(r[0] + e), q), p1 = _mm256_mul_ps(widen8(r[1] + e), q);
    const __m256 p2 = _mm256_mul_ps(widen8(r[2] + e), q), p3 = _mm256_mul_ps(widen8(r[3] + e), q);
    // Transposed: u[j] holds element j of the four rows in its low half, element j + 4 in its
    // high half.
    const __m256 t0 = _mm256_unpacklo_ps(p0, p1), t1 = _mm256_unpackhi_ps(p0, p1);
    const __m256 t2 = _mm256_unpacklo_ps(p2, p3), t3 = _mm256_unpackhi_ps(p2, p3);
    const __m256 u[4] = {_mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)),
                         _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2))};
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) s = _mm256_add_pd(s, _mm256_cvtps_pd(_mm256_castps256_ps128(u[j])));
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) s = _mm256_add_pd(s, _mm256_cvtps_pd(_mm256_extractf128_ps(u[j], 1)));
  }
  return _mm256_cvtpd_ps(s);
}

SPITE_AVX2 void dot_f16_rows(const std::uint16_t* rows, std::int64_t stride, const std::int32_t* keys, std::int64_t count,
                             const float* b, std::int64_t n, float* out) {
  std::int64_t i = 0;
  if (n == 64) {  // the common head size, four keys at a time
    __m256 bv[8];
    for (int k = 0; k < 8; ++k) bv[k] = _mm256_loadu_ps(b + 8 * k);
    for (; i + 4 <= count; i += 4) {
      for (int k = 0; k < 4; ++k) fetch_row(rows + keys[i + k + key_ahead] * stride, 128);
      const __m256 r0 = fold64(rows + keys[i] * stride, bv), r1 = fold64(rows + keys[i + 1] * stride, bv);
      const __m256 r2 = fold64(rows + keys[i + 2] * stride, bv), r3 = fold64(rows + keys[i + 3] * stride, bv);
      _mm_storeu_ps(out + i, finish4(r0, r1, r2, r3));
    }
  } else if (n == 128) {  // the other common head size
    for (; i + 4 <= count; i += 4) {
      for (int k = 0; k < 4; ++k) fetch_row(rows + keys[i + k + key_ahead] * stride, 256);
      const __m256 r0 = fold128(rows + keys[i] * stride, b), r1 = fold128(rows + keys[i + 1] * stride, b);
      const __m256 r2 = fold128(rows + keys[i + 2] * stride, b), r3 = fold128(rows + keys[i + 3] * stride, b);
      _mm_storeu_ps(out + i, finish4(r0, r1, r2, r3));
    }
  }
  // Other head sizes (Gemma's 256, Phi-3's 96, Phi-2's 80): four keys at a time where whole
  // 8-element slices make up the tail, else key by key; each row fetched as above (up to 512
  // bytes, with its last line: such rows need not start one). Phi-3's heads of 96: the 32-element
  // tail's additions in double, one key after another, were half of its attention.
  const int fetched = static_cast<int>(std::min<std::int64_t>(n, 256)) * 2;
  const auto fetch = [&](std::int64_t k) {
    const std::uint16_t* ahead = rows + keys[k + key_ahead] * stride;
    fetch_row(ahead, fetched);
    _mm_prefetch(reinterpret_cast<const char*>(ahead) + fetched - 1, _MM_HINT_T0);
  };
  if (n != 64 && n != 128 && n % 8 == 0) {
    const std::int64_t blocks = n / 64, from = 64 * blocks;
    for (; i + 4 <= count; i += 4) {
      const std::uint16_t* r[4];
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        fetch(i + k);
        r[k] = rows + keys[i + k] * stride;
      }
      __m128 sums = _mm_setzero_ps();
      if (blocks > 0) sums = finish4(fold_blocks(r[0], b, blocks), fold_blocks(r[1], b, blocks), fold_blocks(r[2], b, blocks),
                                     fold_blocks(r[3], b, blocks));
      if (from < n) sums = tail4(r, b, from, n, sums);
      _mm_storeu_ps(out + i, sums);
    }
  }
  for (; i < count; ++i) {
    fetch(i);
    out[i] = x86::vec_dot_f16(rows + keys[i] * stride, b, n);
  }
}

// Up to 16 heads' scores of four keys at a time (64-element heads): each key row widened once for
// all the heads (one widening per element instead of one per element and head: the widening,
// not the fma, limits a single head's dot products), every head's sums as fold64 and finish4
// make them. Returns the keys done, a multiple of 4.
SPITE_AVX2 std::int64_t dot_f16_rows_heads64(const std::uint16_t* rows, std::int64_t stride, const std::int32_t* keys,
                                             std::int64_t count, const float* b, float* out, std::int64_t out_stride,
                                             std::int64_t heads) {
  constexpr std::int64_t max_heads = 16;
  __m256 folded[max_heads][4];
  const std::int64_t done = count / 4 * 4;
  for (std::int64_t h0 = 0; h0 < heads; h0 += max_heads) {
    const std::int64_t hn = std::min(max_heads, heads - h0);
    for (std::int64_t i = 0; i < done; i += 4) {
      for (int k = 0; k < 4; ++k) {
        if (h0 == 0) fetch_row(rows + keys[i + k + key_ahead] * stride, 128);
        const std::uint16_t* a = rows + keys[i + k] * stride;
        __m256 x[8];
#pragma GCC unroll 8
        for (int e = 0; e < 8; ++e) x[e] = widen8(a + 8 * e);
        for (std::int64_t h = 0; h < hn; ++h) {
          const float* q = b + (h0 + h) * 64;
          folded[h][k] = fold_products(x, [&](int e) SPITE_AVX2 { return _mm256_loadu_ps(q + 8 * e); });
        }
      }
      for (std::int64_t h = 0; h < hn; ++h) {
        _mm_storeu_ps(out + (h0 + h) * out_stride + i, finish4(folded[h][0], folded[h][1], folded[h][2], folded[h][3]));
      }
    }
  }
  return done;
}

// H heads' fold of one row of M 64-element blocks at a (fold128 for M = 2, fold_blocks for
// any), queries b + h * 64 M: each slice e of the M blocks widened once for the H heads, each
// head's products p[e] (the exact product of block 0's slice, then block m's added by an fma,
// in block order: the bits of vec_dot_f16's lanes) taken in fold_groups' order, so that at most
// three of its partial sums are live.
template <int H, int M>
SPITE_AVX2 inline void fold_heads(const std::uint16_t* a, const float* b, __m256 (&r)[H]) {
  __m256 h0[H], s15[H], part[H];
  const auto products = [&](int e, const auto& take) SPITE_AVX2 {
    __m256 x[M];
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m) x[m] = widen8(a + 64 * m + 8 * e);
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      const float* q = b + 64 * M * h + 8 * e;
      __m256 p = _mm256_mul_ps(x[0], _mm256_loadu_ps(q));
#pragma GCC unroll 4
      for (int m = 1; m < M; ++m) p = _mm256_fmadd_ps(x[m], _mm256_loadu_ps(q + 64 * m), p);
      take(h, p);
    }
  };
  // h0 = (p0 + p4) + (p2 + p6), h1 = (p1 + p5) + (p3 + p7), r = h0 + h1.
  products(0, [&](int h, __m256 p) SPITE_AVX2 { part[h] = p; });
  products(4, [&](int h, __m256 p) SPITE_AVX2 { h0[h] = _mm256_add_ps(part[h], p); });
  products(2, [&](int h, __m256 p) SPITE_AVX2 { part[h] = p; });
  products(6, [&](int h, __m256 p) SPITE_AVX2 { h0[h] = _mm256_add_ps(h0[h], _mm256_add_ps(part[h], p)); });
  products(1, [&](int h, __m256 p) SPITE_AVX2 { part[h] = p; });
  products(5, [&](int h, __m256 p) SPITE_AVX2 { s15[h] = _mm256_add_ps(part[h], p); });
  products(3, [&](int h, __m256 p) SPITE_AVX2 { part[h] = p; });
  products(7, [&](int h, __m256 p) SPITE_AVX2 { r[h] = _mm256_add_ps(h0[h], _mm256_add_ps(s15[h], _mm256_add_ps(part[h], p))); });
}

// H heads' scores of four keys at a time (heads of M 64-element blocks: 128, 256), each key row
// widened once for the H heads instead of once per head (Zen 3, `bench --attention 32:8:128 -d
// 1024 -t 1`: 3-5 % less per head and key). Returns the keys done, a multiple of 4.
template <int H, int M>
SPITE_AVX2 std::int64_t dot_f16_rows_heads_blocks(const std::uint16_t* rows, std::int64_t stride, const std::int32_t* keys,
                                                  std::int64_t count, const float* b, float* out, std::int64_t out_stride) {
  const std::int64_t done = count / 4 * 4;
  // Each key's folded sums wait in memory for the 4-key reduction: four keys' sums of 4 heads
  // would take all 16 registers the folds need.
  alignas(32) float folded[4][H][8];
  for (std::int64_t i = 0; i < done; i += 4) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      fetch_row(rows + keys[i + k + key_ahead] * stride, 128 * M);
      __m256 r[H];
      fold_heads<H, M>(rows + keys[i + k] * stride, b, r);
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h) _mm256_store_ps(folded[k][h], r[h]);
    }
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      _mm_storeu_ps(out + h * out_stride + i, finish4(_mm256_load_ps(folded[0][h]), _mm256_load_ps(folded[1][h]),
                                                      _mm256_load_ps(folded[2][h]), _mm256_load_ps(folded[3][h])));
    }
  }
  return done;
}

SPITE_AVX2 void dot_f16_rows_heads(const std::uint16_t* rows, std::int64_t stride, const std::int32_t* keys, std::int64_t count,
                                   const float* b, std::int64_t n, float* out, std::int64_t out_stride, std::int64_t heads) {
  std::int64_t h = 0;
  if ((n == 64 || n == 128) && has_avx512_kernels()) {
    const std::int64_t done = x86::dot_f16_rows_heads_avx512(rows, stride, keys, count, b, n, out, out_stride, heads);
    for (const std::int64_t h2 = heads / 2 * 2; h < h2; ++h) {
      dot_f16_rows(rows, stride, keys + done, count - done, b + h * n, n, out + h * out_stride + done);
    }
  } else if (n == 64 && heads > 1) {
    const std::int64_t done = dot_f16_rows_heads64(rows, stride, keys, count, b, out, out_stride, heads);
    for (; h < heads; ++h) dot_f16_rows(rows, stride, keys + done, count - done, b + h * n, n, out + h * out_stride + done);
  } else if ((n == 128 || n == 256) && heads > 1) {
    // Heads of 128 4 at a time, then 3 or 2; of 256 (Gemma's) 2 at a time, as their four blocks'
    // slices and the partial sums fill the registers. One left alone goes through dot_f16_rows.
    for (std::int64_t hn = 0; heads - h > 1; h += hn) {
      hn = std::min<std::int64_t>(n == 128 ? 4 : 2, heads - h);
      const float* bh = b + h * n;
      float* oh = out + h * out_stride;
      const std::int64_t done = n == 256  ? dot_f16_rows_heads_blocks<2, 4>(rows, stride, keys, count, bh, oh, out_stride)
                                : hn == 4 ? dot_f16_rows_heads_blocks<4, 2>(rows, stride, keys, count, bh, oh, out_stride)
                                : hn == 3 ? dot_f16_rows_heads_blocks<3, 2>(rows, stride, keys, count, bh, oh, out_stride)
                                          : dot_f16_rows_heads_blocks<2, 2>(rows, stride, keys, count, bh, oh, out_stride);
      for (std::int64_t j = 0; j < hn; ++j) {
        dot_f16_rows(rows, stride, keys + done, count - done, bh + j * n, n, oh + j * out_stride + done);
      }
    }
  }
  for (; h < heads; ++h) dot_f16_rows(rows, stride, keys, count, b + h * n, n, out + h * out_stride);
}

constexpr int k_round = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// glibc's expf: x / ln2 * 32 split into an integer k and a remainder r (|r| <= 1/2), 2^(k/32)
// from the table (the integer part of k/32 added to its exponent), 2^(r/32) as a cubic, all in
// double with fused multiply-adds where glibc's FMA build has them, rounded once to float.
// Below -0x1.9fe368p6 the result underflows to 0, as glibc returns.
struct exp2_table {
  alignas(32) std::int64_t bits[32];
  exp2_table() {
    for (int i = 0; i < 32; ++i) {
      const double d = std::exp2(i / 32.0);
      std::uint64_t u;
      std::memcpy(&u, &d, sizeof u);
      bits[i] = static_cast<std::int64_t>(u - (static_cast<std::uint64_t>(i) << 47));
    }
  }
};
const exp2_table k_exp2;

SPITE_AVX2 inline __m128 libm_expf4(__m128 x) {
  const __m256d z = _mm256_mul_pd(_mm256_set1_pd(0x1.71547652b82fep0 * 32), _mm256_cvtps_pd(x));
  const __m256d shift = _mm256_set1_pd(0x1.8p+52);
  const __m256d kd_shifted = _mm256_add_pd(z, shift);
  const __m256i ki = _mm256_castpd_si256(kd_shifted);
  const __m256d r = _mm256_sub_pd(z, _mm256_sub_pd(kd_shifted, shift));
  const __m256i index = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
  const __m256i t = _mm256_add_epi64(_mm256_i64gather_epi64(reinterpret_cast<const long long*>(k_exp2.bits), index, 8),
                                     _mm256_slli_epi64(ki, 47));
  const __m256d c0 = _mm256_set1_pd(0x1.c6af84b912394p-5 / 32 / 32 / 32), c1 = _mm256_set1_pd(0x1.ebfce50fac4f3p-3 / 32 / 32),
                c2 = _mm256_set1_pd(0x1.62e42ff0c52d6p-1 / 32);
  const __m256d p = _mm256_fmadd_pd(_mm256_fmadd_pd(c0, r, c1), _mm256_mul_pd(r, r), _mm256_fmadd_pd(c2, r, _mm256_set1_pd(1.0)));
  const __m128 y = _mm256_cvtpd_ps(_mm256_mul_pd(p, _mm256_castsi256_pd(t)));
  return _mm_andnot_ps(_mm_cmplt_ps(x, _mm_set1_ps(-0x1.9fe368p6f)), y);
}

SPITE_AVX2 void exp_nonpositive(const float* x, float* y, std::int64_t n) {
  std::int64_t i = has_avx512_kernels() ? x86::exp_nonpositive_avx512(x, y, n, k_exp2.bits) : 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, libm_expf4(_mm_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = std::exp(x[i]);
}

SPITE_AVX2 inline __m256 round8(__m256 x) { return _mm256_cvtph_ps(_mm256_cvtps_ph(x, k_round)); }

// W vectors of 8 dimensions kept in registers (as f16-rounded floats) over all the keys,
// starting from out.
template <int W>
SPITE_AVX2 void accumulate_block(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                                 const float* weight, const float* rescale, std::int64_t n) {
  __m256 acc[W];
  for (int w = 0; w < W; ++w) acc[w] = _mm256_loadu_ps(out + 8 * w);
  for (std::int64_t i = 0; i < n; ++i) {
    if (rescale[i] != 1.0f) {
      const __m256 s = _mm256_set1_ps(rescale[i]);
      for (auto& a : acc) a = round8(_mm256_mul_ps(a, s));
    }
    const std::uint16_t* v = values + keys[i] * stride;
    fetch_row(values + keys[i + value_ahead] * stride, 16 * W);
    const __m256 p = _mm256_set1_ps(weight[i]);
    for (int w = 0; w < W; ++w) acc[w] = round8(_mm256_fmadd_ps(widen8(v + 8 * w), p, acc[w]));
  }
  for (int w = 0; w < W; ++w) _mm256_storeu_ps(out + 8 * w, acc[w]);
}

// The denominator in the same order as the scalar definition, its fused multiply-adds inline
// (the scalar definition's std::fma is a library call in a file built without FMA).
SPITE_AVX2 inline float denominator(float sum, const float* weight, const float* rescale, std::int64_t n) {
  __m128 s = _mm_set_ss(sum);
  for (std::int64_t i = 0; i < n; ++i) s = _mm_fmadd_ss(s, _mm_set_ss(rescale[i]), _mm_set_ss(weight[i]));
  return _mm_cvtss_f32(s);
}

// H heads x 32 dimensions in 4H registers over all the keys. The loop is bound by the f16
// conversions (each value widened, each sum rounded to f16 and back): the heads of a group share
// the value rows, so each value vector is widened once for all H of them. A rescale multiplies every head when any has one:
// the others multiply by 1, which leaves an f16 value unchanged. With sums, the heads'
// denominators too: their scalar chains run beside the vector ones instead of after them.
template <int H>
SPITE_AVX2 void accumulate_heads_block(float* out, std::int64_t out_stride, const std::uint16_t* values, std::int64_t stride,
                                       const std::int32_t* keys, const float* weight, const float* rescale,
                                       std::int64_t w_stride, std::int64_t n, float* sums) {
  constexpr int W = 4;
  __m256 acc[H][W];
  __m128 sum[H];
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
    sum[h] = _mm_set_ss(sums != nullptr ? sums[h] : 0.0f);
#pragma GCC unroll 4
    for (int w = 0; w < W; ++w) acc[h][w] = _mm256_loadu_ps(out + h * out_stride + 8 * w);
  }
  for (std::int64_t i = 0; i < n; ++i) {
    bool rescaled = false;
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) rescaled |= rescale[h * w_stride + i] != 1.0f;
    if (rescaled) {
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h) {
        const __m256 s = _mm256_set1_ps(rescale[h * w_stride + i]);
#pragma GCC unroll 4
        for (int w = 0; w < W; ++w) acc[h][w] = round8(_mm256_mul_ps(acc[h][w], s));
      }
    }
    if (sums != nullptr) {
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h) {
        sum[h] = _mm_fmadd_ss(sum[h], _mm_set_ss(rescale[h * w_stride + i]), _mm_set_ss(weight[h * w_stride + i]));
      }
    }
    const std::uint16_t* v = values + keys[i] * stride;
    fetch_row(values + keys[i + value_ahead] * stride, 64);
#pragma GCC unroll 4
    for (int w = 0; w < W; ++w) {
      const __m256 x = widen8(v + 8 * w);
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h) {
        acc[h][w] = round8(_mm256_fmadd_ps(x, _mm256_broadcast_ss(weight + h * w_stride + i), acc[h][w]));
      }
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
    if (sums != nullptr) sums[h] = _mm_cvtss_f32(sum[h]);
#pragma GCC unroll 4
    for (int w = 0; w < W; ++w) _mm256_storeu_ps(out + h * out_stride + 8 * w, acc[h][w]);
  }
}

// The heads' denominators are taken with their first 32 dimensions.
template <int H>
SPITE_AVX2 void accumulate_heads(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                                 const float* weight, const float* rescale, std::int64_t w_stride, std::int64_t n,
                                 std::int64_t dv, float* sums) {
  for (std::int64_t d = 0; d < dv; d += 32) {
    accumulate_heads_block<H>(out + d, dv, values + d, stride, keys, weight, rescale, w_stride, n, d == 0 ? sums : nullptr);
  }
}

SPITE_AVX2 float accumulate_f16(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                                const float* weight, const float* rescale, std::int64_t n, std::int64_t dv, float sum) {
  std::int64_t d = 0;
  if (has_avx512_kernels()) d = x86::accumulate_f16_avx512(out, values, stride, keys, weight, rescale, n, dv);
  for (; d + 64 <= dv; d += 64) accumulate_block<8>(out + d, values + d, stride, keys, weight, rescale, n);
  // What is left in as few passes over the keys as whole blocks of 8 allow (Phi-3's heads of 96:
  // 64 + 32, Phi-2's 80: 64 + 16).
  if (d + 32 <= dv) {
    accumulate_block<4>(out + d, values + d, stride, keys, weight, rescale, n);
    d += 32;
  }
  if (d + 16 <= dv) {
    accumulate_block<2>(out + d, values + d, stride, keys, weight, rescale, n);
    d += 16;
  }
  for (; d + 8 <= dv; d += 8) accumulate_block<1>(out + d, values + d, stride, keys, weight, rescale, n);
  if (d < dv) return accumulate_f16_scalar(out, values, stride, keys, weight, rescale, n, d, dv, sum);
  return denominator(sum, weight, rescale, n);
}

SPITE_AVX2 void accumulate_f16_heads(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                                     const float* weight, const float* rescale, std::int64_t w_stride, std::int64_t n,
                                     std::int64_t dv, float* sums, std::int64_t heads) {
  if ((dv == 64 || dv == 128) && has_avx512_kernels()) {
    x86::accumulate_f16_heads_avx512(out, values, stride, keys, weight, rescale, w_stride, n, sums, heads, dv);
    return;
  }
  std::int64_t h = 0;
  if (dv % 32 == 0 && !has_avx512_kernels()) {
    // Groups of 3 heads, and of 2 where 3 would leave one alone (4 heads: 2 + 2).
    while (heads - h >= 2) {
      const bool pair = heads - h == 2 || heads - h == 4;
      float* o = out + h * dv;
      const float* w = weight + h * w_stride;
      const float* r = rescale + h * w_stride;
      if (pair) {
        accumulate_heads<2>(o, values, stride, keys, w, r, w_stride, n, dv, sums + h);
      } else {
        accumulate_heads<3>(o, values, stride, keys, w, r, w_stride, n, dv, sums + h);
      }
      h += pair ? 2 : 3;
    }
  }
  for (; h < heads; ++h) {
    sums[h] = accumulate_f16(out + h * dv, values, stride, keys, weight + h * w_stride, rescale + h * w_stride, n, dv, sums[h]);
  }
}

// A block of R rows x 8*W columns of c kept in registers over the whole k loop.
template <int R, int W>
SPITE_AVX2 inline void gemm_block(float* c, const float* a, const float* b, std::int64_t k, std::int64_t n) {
  __m256 acc[R][W];
  for (int r = 0; r < R; ++r) {
    for (int w = 0; w < W; ++w) acc[r][w] = _mm256_loadu_ps(c + r * n + 8 * w);
  }
  for (std::int64_t kk = 0; kk < k; ++kk) {
    __m256 bv[W];
    for (int w = 0; w < W; ++w) bv[w] = _mm256_loadu_ps(b + kk * n + 8 * w);
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_set1_ps(a[r * k + kk]);
      for (int w = 0; w < W; ++w) acc[r][w] = _mm256_fmadd_ps(av, bv[w], acc[r][w]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int w = 0; w < W; ++w) _mm256_storeu_ps(c + r * n + 8 * w, acc[r][w]);
  }
}

template <int R>
SPITE_AVX2 void gemm_rows(float* c, const float* a, const float* b, std::int64_t k, std::int64_t n) {
  std::int64_t j = 0;
  for (; j + 16 <= n; j += 16) gemm_block<R, 2>(c + j, a, b + j, k, n);
  for (; j + 8 <= n; j += 8) gemm_block<R, 1>(c + j, a, b + j, k, n);
  for (; j < n; ++j) {
    for (int r = 0; r < R; ++r) {
      float s = c[r * n + j];
      for (std::int64_t kk = 0; kk < k; ++kk) s = std::fma(a[r * k + kk], b[kk * n + j], s);
      c[r * n + j] = s;
    }
  }
}

SPITE_AVX2 void gemm_acc(float* c, const float* a, const float* b, std::int64_t m, std::int64_t k, std::int64_t n) {
  if (n % 16 == 0 && has_avx512_kernels()) return x86::gemm_acc_avx512(c, a, b, m, k, n);
  std::int64_t i = 0;
  for (; i + 4 <= m; i += 4) gemm_rows<4>(c + i * n, a + i * k, b, k, n);
  for (; i < m; ++i) gemm_rows<1>(c + i * n, a + i * k, b, k, n);
}

// online_max_scalar 8 keys at a time: the running maximum through each lane by three shifted
// maxima, the lanes whose score beats the maximum before them found by one comparison (their
// rescales by the C library's expf, one at a time, as the scalar pass: new maxima are rare after
// the first keys). A chunk with a NaN score goes the scalar way (max_ps would not keep the
// scalar comparison's answer for it).
SPITE_AVX2 float online_max(float* weight, float* rescale, std::int64_t n, float scale, float max) {
  if (has_avx512_kernels()) {
    const std::int64_t done = x86::online_max_avx512(weight, rescale, n, scale, max);
    weight += done;
    rescale += done;
    n -= done;
  }
  const __m256 lowest = _mm256_set1_ps(-std::numeric_limits<float>::infinity()), sc = _mm256_set1_ps(scale);
  const __m256i up1 = _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6), up2 = _mm256_setr_epi32(0, 0, 0, 1, 2, 3, 4, 5);
  const __m256i up4 = _mm256_setr_epi32(0, 0, 0, 0, 0, 1, 2, 3);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(weight + i), sc);
    if (_mm256_movemask_ps(_mm256_cmp_ps(s, s, _CMP_UNORD_Q)) != 0) {
      max = online_max_scalar(weight + i, rescale + i, 8, scale, max);
      continue;
    }
    __m256 v = _mm256_max_ps(s, _mm256_blend_ps(_mm256_permutevar8x32_ps(s, up1), lowest, 0x01));
    v = _mm256_max_ps(v, _mm256_blend_ps(_mm256_permutevar8x32_ps(v, up2), lowest, 0x03));
    v = _mm256_max_ps(v, _mm256_blend_ps(_mm256_permutevar8x32_ps(v, up4), lowest, 0x0F));
    const __m256 before = _mm256_set1_ps(max);
    const __m256 through = _mm256_max_ps(v, before);  // the maximum after each key
    const __m256 prior = _mm256_blend_ps(_mm256_permutevar8x32_ps(through, up1), before, 0x01);  // ... before it
    const __m256 beats = _mm256_cmp_ps(s, prior, _CMP_GT_OQ);
    _mm256_storeu_ps(weight + i, _mm256_blendv_ps(_mm256_sub_ps(s, through), _mm256_setzero_ps(), beats));
    _mm256_storeu_ps(rescale + i, _mm256_set1_ps(1.0f));
    if (int bits = _mm256_movemask_ps(beats); bits != 0) {
      alignas(32) float sv[8], pv[8];
      _mm256_store_ps(sv, s);
      _mm256_store_ps(pv, prior);
      for (; bits != 0; bits &= bits - 1) {
        const int l = __builtin_ctz(static_cast<unsigned>(bits));
        rescale[i + l] = std::exp(pv[l] - sv[l]);
      }
    }
    max = _mm256_cvtss_f32(_mm256_permutevar8x32_ps(through, _mm256_set1_epi32(7)));
  }
  return online_max_scalar(weight + i, rescale + i, n - i, scale, max);
}

// One pair by the scalar formula (the tails of rope_heads).
SPITE_AVX2 inline void rotate_pair(float* v, std::int64_t i, std::int64_t j, float c, float s) {
  const float x0 = v[i], x1 = v[j];
  v[i] = std::fma(x0, c, -(x1 * s));
  v[j] = std::fma(x0, s, x1 * c);
}

// [c p, c p+1, c p+4, c p+5 | c p+2, c p+3, c p+6, c p+7] (as the shuffles of rope_heads leave
// them) with its 64-bit pieces in order.
SPITE_AVX2 inline __m256 in_order(__m256 q) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(q), _MM_SHUFFLE(3, 1, 2, 0)));
}

// 8 pairs per step. Adjacent pairs: each lane's partner by a swap within pairs, the even lanes'
// formula and the odd lanes' computed on all 8 and blended. Neox: the halves as they lie, the
// cos and sin of 8 pairs picked out of cos_sin by shuffles.
SPITE_AVX2 void rope_heads(float* x, std::int64_t n_head, std::int64_t head_dim, const float* cos_sin, std::int64_t n_dims,
                           bool neox) {
  const std::int64_t half = n_dims / 2;
  for (std::int64_t h = 0; h < n_head; ++h) {
    float* v = x + h * head_dim;
    std::int64_t p = 0;
    if (neox) {
      for (; p + 8 <= half; p += 8) {
        const __m256 a = _mm256_loadu_ps(cos_sin + 2 * p), b = _mm256_loadu_ps(cos_sin + 2 * p + 8);
        const __m256 c = in_order(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
        const __m256 s = in_order(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
        const __m256 x0 = _mm256_loadu_ps(v + p), x1 = _mm256_loadu_ps(v + p + half);
        _mm256_storeu_ps(v + p, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
        _mm256_storeu_ps(v + p + half, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
      }
      for (; p < half; ++p) rotate_pair(v, p, p + half, cos_sin[2 * p], cos_sin[2 * p + 1]);
    } else {
      for (; p + 4 <= half; p += 4) {
        const __m256 cs = _mm256_loadu_ps(cos_sin + 2 * p);
        const __m256 c = _mm256_moveldup_ps(cs), s = _mm256_movehdup_ps(cs);
        const __m256 own = _mm256_loadu_ps(v + 2 * p), partner = _mm256_permute_ps(own, _MM_SHUFFLE(2, 3, 0, 1));
        const __m256 first = _mm256_fmsub_ps(own, c, _mm256_mul_ps(partner, s));     // x0' in even lanes
        const __m256 second = _mm256_fmadd_ps(partner, s, _mm256_mul_ps(own, c));   // x1' in odd lanes
        _mm256_storeu_ps(v + 2 * p, _mm256_blend_ps(first, second, 0xAA));
      }
      for (; p < half; ++p) rotate_pair(v, 2 * p, 2 * p + 1, cos_sin[2 * p], cos_sin[2 * p + 1]);
    }
  }
}

// The 4 rows side by side: a vector of 4 doubles holds row k's sum in lane k, and each element
// index adds its 4 products (a 4 x 4 transpose of the loads) with one addition. Each lane still
// adds its row's products one after the other; the 4 chains run together, and the loads,
// products and conversions go 4 at a time (one row alone takes about 4 cycles per element,
// the latency of a double addition).
SPITE_AVX2 void sum_squares4(const float* x, std::int64_t stride, std::int64_t n, double* sums) {
  const float* r[4] = {x, x + stride, x + 2 * stride, x + 3 * stride};
  __m256d s = _mm256_setzero_pd();
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m128 a = _mm_loadu_ps(r[0] + i), b = _mm_loadu_ps(r[1] + i), c = _mm_loadu_ps(r[2] + i), d = _mm_loadu_ps(r[3] + i);
    _MM_TRANSPOSE4_PS(a, b, c, d);  // a: element i of the 4 rows, b: i + 1, ...
    s = _mm256_add_pd(s, _mm256_cvtps_pd(_mm_mul_ps(a, a)));
    s = _mm256_add_pd(s, _mm256_cvtps_pd(_mm_mul_ps(b, b)));
    s = _mm256_add_pd(s, _mm256_cvtps_pd(_mm_mul_ps(c, c)));
    s = _mm256_add_pd(s, _mm256_cvtps_pd(_mm_mul_ps(d, d)));
  }
  _mm256_storeu_pd(sums, s);
  for (; i < n; ++i) {
    for (int k = 0; k < 4; ++k) sums[k] += static_cast<double>(r[k][i] * r[k][i]);
  }
}

bool usable() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

constexpr simd_math k_avx2{dot16,   dot16_h, axpy_h,    widen,     round_f16, exp16,
                           swiglu16, dot_f16_blocks, dot_f16_rows, exp_nonpositive, accumulate_f16, gemm_acc,
                           accumulate_f16_heads, dot_f16_rows_heads, online_max, rope_heads, scale_mask_max, exp_row,
                           swiglu_row, sum_squares4};

}  // namespace

const simd_math* fast_math() {
  static const bool ok = usable();
  return ok ? &k_avx2 : nullptr;
}

}  // namespace spite::dispatch::cpu

#elif !(defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD))  // NEON: simd_arm_neon_math.cpp

namespace spite::dispatch::cpu {
const simd_math* fast_math() { return nullptr; }
}  // namespace spite::dispatch::cpu

#endif
