// AVX2 Q5_K matmul on weights packed at load time (the contract of simd_x86_avx2.cpp: the
// reference's exact integer sums and float operations, so the same bits). Reference: dot_row<q5_K>
// in ref_kquants.hpp: per row and super-block 8 int32 lanes, lane L summing over the 8 groups of
// 32 elements the group's elements 4L..4L+3 times the group's scale; one fma per super-block
// into 8 float lanes with d_x * d_w; the mins as a scalar chain fma(-d_x * dmin_w, sum_g min_g *
// (bsum[2g] + bsum[2g + 1]), summs) added after the AVX horizontal sum.
//
// Row by row (simd_x86_k35.cpp) a super-block costs about 150 instructions, a third of them
// decoding its scales and mins and combining its float terms. Packed, per group of 8 rows and
// per super-block (1440 bytes against the file's 1408):
//   d[8], dmin[8]   f16, row r's at 2r;
//   scales[4][8][2] byte 16j + 2r + h: row r's scale of group 2j + h;
//   mins[4][8][2]   byte 16p + 2r + h: row r's min of group 2p + h;
//   high[8][32]     byte 32L + 4r + j: the top two bits of row r's quants u_4..u_7 at bits 0-1,
//                   2-3, 4-5 and 6-7;
//   low[4][8][32]   byte 256i + 32L + 4r + j: u_i (five bits) | the low three bits of u_{i+4}
//                   << 5;
// u_i (0..31) being unit i's quant of lane L, unit 2p + v holding in byte j row r's element
// 4L + 2v + j % 2 of group 2p + j / 2 (interleave_group_pairs puts the activations in the same
// order). Units 0-3 come out of one vector with one AND, 4-7 with five operations (24 per
// lane's 8 units where the file's split of four bits and one took 35: Q5_K:2048:5632, one
// thread, AVX2 (Zen 3), from the caches 0.376 -> 0.319 ms).
// A unit's lane L of the 8 rows is then one vector of 4 bytes per row, each int16 pair sum of
// its products one group's: a lane's two units of a pair of groups are added in int16 (at most
// 4 x 31 x 127) and one multiply-add by the rows' scale pairs gives both groups' terms of every
// row, rows as int32 lanes (each group's own VPMADDWD and its scales spread by a shuffle
// before: see docs/performance-log.md). The float accumulators hold the reference's lanes
// transposed (acc[L], element r: row r's lane L), transposed back for its horizontal sum once
// per group; the scale products, mins sums and min chains are made for the 8 rows at once, row
// r's in lane r.
#include "simd_x86.hpp"
#include "ref_kquants.hpp"
#include "simd_x86_pairs.hpp"

#if defined(__x86_64__)
#include <cstring>

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::size_t packed_block = 32 + 64 + 64 + 256 + 1024;
constexpr std::size_t at_scales = 32, at_mins = 96, at_high = 160, at_low = 416;

// Groups 2j and 2j + 1's scales of the 8 rows as int16 pairs (row r's of group 2j, then of 2j + 1),
// for madd with a unit pair's int16 sums.
SPITE_AVX2 inline __m256i scale_pairs(const std::byte* blk, int j) {
  return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + at_scales + 16 * j)));
}

// The activations of one super-block as the packed kernels read them: its quants interleaved
// (interleave_group_pairs), and its 16 sub-block sums replaced by the 8 groups' (bsum[2g] +
// bsum[2g + 1], at most 2 x 16 x 127: int16) in bsums[0..7], which the min chains take.
SPITE_AVX2 inline void prepare_activations(gguf::block_q8_K& x) {
  interleave_group_pairs(x.qs, x.qs);
  for (int g = 0; g < 8; ++g) x.bsums[g] = static_cast<std::int16_t>(x.bsums[2 * g] + x.bsums[2 * g + 1]);  // in order: g <= 2g
}

// The mins chain's step of one super-block, row r's in lane r: fma(-d_x * dmin_w, sum_g min_g *
// (bsum[2g] + bsum[2g + 1]), summs), the groups' sums from prepare_activations.
SPITE_AVX2 inline __m256 min_step(const std::byte* blk, const gguf::block_q8_K& x, __m256 summs) {
  __m256i msum = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + at_mins + 16 * p)));
    std::int32_t sums;  // groups 2p and 2p + 1's, int16 each
    std::memcpy(&sums, x.bsums + 2 * p, 4);
    msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mins, _mm256_set1_epi32(sums)));
  }
  const __m256 dmin = _mm256_mul_ps(_mm256_set1_ps(-x.d), _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16))));
  return _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(msum), summs);
}

// Row r's result: the reference's horizontal sum of its 8 lanes (acc[L], element r) plus its
// min chain (lane r of summs).
SPITE_AVX2 inline void store_rows(const __m256* acc, __m256 summs, float* y8) {
  alignas(32) float mins[8];
  _mm256_store_ps(mins, summs);
  store_lane_rows(acc, mins, y8);
}

// Units 2k and 2k + 1's quants (0..31) of lane L, from the packed block (`high`, the lane's
// vector of top bits, loaded once per lane). Literal shift counts, as the sanitizer build's -O1
// needs; bits a 16-bit shift brings from the neighbour byte are masked off.
SPITE_AVX2 inline __m256i lane_low(const std::byte* blk, int lane, int i) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + at_low + 256 * static_cast<std::size_t>(i) + 32 * static_cast<std::size_t>(lane)));
}

SPITE_AVX2 inline void lane_quants(const std::byte* blk, int lane, int k, __m256i high, __m256i& q0, __m256i& q1) {
  const __m256i m5 = _mm256_set1_epi8(0x1F), top = _mm256_set1_epi8(0x18);
  if (k < 2) {
    q0 = _mm256_and_si256(lane_low(blk, lane, 2 * k), m5);
    q1 = _mm256_and_si256(lane_low(blk, lane, 2 * k + 1), m5);
    return;
  }
  const int i = 2 * (k - 2);
  // Bits 5-7 kept by the 5-bit mask before the shift: nothing crosses bytes, no third mask.
  const __m256i low0 = _mm256_srli_epi16(_mm256_andnot_si256(m5, lane_low(blk, lane, i)), 5);
  const __m256i low1 = _mm256_srli_epi16(_mm256_andnot_si256(m5, lane_low(blk, lane, i + 1)), 5);
  if (k == 2) {
    q0 = _mm256_or_si256(low0, _mm256_and_si256(_mm256_slli_epi16(high, 3), top));
    q1 = _mm256_or_si256(low1, _mm256_and_si256(_mm256_slli_epi16(high, 1), top));
  } else {
    q0 = _mm256_or_si256(low0, _mm256_and_si256(_mm256_srli_epi16(high, 1), top));
    q1 = _mm256_or_si256(low1, _mm256_and_si256(_mm256_srli_epi16(high, 3), top));
  }
}

// Groups 2j and 2j + 1's lane L term of the 8 rows from units 2j (q0) and 2j + 1 (q1) against the
// interleaved activation quants xp (interleave_group_pairs): each group's 4 products summed in
// int16 (at most 4 x 31 x 127), then times its scale.
SPITE_AVX2 inline __m256i pair_term(__m256i q0, __m256i q1, const std::int8_t* xp, int j, int lane, __m256i scales) {
  const std::int8_t* x = xp + 64 * j + 8 * lane;
  const __m256i sums = _mm256_add_epi16(_mm256_maddubs_epi16(q0, _mm256_set1_epi32(load_u32(x))),
                                        _mm256_maddubs_epi16(q1, _mm256_set1_epi32(load_u32(x + 4))));
  return _mm256_madd_epi16(sums, scales);
}

// One group of 8 rows against K activation rows, the lane quants from Quants: in registers
// from the packed block (small batches: each lane's quants once for the K rows) or from a
// group unpacked once (larger ones). The float accumulators of K > 1 live in memory: each is
// touched once per lane and super-block.
template <int K, class Quants>
SPITE_AVX2 void rows_tile(const std::byte* group, std::int64_t nb, const gguf::block_q8_K* const* x, bool prefetch, float* const* y8,
                          const Quants& quants) {
  __m256 acc[K][8];
  __m256 summs[K];
  for (int k = 0; k < K; ++k) {
    summs[k] = _mm256_setzero_ps();
    for (auto& a : acc[k]) a = _mm256_setzero_ps();
  }
  const next_group_prefetch ahead(group + static_cast<std::size_t>(nb) * packed_block, static_cast<std::size_t>(nb) * packed_block, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = group + static_cast<std::size_t>(b) * packed_block;
    __m256i S[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) S[j] = scale_pairs(blk, j);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    __m256 ds[K];
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      ds[k] = _mm256_mul_ps(_mm256_set1_ps(x[k][b].d), dw);
      summs[k] = min_step(blk, x[k][b], summs[k]);
    }
    for (int lane = 0; lane < 8; ++lane) {
      if (prefetch) ahead.step_fixed<packed_block, 8>(b, lane);
      const auto lane_q = quants.lane(b, blk, lane);
      __m256i sum[K];
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) sum[k] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        __m256i q0, q1;
        lane_q(j, q0, q1);
#pragma GCC unroll 4
        for (int k = 0; k < K; ++k) {
          sum[k] = _mm256_add_epi32(sum[k], pair_term(q0, q1, x[k][b].qs, j, lane, S[j]));
          // The sums in order, pair by pair: GCC otherwise makes a tree of a lane's 4 pairs for
          // each row and spills it (Q5_K:2048:2048, one thread, AVX2 (Zen 3), alternated: 4 rows
          // 0.338 -> 0.309 ms, 3 rows 0.276 -> 0.234, 2 rows 0.192 -> 0.181; 128 rows of
          // 2048:5632 26.0 -> 23.8).
          if constexpr (K > 1) __asm__("" : "+x"(sum[k]));
        }
      }
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) acc[k][lane] = _mm256_fmadd_ps(ds[k], _mm256_cvtepi32_ps(sum[k]), acc[k][lane]);
    }
  }
  for (int k = 0; k < K; ++k) store_rows(acc[k], summs[k], y8[k]);
}

// Lane quants unpacked in registers from the packed block.
struct packed_quants {
  SPITE_AVX2 auto lane(std::int64_t, const std::byte* blk, int lane) const {
    const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + at_high + 32 * lane));
    return [blk, lane, high](int j, __m256i& q0, __m256i& q1) SPITE_AVX2 { lane_quants(blk, lane, j, high, q0, q1); };
  }
};

// A group's lane quants unpacked once: super-block b, lane L, pair j, half h at
// 32 * (64b + 8L + 2j + h).
struct unpacked_quants {
  aligned_vector<std::uint8_t> q;
  SPITE_AVX2 void unpack(const std::byte* group, std::int64_t nb) {
    q.resize(static_cast<std::size_t>(2048 * nb));
    for (std::int64_t b = 0; b < nb; ++b) {
      const std::byte* blk = group + static_cast<std::size_t>(b) * packed_block;
      for (int lane = 0; lane < 8; ++lane) {
        const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + at_high + 32 * lane));
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          __m256i q0, q1;
          lane_quants(blk, lane, j, high, q0, q1);
          std::uint8_t* dst = q.data() + 32 * (64 * b + 8 * lane + 2 * j);
          _mm256_store_si256(reinterpret_cast<__m256i*>(dst), q0);
          _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 32), q1);
        }
      }
    }
  }
  SPITE_AVX2 auto lane(std::int64_t b, const std::byte*, int lane) const {
    const std::uint8_t* src = q.data() + 32 * (64 * b + 8 * lane);
    return [src](int j, __m256i& q0, __m256i& q1) SPITE_AVX2 {
      q0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(src + 64 * j));
      q1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(src + 64 * j + 32));
    };
  }
};

// Decode: one activation row against S groups (S = 2: by_group_pairs' two streams, which this
// core fetches from memory faster than one), each fetching its block two ahead; the same
// operations per group as rows_tile<1>, so the same bits.
template <int S>
SPITE_AVX2 void decode_rows(const std::byte* const* groups, std::int64_t nb, const gguf::block_q8_K* x, float* const* y8) {
  __m256 acc[S][8];
  __m256 summs[S];
  for (int s = 0; s < S; ++s) {
    summs[s] = _mm256_setzero_ps();
    for (auto& a : acc[s]) a = _mm256_setzero_ps();
  }
  for (std::int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 2
    for (int s = 0; s < S; ++s) {
      const std::byte* blk = groups[s] + static_cast<std::size_t>(b) * packed_block;
      __m256i scales[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) scales[j] = scale_pairs(blk, j);
      const __m256 ds = _mm256_mul_ps(_mm256_set1_ps(x[b].d), _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk))));
      summs[s] = min_step(blk, x[b], summs[s]);
      for (int lane = 0; lane < 8; ++lane) {
        fetch_eighth_ahead<packed_block, 2>(blk, lane);
        const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + at_high + 32 * lane));
        __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          __m256i q0, q1;
          lane_quants(blk, lane, j, high, q0, q1);
          sum = _mm256_add_epi32(sum, pair_term(q0, q1, x[b].qs, j, lane, scales[j]));
        }
        acc[s][lane] = _mm256_fmadd_ps(ds, _mm256_cvtepi32_ps(sum), acc[s][lane]);
      }
    }
  }
  for (int s = 0; s < S; ++s) store_rows(acc[s], summs[s], y8[s]);
}

// Activation rows [t0, t1) against one group: tiles of 4, then one of the 2 or 3 rows left (two
// or three sequences decoding together), or single rows.
template <class Quants>
SPITE_AVX2 void group_rows(const std::byte* group, std::int64_t nb, const gguf::block_q8_K* xq, std::int64_t t0, std::int64_t t1,
                           std::int64_t out, float* y, const Quants& quants) {
  std::int64_t t = t0;
  const auto tile = [&]<int K>() SPITE_AVX2 {
    const gguf::block_q8_K* x[K];
    float* y8[K];
    for (int k = 0; k < K; ++k) {
      x[k] = xq + (t + k) * nb;
      y8[k] = y + (t + k) * out;
    }
    rows_tile<K>(group, nb, x, t == 0, y8, quants);
  };
  for (; t + 4 <= t1; t += 4) tile.template operator()<4>();
  if (t1 - t == 3) return tile.template operator()<3>();
  if (t1 - t == 2) return tile.template operator()<2>();
  for (; t < t1; ++t) tile.template operator()<1>();
}

}  // namespace

std::size_t pack_q5_K(weight& w) {
  return pack_row_groups<gguf::block_q5_K>(w, packed_block, [](std::byte* dst, const gguf::block_q5_K& blk, int r) {
    std::memcpy(dst + 2 * r, &blk.d, 2);
    std::memcpy(dst + 16 + 2 * r, &blk.dmin, 2);
    std::uint32_t sm[4];
    scales_mins_k4(blk.scales, sm);
    const auto* s8 = reinterpret_cast<const std::uint8_t*>(sm);
    for (int g = 0; g < 8; ++g) {
      dst[at_scales + 16 * static_cast<std::size_t>(g / 2) + 2 * static_cast<std::size_t>(r) + static_cast<std::size_t>(g % 2)] =
          static_cast<std::byte>(s8[g]);
      dst[at_mins + 16 * static_cast<std::size_t>(g / 2) + 2 * static_cast<std::size_t>(r) + static_cast<std::size_t>(g % 2)] =
          static_cast<std::byte>(s8[8 + g]);
    }
    std::int8_t q[qkk], sc16[16], mins[8];
    kquants::unpack_q5_K(blk, q, sc16, mins);
    auto* bytes = reinterpret_cast<std::uint8_t*>(dst);
    for (int lane = 0; lane < 8; ++lane) {
      for (int j = 0; j < 4; ++j) {
        unsigned u[8];
        // unit 2p + v's byte j: element 4 lane + 2v + j % 2 of group 2p + j / 2
        for (int unit = 0; unit < 8; ++unit) {
          u[unit] = static_cast<std::uint8_t>(q[32 * (unit / 2 * 2 + j / 2) + 4 * lane + 2 * (unit % 2) + j % 2]);
        }
        const std::size_t at = 32 * static_cast<std::size_t>(lane) + 4 * static_cast<std::size_t>(r) + static_cast<std::size_t>(j);
        bytes[at_high + at] = static_cast<std::uint8_t>(u[4] >> 3 | (u[5] >> 3) << 2 | (u[6] >> 3) << 4 | (u[7] >> 3) << 6);
        for (int i = 0; i < 4; ++i) bytes[at_low + 256 * static_cast<std::size_t>(i) + at] = static_cast<std::uint8_t>(u[i] | (u[i + 4] & 7u) << 5);
      }
    }
  });
}

void matmul_q5_K_packed(const weight& w, gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qkk;
  const std::int64_t n_blocks = nb * n_tokens;
  const auto prepare = [xq](std::int64_t begin, std::int64_t end) SPITE_AVX2 {
    for (std::int64_t i = begin; i < end; ++i) prepare_activations(xq[i]);
  };
  for_activation_blocks(n_blocks, pool, prepare);
  const std::size_t group_bytes = static_cast<std::size_t>(nb) * packed_block;
  // Below this many activation rows per block the packed quants are unpacked in registers per
  // tile; from it on, once per group into a buffer (2 KiB per super-block).
  constexpr std::int64_t buffered_from = 12;
  const auto group_at = [&](std::int64_t g) { return w.packed + static_cast<std::size_t>(g) * group_bytes; };
  if (n_tokens == 1) {
    return by_group_pairs(
        w.out / 8, 1, y, pool, group_at, [&](const std::byte* const* both, std::int64_t, float* const* ys) { decode_rows<2>(both, nb, xq, ys); },
        [&](const std::byte* group, std::int64_t, float* y8) { decode_rows<1>(&group, nb, xq, &y8); });
  }
  by_groups_and_token_blocks(w.out / 8, n_tokens, token_block(static_cast<std::size_t>(nb) * sizeof(gguf::block_q8_K)), pool,
                             [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
                               const std::byte* group = group_at(g);
                               float* y8 = y + 8 * g;
                               if (t1 - t0 < buffered_from) return group_rows(group, nb, xq, t0, t1, w.out, y8, packed_quants{});
                               thread_local unpacked_quants u;
                               u.unpack(group, nb);
                               group_rows(group, nb, xq, t0, t1, w.out, y8, u);
                             });
}

}  // namespace spite::dispatch::cpu::x86

#endif
