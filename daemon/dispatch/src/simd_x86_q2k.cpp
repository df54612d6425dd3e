// AVX2 Q2_K matmul (the contract of simd_x86_avx2.cpp: the reference's exact integer sums and
// float operations, so the same bits). Rows whose count is a multiple of 8 are the reference's
// repacked ones (dot_q2_K_repacked in ref_q2k.hpp): per output row, the integer sums of
// scale * (q . x) and of min * bsum over the 16-element sub-blocks, then one fma per
// super-block (GEMV rows) or per 128-element half (GEMM rows), the mins apart, acc - acc_min.
// Here eight rows are one vector of lanes for the float work; the integer sums come from
// maddubs over the 2-bit quants, unpacked once per block for up to four activation rows. Other
// row counts keep the reference's vector-dot path.
#include "simd_x86.hpp"
#include "simd_x86_x16.hpp"

#if defined(__x86_64__)
#include <cstring>

namespace spite::dispatch::cpu::x86 {
namespace {

using gguf::tensor_type;

// Rows o..o+7 against K activation rows t0..t0+K-1: each weight block is unpacked once for the
// K rows. Per row and block, eight int32 lanes per half hold scale * (q . x) partial sums and
// eight the min * bsum pairs (lanes 0..3: half 0); transposed, the rows become the lanes.
// pick_pair[j]: int16 element 2j in every slot of the low 128-bit lane, 2j + 1 in the high one.
alignas(32) constexpr std::uint8_t pick_pair[4][32] = {
#define SPITE_PICK2(e) {2 * e, 2 * e + 1, 2 * e, 2 * e + 1, 2 * e, 2 * e + 1, 2 * e, 2 * e + 1, 2 * e, 2 * e + 1, 2 * e, 2 * e + 1, \
                        2 * e, 2 * e + 1, 2 * e, 2 * e + 1, 2 * e + 2, 2 * e + 3, 2 * e + 2, 2 * e + 3, 2 * e + 2, 2 * e + 3, \
                        2 * e + 2, 2 * e + 3, 2 * e + 2, 2 * e + 3, 2 * e + 2, 2 * e + 3, 2 * e + 2, 2 * e + 3, 2 * e + 2, 2 * e + 3}
    SPITE_PICK2(0), SPITE_PICK2(2), SPITE_PICK2(4), SPITE_PICK2(6)};
#undef SPITE_PICK2

template <int K>
SPITE_AVX2 void q2_K_rows8(const weight& w, std::int64_t o, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0,
                           std::int64_t ng, std::int64_t out, float* y) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i low_half = _mm256_setr_epi32(-1, -1, -1, -1, 0, 0, 0, 0);
  const std::byte* row0 = w.row(o);
  __m256 acc[K], acc_min[K];
  for (int k = 0; k < K; ++k) acc[k] = acc_min[k] = _mm256_setzero_ps();
  const next_group_prefetch ahead(w.row(o + 8), 8 * w.row_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t0 == 0) ahead.step(b);
    __m256i tot[K][2][8], mp[K][8];
    __m128i dh = _mm_setzero_si128(), mh = _mm_setzero_si128();
    for (int r = 0; r < 8; ++r) {
      const auto& blk = reinterpret_cast<const gguf::block_q2_K*>(row0 + r * w.row_bytes)[b];
      dh = insert_half(dh, blk.d, r);
      mh = insert_half(mh, blk.dmin, r);
      const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0F)));
      // The 16 scales as int16, sub-blocks 0..7 in both 128-bit lanes, then 8..15: a byte
      // shuffle broadcasts sub-block s in the low lane and s + 1 in the high one.
      const __m128i sc16 = _mm_and_si128(packed, _mm_set1_epi8(0x0F));
      const __m256i sc_half[2] = {_mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc16)),
                                  _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_srli_si128(sc16, 8)))};
      // Element 128h + 32k + l: bits 2k..2k+1 of qs[32h + l]; its 32 elements are sub-blocks
      // 8h + 2k (low 128-bit lane) and 8h + 2k + 1 (high lane).
      __m256i q[2][4], scales[2][4];
      for (int h = 0; h < 2; ++h) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * h));
        for (int j = 0; j < 4; ++j) {
          q[h][j] = _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m3);
          scales[h][j] = _mm256_shuffle_epi8(sc_half[h], _mm256_load_si256(reinterpret_cast<const __m256i*>(pick_pair[j])));
        }
      }
      for (int k = 0; k < K; ++k) {
        const gguf::block_q8_K& x = xq[(t0 + k) * nb + b];
        for (int h = 0; h < 2; ++h) {
          __m256i t = _mm256_setzero_si256();
          for (int j = 0; j < 4; ++j) {
            const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 128 * h + 32 * j));
            t = _mm256_add_epi32(t, dot_lanes_scaled(q[h][j], xv, scales[h][j]));
          }
          tot[k][h][r] = t;
        }
        mp[k][r] = _mm256_madd_epi16(mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums)));
      }
    }
    const __m256 dw = _mm256_cvtph_ps(dh), dmw = _mm256_cvtph_ps(mh);
    for (int k = 0; k < K; ++k) {
      const __m256 xd = _mm256_set1_ps(xq[(t0 + k) * nb + b].d);
      const __m256 ds = _mm256_mul_ps(dw, xd), dm = _mm256_mul_ps(dmw, xd);
      if (t0 + k < ng) {  // GEMM rows: one fma per half
        __m256i lo[8], hi[8];
        for (int r = 0; r < 8; ++r) {
          lo[r] = _mm256_and_si256(mp[k][r], low_half);
          hi[r] = _mm256_andnot_si256(low_half, mp[k][r]);
        }
        acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sum8(tot[k][0])), ds, acc[k]);
        acc_min[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sum8(lo)), dm, acc_min[k]);
        acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sum8(tot[k][1])), ds, acc[k]);
        acc_min[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sum8(hi)), dm, acc_min[k]);
      } else {
        for (int r = 0; r < 8; ++r) tot[k][0][r] = _mm256_add_epi32(tot[k][0][r], tot[k][1][r]);
        acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sum8(tot[k][0])), ds, acc[k]);
        acc_min[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sum8(mp[k])), dm, acc_min[k]);
      }
    }
  }
  for (int k = 0; k < K; ++k) _mm256_storeu_ps(y + (t0 + k) * out + o, _mm256_sub_ps(acc[k], acc_min[k]));
}

// ---- packed at load time (the layout is described in simd_x86.hpp): the rows are the lanes, and
// each int16 pair sum of a chunk's products belongs to one sub-block of a pair (2P, 2P + 1), the
// first of the pair in the low half of each row's int32 lane and the second in the high one. So
// a pair's 8 chunks are summed in int16 (at most 8 x 2 x 3 x 127) and multiplied by both scales
// in one VPMADDWD, and its scales and mins are widened by one VPMOVZXBW, where the sub-blocks one
// at a time took two VPMADDWD and shuffles per pair (Q2_K:2048:5632, AVX2, Zen 3: see
// docs/performance-log.md). The integer sums per half and super-block are the reference's: only
// the order of exact additions differs. The activations are permuted to match (pair_activations).

std::size_t pack_q2_K_impl(weight& w) {
  return pack_row_groups<gguf::block_q2_K>(w, q2_K_packed_block, [](std::byte* out, const gguf::block_q2_K& blk, int r) {
    auto* dst = reinterpret_cast<std::uint8_t*>(out);
    std::memcpy(dst + 2 * r, &blk.d, 2);
    std::memcpy(dst + 16 + 2 * r, &blk.dmin, 2);
    for (int sb = 0; sb < 16; ++sb) dst[q2_K_packed_scales + 16 * (sb / 2) + 2 * r + sb % 2] = blk.scales[sb];
    // Element e = 128h + 32k + l is bits 2k..2k+1 of qs[32h + l], so chunk c of pair P takes
    // bytes 32h + 2c + {0, 1, 16, 17} shifted by 2k (h = P / 4, k = P % 4): four bytes at a time.
    for (int pair = 0; pair < 8; ++pair) {
      const std::uint8_t* src = blk.qs + 32 * (pair / 4);
      const int shift = 2 * (pair % 4);
      for (int v = 0; v < 2; ++v) {
        std::uint32_t packed = 0;
        for (int j = 0; j < 4; ++j) {
          const int c = 4 * v + j;
          std::uint16_t first, second;
          std::memcpy(&first, src + 2 * c, 2);
          std::memcpy(&second, src + 16 + 2 * c, 2);
          const std::uint32_t word = first | static_cast<std::uint32_t>(second) << 16;
          packed |= (word >> shift & 0x03030303U) << (2 * j);
        }
        std::memcpy(dst + q2_K_packed_quants + 64 * static_cast<std::size_t>(pair) + 32 * static_cast<std::size_t>(v) + 4 * static_cast<std::size_t>(r),
                    &packed, 4);
      }
    }
  });
}

// The activations of n blocks in the packed layout's order: per 32 elements, elements 2c, 2c + 1,
// 16 + 2c, 17 + 2c at 4c..4c + 3 (c = 0..7), the int16 units of the two halves interleaved. The
// sub-block sums (bsums) stay as they are.
SPITE_AVX2 void pair_activations(gguf::block_q8_K* x, std::int64_t n, thread_pool& pool) {
  const auto permute = [x](std::int64_t begin, std::int64_t end) SPITE_AVX2 {
    for (std::int64_t i = begin; i < end; ++i) {
      for (int g = 0; g < qkk / 32; ++g) {
        auto* qs = reinterpret_cast<__m128i*>(x[i].qs + 32 * g);
        const __m128i lo = _mm_loadu_si128(qs), hi = _mm_loadu_si128(qs + 1);
        _mm_storeu_si128(qs, _mm_unpacklo_epi16(lo, hi));
        _mm_storeu_si128(qs + 1, _mm_unpackhi_epi16(lo, hi));
      }
    }
  };
  for_activation_blocks(n, pool, permute);
}

// Sub-block pair `pair`'s min terms (min * bsum, rows as lanes) of K activation rows (x[k * nb] is
// row k's block) added to ms[k]; `mins` holds the pair's mins as int16, row r's at 2r and 2r + 1.
template <int K>
SPITE_AVX2 inline void add_min_terms(__m256i mins, const gguf::block_q8_K* x, std::int64_t nb, int pair, __m256i* ms) {
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) {
    std::int32_t bsum_pair;
    std::memcpy(&bsum_pair, x[k * nb].bsums + 2 * pair, 4);
    ms[k] = _mm256_add_epi32(ms[k], _mm256_madd_epi16(mins, _mm256_set1_epi32(bsum_pair)));
  }
}

// Sub-block pair `pair` of a packed block (quants at qv) against K activation rows (x[k]: the
// pair's 32 permuted activation quants): each row's int16 sums of its 8 chunks' products, rows as
// lanes (at most 8 x 2 x 3 x 127).
template <int K>
SPITE_AVX2 inline void pair_products(const std::byte* qv, int pair, const std::int8_t* const* x, __m256i* s16) {
  const __m256i m3 = _mm256_set1_epi8(3);
#pragma GCC unroll 2
  for (int v = 0; v < 2; ++v) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qv + 64 * pair + 32 * v));
    const __m256i c[4] = {_mm256_and_si256(q, m3), _mm256_and_si256(_mm256_srli_epi16(q, 2), m3),
                          _mm256_and_si256(_mm256_srli_epi16(q, 4), m3), _mm256_and_si256(_mm256_srli_epi16(q, 6), m3)};
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) {
        const __m256i products = _mm256_maddubs_epi16(c[j], _mm256_set1_epi32(load_u32(x[k] + 16 * v + 4 * j)));
        s16[k] = v == 0 && j == 0 ? products : _mm256_add_epi16(s16[k], products);
        if constexpr (K > 1) __asm__("" : "+x"(s16[k]));  // in order, in registers
      }
    }
  }
}

// One packed group against K activation rows from t0 (permuted by pair_activations): per half,
// the exact sums of scale * (q . x) and of min * bsum per row (lanes), then the reference's fmas
// (per half for GEMM rows, per super-block for GEMV rows). AllGemm: every row takes the GEMM's
// order (prefill tiles), so the GEMV rows' super-block sums need no registers.
template <int K, bool AllGemm = false>
SPITE_AVX2 void q2_K_packed_tile(const std::byte* group, std::int64_t nb, const gguf::block_q8_K* xq, std::int64_t t0,
                                 std::int64_t ng, std::int64_t out, float* y) {
  const __m256i low4 = _mm256_set1_epi16(0x0F);
  __m256 acc[K], acc_min[K];
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) acc[k] = acc_min[k] = _mm256_setzero_ps();
  const next_group_prefetch ahead(group + static_cast<std::size_t>(nb) * q2_K_packed_block,
                                  static_cast<std::size_t>(nb) * q2_K_packed_block, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = group + static_cast<std::size_t>(b) * q2_K_packed_block;
    const auto* sc = reinterpret_cast<const std::uint8_t*>(blk + q2_K_packed_scales);
    const std::byte* qv = blk + q2_K_packed_quants;
    const auto pair_bytes = [sc](int pair) SPITE_AVX2 {
      return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + 16 * static_cast<std::size_t>(pair))));
    };
    __m256i is_block[K], ms_block[K];  // GEMV rows: the whole super-block's sums
    for (int h = 0; h < 2; ++h) {
      if (t0 == 0) ahead.step_fixed<q2_K_packed_block, 2>(b, h);
      __m256i is[K], ms[K];
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) is[k] = ms[k] = _mm256_setzero_si256();
      if constexpr (AllGemm) {
        // The half's min terms first, so that only the quants' sums are live in the loop below.
        for (int p = 0; p < 4; ++p) add_min_terms<K>(_mm256_srli_epi16(pair_bytes(4 * h + p), 4), xq + t0 * nb + b, nb, 4 * h + p, ms);
        const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16)));
#pragma GCC unroll 8
        for (int k = 0; k < K; ++k) {
          const __m256 dm = _mm256_mul_ps(dmw, _mm256_set1_ps(xq[(t0 + k) * nb + b].d));
          acc_min[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms[k]), dm, acc_min[k]);
        }
      }
      for (int p = 0; p < 4; ++p) {
        const int pair = 4 * h + p;
        const __m256i bytes = pair_bytes(pair);
        const std::int8_t* x[K];
#pragma GCC unroll 8
        for (int k = 0; k < K; ++k) x[k] = xq[(t0 + k) * nb + b].qs + 32 * pair;
        __m256i s16[K];
        pair_products<K>(qv, pair, x, s16);
        const __m256i scales = _mm256_and_si256(bytes, low4);
#pragma GCC unroll 8
        for (int k = 0; k < K; ++k) {
          is[k] = _mm256_add_epi32(is[k], _mm256_madd_epi16(s16[k], scales));
          if constexpr (K > 1) __asm__("" : "+x"(is[k]));  // the sums in order, not a spilled tree
        }
        if constexpr (!AllGemm) add_min_terms<K>(_mm256_srli_epi16(bytes, 4), xq + t0 * nb + b, nb, pair, ms);
      }
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) {
        if (AllGemm) {  // the min terms went first
          const __m256 xd = _mm256_set1_ps(xq[(t0 + k) * nb + b].d);
          const __m256 ds = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk))), xd);
          acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[k]), ds, acc[k]);
        } else if (t0 + k < ng) {  // GEMM rows: one fma per half
          const __m256 xd = _mm256_set1_ps(xq[(t0 + k) * nb + b].d);
          const __m256 ds = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk))), xd);
          const __m256 dm = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16))), xd);
          acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[k]), ds, acc[k]);
          acc_min[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms[k]), dm, acc_min[k]);
        } else if (h == 0) {
          is_block[k] = is[k];
          ms_block[k] = ms[k];
        } else {
          const __m256 xd = _mm256_set1_ps(xq[(t0 + k) * nb + b].d);
          const __m256 ds = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk))), xd);
          const __m256 dm = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16))), xd);
          acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(is_block[k], is[k])), ds, acc[k]);
          acc_min[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(ms_block[k], ms[k])), dm, acc_min[k]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) _mm256_storeu_ps(y + (t0 + k) * out, _mm256_sub_ps(acc[k], acc_min[k]));
}

// Decode: activation row t (a GEMV row) against two groups in step, pair by pair, so that each
// thread reads two streams (by_group_pairs), as the other packed layouts' decode does, and a
// super-block's sums go on through both halves: Q2_K:5632:2048 from memory, two threads,
// alternated with the one stream, medians of five rounds, 86.5 -> 91.9 % of a plain read of the
// same bytes, 2048:5632 89.8 -> 95.4 %, one thread 68.0 -> 74.4 %; from the caches one row
// 0.189 -> 0.176 ms. Each group sees q2_K_packed_tile<1>'s exact sums (the halves' int32 sums
// added in another order) and its fmas.
SPITE_AVX2 void q2_K_packed_decode_pair(const std::byte* const* groups, std::int64_t nb, const gguf::block_q8_K* xq, std::int64_t t,
                                        std::int64_t out, float* const* y) {
  const __m256i low4 = _mm256_set1_epi16(0x0F);
  __m256 acc[2], acc_min[2];
  const std::size_t group_bytes = static_cast<std::size_t>(nb) * q2_K_packed_block;
  const next_group_prefetch ahead[2] = {{groups[0] + group_bytes, group_bytes, nb}, {groups[1] + group_bytes, group_bytes, nb}};
  for (int g = 0; g < 2; ++g) acc[g] = acc_min[g] = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const gguf::block_q8_K* xb = xq + t * nb + b;
    const std::byte* blk[2] = {groups[0] + static_cast<std::size_t>(b) * q2_K_packed_block, groups[1] + static_cast<std::size_t>(b) * q2_K_packed_block};
    __m256i is[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}, ms[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int h = 0; h < 2; ++h) {
      if (t == 0) {
        ahead[0].step_fixed<q2_K_packed_block, 2>(b, h);
        ahead[1].step_fixed<q2_K_packed_block, 2>(b, h);
      }
      for (int p = 0; p < 4; ++p) {
        const int pair = 4 * h + p;
        const std::int8_t* x = xb->qs + 32 * pair;
#pragma GCC unroll 2
        for (int g = 0; g < 2; ++g) {
          const auto* sc = reinterpret_cast<const std::uint8_t*>(blk[g] + q2_K_packed_scales);
          const __m256i bytes = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + 16 * static_cast<std::size_t>(pair))));
          __m256i s16;
          pair_products<1>(blk[g] + q2_K_packed_quants, pair, &x, &s16);
          is[g] = _mm256_add_epi32(is[g], _mm256_madd_epi16(s16, _mm256_and_si256(bytes, low4)));
          add_min_terms<1>(_mm256_srli_epi16(bytes, 4), xb, nb, pair, &ms[g]);
        }
      }
    }
    const __m256 xd = _mm256_set1_ps(xb->d);
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g) {
      const __m256 ds = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[g]))), xd);
      const __m256 dm = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[g] + 16))), xd);
      acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[g]), ds, acc[g]);
      acc_min[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms[g]), dm, acc_min[g]);
    }
  }
  for (int g = 0; g < 2; ++g) _mm256_storeu_ps(y[g] + t * out, _mm256_sub_ps(acc[g], acc_min[g]));
}

void matmul_q2_K_packed(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, std::int64_t ng, float* y,
                        thread_pool& pool) {
  const std::int64_t nb = w.in / qkk;
  if (n_tokens == 1) {
    const auto group_at = [&](std::int64_t g) { return w.packed + static_cast<std::size_t>(g * nb) * q2_K_packed_block; };
    return by_group_pairs(
        w.out / 8, 1, y, pool, group_at,
        [&](const std::byte* const* groups, std::int64_t t, float* const* ys) { q2_K_packed_decode_pair(groups, nb, xq, t, w.out, ys); },
        [&](const std::byte* group, std::int64_t t, float* yg) { q2_K_packed_tile<1>(group, nb, xq, t, ng, w.out, yg); });
  }
  const std::int64_t block = token_block(static_cast<std::size_t>(nb) * sizeof(gguf::block_q8_K));
  by_groups_and_token_blocks(w.out / 8, n_tokens, block, pool, [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
    const std::byte* group = w.packed + static_cast<std::size_t>(g * nb) * q2_K_packed_block;
    std::int64_t t = t0;
    for (; t + 4 <= t1; t += 4) {
      if (t + 4 <= ng) {
        q2_K_packed_tile<4, true>(group, nb, xq, t, ng, w.out, y + 8 * g);
      } else {
        q2_K_packed_tile<4>(group, nb, xq, t, ng, w.out, y + 8 * g);
      }
    }
    // The last 2 or 3 rows (two or three sequences decoding together, or a batch's rest) in one
    // pass, not one per row.
    if (t1 - t == 3) return q2_K_packed_tile<3>(group, nb, xq, t, ng, w.out, y + 8 * g);
    if (t1 - t == 2) return q2_K_packed_tile<2>(group, nb, xq, t, ng, w.out, y + 8 * g);
    for (; t < t1; ++t) q2_K_packed_tile<1>(group, nb, xq, t, ng, w.out, y + 8 * g);
  });
}

void matmul_q2_K_impl(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (w.out % 8 != 0) return find_reference_matmul(tensor_type::q2_K)(w, x, n_tokens, y, pool);
  const std::int64_t nb = w.in / qkk;
  std::vector<gguf::block_q8_K> xq;
  quantize_rows_q8_K(w, x, n_tokens, true, xq, pool);
  const std::int64_t ng = gemm_rows(n_tokens);
  // 16-row groups: their own kernels while the AVX-512 ones run, else the file's layout.
  if (w.packed != nullptr && w.packed_rows == 16) {
    if (matmul_q2_K_x16(w, xq.data(), n_tokens, ng, y, pool)) return;
  } else if (w.packed != nullptr) {
    pair_activations(xq.data(), static_cast<std::int64_t>(xq.size()), pool);
    return matmul_q2_K_packed(w, xq.data(), n_tokens, ng, y, pool);
  }
  pool.parallel_for(w.out / 8, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t g = begin; g < end; ++g) {
      by_token_tiles(
          n_tokens, [&](std::int64_t t) { q2_K_rows8<4>(w, 8 * g, xq.data(), nb, t, ng, w.out, y); },
          [&](std::int64_t t) { q2_K_rows8<1>(w, 8 * g, xq.data(), nb, t, ng, w.out, y); });
    }
  });
}

}  // namespace

void matmul_q2_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  matmul_q2_K_impl(w, x, n_tokens, y, pool);
}
std::size_t pack_q2_K(weight& w) { return pack_q2_K_impl(w); }

}  // namespace spite::dispatch::cpu::x86

#endif
