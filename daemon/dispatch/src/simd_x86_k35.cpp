// AVX2 versions of the Q3_K and Q5_K matmuls (the contract of simd_x86_avx2.cpp: the
// reference's exact integer sums and float operations, so the same bits). The reference is
// dot_row<q3_K / q5_K> in ref_dot_kquants.cpp: 8 int32 lanes per super-block, lane L summing
// elements 4L..4L+3 of every 32-element group times the group's 16-element scale, one fma per
// super-block into 8 float lanes, the AVX horizontal sum at the end; Q5_K's mins go to a
// separate scalar added after it.
//
// Q3_K's quants are signed (-4..3). Batches multiply their magnitudes by the activations with
// the quants' signs (signed_pairs); decode multiplies the unsigned v = q + 4 and takes 4 x off
// each int16 pair sum. Both give the reference's exact pair sums.
#include "simd_x86.hpp"
#include "simd_x86_x16.hpp"

#if defined(__x86_64__)
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::int64_t qkk = gguf::qk_k;

// ---- the scales of one super-block, decoded as the reference unpackers decode them (compiled
// for the kernels' instruction set and inlined there: a call into plain SSE code from AVX-512
// code pays a state transition per instruction)

SPITE_AVX2 inline void q3_K_scales16(const gguf::block_q3_K& b, std::int16_t* sc) {
  std::int8_t s8[16];
  q3_K_scales(b.scales, s8);
  for (int j = 0; j < 16; ++j) sc[j] = s8[j];
}

// Q5_K packs its 8 scales and 8 mins as Q4_K does.
SPITE_AVX2 inline void q5_K_scales(const gguf::block_q5_K& b, std::int16_t* sc, std::int16_t* mins) {
  std::uint32_t packed[4];
  scales_mins_k4(b.scales, packed);
  std::uint8_t bytes[16];
  std::memcpy(bytes, packed, sizeof bytes);
  for (int j = 0; j < 8; ++j) {
    sc[j] = bytes[j];
    mins[j] = bytes[8 + j];
  }
}

// ---- the quants of one 32-element group g, unsigned, in registers

// Q3_K element 128c + 32k + l (g = 4c + k): bits 2k..2k+1 of qs[32c + l], plus 4 when bit g of
// hmask[l] is set (the reference subtracts 4 when it is clear; here v = q + 4).
SPITE_AVX2 inline __m256i q3_K_group(const gguf::block_q3_K& b, __m256i hmask, int g) {
  const int c = g / 4, k = g % 4;
  const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c));
  const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), _mm256_set1_epi8(3));
  return _mm256_or_si256(lo, _mm256_and_si256(bit_to(hmask, g, 2), _mm256_set1_epi8(4)));
}

// Q5_K element 64j + l (g = 2j): low nibble of qs[32j + l], element 64j + 32 + l (g = 2j + 1):
// the high nibble; 16 times bit g of qh[l] on top.
SPITE_AVX2 inline __m256i q5_K_group(const gguf::block_q5_K& b, __m256i qh, int g) {
  const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * (g / 2)));
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i nib = (g & 1) != 0 ? _mm256_and_si256(_mm256_srli_epi16(qs, 4), m4) : _mm256_and_si256(qs, m4);
  return _mm256_or_si256(nib, _mm256_and_si256(bit_to(qh, g, 4), _mm256_set1_epi8(0x10)));
}

// The int16 pair sums of (v - offset) * x, scaled and summed into int32 lanes. (Decode keeps
// Q3_K's v = q + 4 and takes 4 x off: through the magnitudes and signs of q, as batches do, it
// measured 5-10 % slower here, since each weight meets one activation row only.)
template <bool Offset4>
SPITE_AVX2 inline __m256i group_lanes(__m256i v, __m256i x, __m256i scales) {
  __m256i pairs = _mm256_maddubs_epi16(v, x);
  if constexpr (Offset4) pairs = _mm256_sub_epi16(pairs, _mm256_maddubs_epi16(_mm256_set1_epi8(4), x));
  return _mm256_madd_epi16(pairs, scales);
}

// The scales of group g as int16 pairs: the first 16 elements' scale in the low half.
SPITE_AVX2 inline __m256i group_scales(std::int16_t first, std::int16_t second) {
  return _mm256_set_m128i(_mm_set1_epi16(second), _mm_set1_epi16(first));
}

// ---- one weight row unpacked (prefill: reused for every activation row)

struct k_row {
  std::vector<std::uint8_t> q;        // per element: Q5_K's q, Q3_K's signed q as its byte
  std::vector<std::int16_t> scales;   // 16 per group (two halves of 8 equal values)
  std::vector<std::int16_t> mins;     // Q5_K: 16 per super-block, each min twice (madd with bsums)
  std::vector<float> d, dmin;
  explicit k_row(std::int64_t in)
      : q(static_cast<std::size_t>(in)),
        scales(static_cast<std::size_t>(in / 32 * 16)),
        mins(static_cast<std::size_t>(in / qkk * 16)),
        d(static_cast<std::size_t>(in / qkk)),
        dmin(static_cast<std::size_t>(in / qkk)) {}
};

template <class Block>
SPITE_AVX2 void unpack_row(const Block* w, std::int64_t nb, k_row& r) {
  for (std::int64_t b = 0; b < nb; ++b) {
    std::int16_t sc[16], mins[8];
    __m256i bits;
    if constexpr (std::is_same_v<Block, gguf::block_q3_K>) {
      q3_K_scales16(w[b], sc);
      bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].hmask));
    } else {
      q5_K_scales(w[b], sc, mins);
      for (int j = 0; j < 16; ++j) r.mins[static_cast<std::size_t>(16 * b + j)] = mins[j / 2];
      r.dmin[static_cast<std::size_t>(b)] = _cvtsh_ss(w[b].dmin);
      bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh));
    }
    r.d[static_cast<std::size_t>(b)] = _cvtsh_ss(w[b].d);
    for (int g = 0; g < 8; ++g) {
      __m256i v, s;
      if constexpr (std::is_same_v<Block, gguf::block_q3_K>) {
        v = _mm256_sub_epi8(q3_K_group(w[b], bits, g), _mm256_set1_epi8(4));  // signed q for super_block_lanes
        s = group_scales(sc[2 * g], sc[2 * g + 1]);
      } else {
        v = q5_K_group(w[b], bits, g);
        s = group_scales(sc[g], sc[g]);
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(r.q.data() + b * qkk + 32 * g), v);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(r.scales.data() + 16 * (8 * b + g)), s);
    }
  }
}

// The Q5_K mins term of one super-block, sum_j min_j * (bsum[2j] + bsum[2j+1]), from its mins
// as 16 int16 (each twice).
SPITE_AVX2 inline std::int32_t mins_sum(__m256i mins, const gguf::block_q8_K& x) {
  const __m256i prod = _mm256_madd_epi16(mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums)));
  __m128i v = _mm_add_epi32(_mm256_castsi256_si128(prod), _mm256_extracti128_si256(prod, 1));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0x4E));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0xB1));
  return _mm_cvtsi128_si32(v);
}

// The Q5_K mins terms of 4 activation rows, lane k for row k: each the reference's scalar chain
// fma(-d_x * dmin_w, sum_j min_j * bsums_j, summs) (-d_x * dmin_w equals d_x * -dmin_w exactly).
// One register instead of 4 scalars kept in memory next to the lane accumulators.
SPITE_AVX2 inline __m128 mins_terms4(__m128 summs, __m256i mins, const gguf::block_q8_K* const* x, float dmin_w) {
  __m256i p[4];
  for (int k = 0; k < 4; ++k) p[k] = _mm256_madd_epi16(mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[k]->bsums)));
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m128i sums = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));  // row k's in lane k
  const __m128 dmin = _mm_mul_ps(_mm_setr_ps(x[0]->d, x[1]->d, x[2]->d, x[3]->d), _mm_set1_ps(-dmin_w));
  return _mm_fmadd_ps(dmin, _mm_cvtepi32_ps(sums), summs);
}

// R unpacked rows against K activation rows; each pair keeps its own lanes, as the reference.
template <bool IsQ3, int R, int K>
SPITE_AVX2 void row_dot(const k_row* const* rows, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0,
                        std::int64_t out, std::int64_t o, float* y) {
  static_assert(K == 1 || K == 4);
  __m256 acc[R][K];
  float summs1[R];
  __m128 summs4[R];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
    summs1[r] = 0.0f;
    summs4[r] = _mm_setzero_ps();
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) acc[r][k] = _mm256_setzero_ps();
  }
  for (std::int64_t b = 0; b < nb; ++b) {
    __m256i lanes[R * K];
    const gguf::block_q8_K* xs[K];
    const std::uint8_t* q[R];
    const std::int16_t* sc[R];
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) xs[k] = &xq[(t0 + k) * nb + b];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      q[r] = rows[r]->q.data() + b * qkk;
      sc[r] = rows[r]->scales.data() + 16 * 8 * b;
    }
    super_block_lanes<R, K, IsQ3>(q, sc, xs, lanes);
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      const k_row& row = *rows[r];
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) {
        const float d = xs[k]->d * row.d[static_cast<std::size_t>(b)];
        acc[r][k] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes[r * K + k]), acc[r][k]);
      }
      if constexpr (!IsQ3) {
        const __m256i mins = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row.mins.data() + 16 * b));
        const float dmin_w = row.dmin[static_cast<std::size_t>(b)];
        if constexpr (K == 4) {
          summs4[r] = mins_terms4(summs4[r], mins, xs, dmin_w);
        } else {
          summs1[r] = std::fma(-xs[0]->d * dmin_w, static_cast<float>(mins_sum(mins, *xs[0])), summs1[r]);
        }
      }
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
    alignas(16) float summs[4] = {summs1[r]};
    if constexpr (K == 4) _mm_store_ps(summs, summs4[r]);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      y[(t0 + k) * out + o + r] = IsQ3 ? reduce8_vec(acc[r][k]) : reduce8_vec(acc[r][k]) + summs[k];
    }
  }
}

// ---- decode: each super-block unpacked in registers where it is used, R rows at a time

// A super-block's 16 Q3_K scales (signed) or 8 Q5_K scales and 8 mins (bytes 0-7, 8-15) as one
// vector, decoded as the reference decodes them.
SPITE_AVX2 inline __m128i q3_K_scale_bytes(const gguf::block_q3_K& b) {
  std::uint32_t aux[3];
  std::memcpy(aux, b.scales, 12);
  constexpr std::uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  const __m128i s = _mm_setr_epi32(static_cast<int>((aux[0] & kmask2) | (((aux[2] >> 0) & kmask1) << 4)),
                                   static_cast<int>((aux[1] & kmask2) | (((aux[2] >> 2) & kmask1) << 4)),
                                   static_cast<int>(((aux[0] >> 4) & kmask2) | (((aux[2] >> 4) & kmask1) << 4)),
                                   static_cast<int>(((aux[1] >> 4) & kmask2) | (((aux[2] >> 6) & kmask1) << 4)));
  return _mm_sub_epi8(s, _mm_set1_epi8(32));
}
SPITE_AVX2 inline __m128i q5_K_scale_bytes(const gguf::block_q5_K& b) {
  std::uint32_t packed[4];
  scales_mins_k4(b.scales, packed);
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
}

// The Q5_K mins (bytes 8-15 of its scale bytes) as 16 int16, each twice, for mins_sum.
SPITE_AVX2 inline __m256i mins_pairs(__m128i bytes) {
  return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(bytes, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)));
}

// Row r's per-super-block float terms are made for the R rows at once, row r's in lane r: the
// scale products x_d * d_w, and for Q5_K the mins sums and their scalar chains (summs, one fma
// per super-block in lane r, the reference's scalar fma). Kept as R scalars they cost a
// conversion, a multiply and a horizontal sum each, and GCC kept the chains on the stack.
template <class Block, int R>
SPITE_AVX2 void fused_rows(const weight& w, std::int64_t o, const gguf::block_q8_K* x, bool first, float* y) {
  static_assert(R == 1 || R == 4);
  constexpr bool is_q3 = std::is_same_v<Block, gguf::block_q3_K>;
  const std::int64_t nb = w.in / qkk;
  const Block* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const Block*>(w.row(o + r));
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  __m128 summs = _mm_setzero_ps();
  const next_group_prefetch ahead(w.row(o + R), R * w.row_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (first) ahead.step(b);
    const gguf::block_q8_K& xb = x[b];
    __m128i dh = _mm_setzero_si128(), mh = _mm_setzero_si128();
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      dh = insert_half(dh, rows[r][b].d, r);
      if constexpr (!is_q3) mh = insert_half(mh, rows[r][b].dmin, r);
    }
    const __m128 ds = _mm_mul_ps(_mm_set1_ps(xb.d), _mm_cvtph_ps(dh));
    __m256i mins[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const Block& blk = rows[r][b];
      __m128i sc;
      __m256i bits;
      if constexpr (is_q3) {
        sc = q3_K_scale_bytes(blk);
        bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.hmask));
      } else {
        sc = q5_K_scale_bytes(blk);
        bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh));
        mins[r] = _mm256_madd_epi16(mins_pairs(sc), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums)));
      }
      const scale_pairs16 scales16(sc);
      __m256i lanes = _mm256_setzero_si256();
      for (int g = 0; g < 8; ++g) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 32 * g));
        if constexpr (is_q3) {
          lanes = _mm256_add_epi32(lanes, group_lanes<true>(q3_K_group(blk, bits, g), xv, scales16.of(2 * g, 2 * g + 1)));
        } else {
          lanes = _mm256_add_epi32(lanes, group_lanes<false>(q5_K_group(blk, bits, g), xv, scales16.of(g, g)));
        }
      }
      const __m256 d = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(ds), _mm256_set1_epi32(r));
      acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes), acc[r]);
    }
    if constexpr (!is_q3) {
      __m128i sums;  // row r's sum_j min_j * (bsum[2j] + bsum[2j+1]) in lane r
      if constexpr (R == 4) {
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(mins[0], mins[1]), _mm256_hadd_epi32(mins[2], mins[3]));
        sums = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
      } else {
        __m128i v = _mm_add_epi32(_mm256_castsi256_si128(mins[0]), _mm256_extracti128_si256(mins[0], 1));
        v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0x4E));
        sums = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0xB1));
      }
      summs = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(-xb.d), _mm_cvtph_ps(mh)), _mm_cvtepi32_ps(sums), summs);
    }
  }
  alignas(16) float summs_of[4];
  _mm_store_ps(summs_of, summs);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) y[o + r] = is_q3 ? reduce8_vec(acc[r]) : reduce8_vec(acc[r]) + summs_of[r];
}

template <class Block>
void matmul_k35(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  constexpr bool is_q3 = std::is_same_v<Block, gguf::block_q3_K>;
  const std::int64_t nb = w.in / qkk;
  std::vector<gguf::block_q8_K> xq;
  quantize_tokens_q8_K(x, w.in, n_tokens, xq, pool);
  if constexpr (is_q3) {
    // 8-row groups: the 256-bit kernels; 16-row groups: their own while the AVX-512 ones run,
    // else the file's layout.
    if (w.packed != nullptr && w.packed_rows == 8) return matmul_q3_K_x8(w, xq.data(), n_tokens, y, pool);
    if (w.packed != nullptr && matmul_q3_K_x16(w, xq.data(), n_tokens, y, pool)) return;
  } else {
    if (w.packed != nullptr && w.packed_rows == 16) {
      if (matmul_q5_K_x16(w, xq.data(), n_tokens, y, pool)) return;
    } else if (w.packed != nullptr) {
      return matmul_q5_K_packed(w, xq.data(), n_tokens, y, pool);
    }
  }
  const std::int64_t out = w.out;
  if (n_tokens < 4) {
    const auto rows = [&]<int R>(std::int64_t o) {
      for (std::int64_t t = 0; t < n_tokens; ++t) fused_rows<Block, R>(w, o, xq.data() + t * nb, t == 0, y + t * out);
    };
    by_row_groups(out, pool, [&](std::int64_t o) { rows.template operator()<4>(o); },
                  [&](std::int64_t o) { rows.template operator()<1>(o); });
    return;
  }
  by_unpacked_row_pairs<k_row>(
      w.in, out, n_tokens, token_block(static_cast<std::size_t>(nb) * sizeof(gguf::block_q8_K)), pool,
      [&](std::int64_t o, k_row& r) { unpack_row(reinterpret_cast<const Block*>(w.row(o)), nb, r); },
      [&](const k_row* const* rows, std::int64_t o, std::int64_t t) { row_dot<is_q3, 2, 4>(rows, xq.data(), nb, t, out, o, y); },
      [&](const k_row& row, std::int64_t o, std::int64_t t) {
        const k_row* one = &row;
        row_dot<is_q3, 1, 1>(&one, xq.data(), nb, t, out, o, y);
      });
}

}  // namespace

void matmul_q3_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  matmul_k35<gguf::block_q3_K>(w, x, n_tokens, y, pool);
}
void matmul_q5_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  matmul_k35<gguf::block_q5_K>(w, x, n_tokens, y, pool);
}

}  // namespace spite::dispatch::cpu::x86

#endif
