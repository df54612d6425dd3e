// MXFP4 with AVX-512 VNNI, under the contract of the AVX2 kernel (matmul_mxfp4 in
// simd_x86_iquants.cpp; reference: matmul32<mxfp4> in ref_dot_repack.cpp): per row and
// activation row the blocks alternate between two 8-lane accumulators, which are added before
// the horizontal sum, and an odd last block comes after in scalar order. Here the two
// accumulators are the halves of one register, so a pair of blocks is one 512-bit step: the
// codes of both blocks looked up at once (their magnitudes by VPSHUFB, their signs moved onto
// the activations by a masked subtraction, there being no 512-bit VPSIGNB), one VPDPBUSD for
// the 8 lanes of each, one conversion and one fma with [d of b x 8 | d of b + 1 x 8].
#include "simd_x86_avx512.hpp"

#if defined(__x86_64__)

namespace spite::dispatch::cpu::x86 {
namespace {

// The codes of blocks b and b + 1: [low nibbles of b | high of b | low of b + 1 | high of b + 1],
// the element order of the two blocks' activation quants (32 bytes apart in a q8_0_batch).
SPITE_AVX512 inline __m512i codes_of_pair(const gguf::block_mxfp4* blk) {
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[0].qs))),
                                               _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[1].qs)), 1);
  const __m512i wide = _mm512_castsi256_si512(both);
  const __m512i twice = _mm512_shuffle_i64x2(wide, wide, _MM_SHUFFLE(1, 1, 0, 0));
  // 128-bit lanes 1 and 3 take the high nibbles (what a 64-bit shift brings down from the next
  // byte is masked off).
  return _mm512_and_si512(_mm512_srlv_epi64(twice, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)), _mm512_set1_epi8(0x0F));
}

// [a x 8 | b x 8]
SPITE_AVX512 inline __m512 halves(float a, float b) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(_mm256_set1_ps(a))),
                                             _mm256_castps_pd(_mm256_set1_ps(b)), 1));
}

template <int R, int K>
SPITE_AVX512 void mxfp4_tile(const weight& w, std::int64_t o, const q8_0_batch& xb, std::int64_t nb, std::int64_t t0, float* y) {
  const float* e8m0 = e8m0_halves();
  const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(gguf::quants::iq::kvalues_mxfp4));
  const __m512i magnitudes = _mm512_broadcast_i32x4(_mm_abs_epi8(values));
  const __m512i sign_bit = _mm512_set1_epi8(8), zero = _mm512_setzero_si512();
  const gguf::block_mxfp4* rows[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const gguf::block_mxfp4*>(w.row(o + r));
  __m512 acc[R][K];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) acc[r][k] = _mm512_setzero_ps();
  }
  // Rows of a few KB: the hardware prefetchers alone do not ramp up on them (MXFP4:2880:2880 from
  // memory read at 17 % of the bandwidth); the next group is fetched at the tile's pace.
  const next_group_prefetch ahead(w.row(o + R), R * w.row_bytes, nb);
  for (std::int64_t b = 0; b + 1 < nb; b += 2) {
    if (t0 == 0) {
      ahead.step(b);
      ahead.step(b + 1);
    }
    __m512i x[K];
    __m512 dx[K];
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const auto i = static_cast<std::size_t>((t0 + k) * nb + b);
      x[k] = _mm512_loadu_si512(xb.qs(i));
      dx[k] = halves(xb.d[i], xb.d[i + 1]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512i codes = codes_of_pair(rows[r] + b);
      const __m512i magnitude = _mm512_shuffle_epi8(magnitudes, codes);
      const __mmask64 negative = _mm512_test_epi8_mask(codes, sign_bit);
      const __m512 dw = halves(e8m0[rows[r][b].e], e8m0[rows[r][b + 1].e]);
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) {
        const __m512i lanes = _mm512_dpbusd_epi32(zero, magnitude, _mm512_mask_sub_epi8(x[k], negative, zero, x[k]));
        // d_x * d_w per block, as the reference's scalar product.
        acc[r][k] = _mm512_fmadd_ps(_mm512_mul_ps(dx[k], dw), _mm512_cvtepi32_ps(lanes), acc[r][k]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      float v = reduce8_vec(_mm256_add_ps(_mm512_castps512_ps256(acc[r][k]), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][k]), 1))));
      if (nb % 2 != 0) v = mxfp4_last_block(rows[r] + nb - 1, xb, static_cast<std::size_t>((t0 + k) * nb + nb - 1), v);
      y[(t0 + k) * w.out + o + r] = v;
    }
  }
}

}  // namespace

bool matmul_mxfp4_avx512(const weight& w, const q8_0_batch& xb, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (avx512_q4_K_tiles() == nullptr) return false;  // the AVX-512 VNNI kernels stand aside
  const std::int64_t nb = w.in / qk0;
  by_row_groups_and_token_tiles<4>(
      w.out, n_tokens, pool,
      [&](std::int64_t o, std::int64_t t) {
        mxfp4_tile<2, 4>(w, o, xb, nb, t, y);
        mxfp4_tile<2, 4>(w, o + 2, xb, nb, t, y);
      },
      [&](std::int64_t o, std::int64_t t) { mxfp4_tile<4, 1>(w, o, xb, nb, t, y); },
      [&](std::int64_t o, std::int64_t t) { mxfp4_tile<1, 1>(w, o, xb, nb, t, y); });
  return true;
}

}  // namespace spite::dispatch::cpu::x86

#endif
