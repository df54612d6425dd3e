// The packed 8-row Q4_0 layout (Q4_0, and IQ4_NL with its own sums): the layout, the float side
// of its tiles shared by the AVX2 and AVX-VNNI kernels, AVX2 tiles over a Sums (IQ4_NL's), and
// the matmul over the tiles its caller picks. Internal to spite::dispatch.
#pragma once

#include "simd_x86.hpp"

#if defined(__x86_64__)

namespace spite::dispatch::cpu::x86 {

// Q4_0, per group of 8 rows and per block: the 8 scales (f16), then 4 chunks of 32 bytes where
// bytes 4r..4r+3 of chunk j are row r's qs[4j..4j+3] (elements 4j..4j+3 in the low nibbles,
// 16+4j..16+4j+3 in the high ones). A chunk times the 4 activation bytes broadcast to every
// lane gives each row's partial sum in its own lane: no horizontal sums, the scales one load.
constexpr std::size_t q4_0_packed_block = 16 + 128;

// The float side of a pass of G groups packed in Q4_0's layout (Q4_0, IQ4_NL) against K
// activation rows from t0, shared by the AVX2 and AVX-VNNI tiles: per block and row one fma,
// acc = fma(sum, d_w * d_x, acc), as the reference's repacked kernels; the next groups fetched
// meanwhile by the first pass over them (t0 = 0).
template <int K, int G>
struct q4_0_layout_pass {
  __m256 acc[G][K];
  next_group_prefetch ahead0, ahead1;
  SPITE_AVX2 q4_0_layout_pass(const std::byte* const* groups, std::int64_t nb)
      : ahead0(groups[0] + static_cast<std::size_t>(nb) * q4_0_packed_block, static_cast<std::size_t>(nb) * q4_0_packed_block, nb),
        ahead1(groups[G - 1] + static_cast<std::size_t>(nb) * q4_0_packed_block, static_cast<std::size_t>(nb) * q4_0_packed_block, nb) {
    for (auto& ag : acc) {
#pragma GCC unroll 8
      for (auto& a : ag) a = _mm256_setzero_ps();
    }
  }
  SPITE_AVX2 void fetch(std::int64_t b, std::int64_t t0) const {
    if (t0 != 0) return;
    ahead0.step_fixed<q4_0_packed_block>(b);
    if constexpr (G == 2) ahead1.step_fixed<q4_0_packed_block>(b);
  }
  // Block b of group g (at blk): each activation row's exact integer sums of the 8 rows.
  SPITE_AVX2 void add(int g, const std::byte* blk, const q8_0_batch& xb, std::int64_t nb, std::int64_t t0, std::int64_t b,
                      const __m256i* sum) {
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) {
      const float dx = xb.d[static_cast<std::size_t>((t0 + k) * nb + b)];
      acc[g][k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[k]), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), acc[g][k]);
    }
  }
  SPITE_AVX2 void store(float* const* y, std::int64_t t0, std::int64_t out) const {
    for (int g = 0; g < G; ++g) {
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) _mm256_storeu_ps(y[g] + (t0 + k) * out, acc[g][k]);
    }
  }
};

// A group packed in Q4_0's layout against K activation rows from t0: Sums::half<K>(blk, ..., h,
// sums) adds half h of a block's exact sums of the 8 rows (rows as lanes; h = 0 starts them) for
// each activation row. G groups at once (G = 2: two streams, by_group_pairs), each seeing the
// same operations in the same order as alone. Software-pipelined as Q4_0's tiles: block b's
// first half, then block b - 1's float tail, then b's second half, so that the tail's chain
// (conversion, fma) has a half block of independent integer work beside it (IQ4_NL:2048:2048,
// one thread, AVX2 (Zen 3), from the caches, alternated: one row 0.143 -> 0.106 ms, 2 rows
// 0.171 -> 0.167, 4 rows 0.305 -> 0.295; from memory one row 68 -> 78 % of a plain read).
template <class Sums, int K, int G>
SPITE_AVX2 void q4_0_layout_groups(const std::byte* const* groups, std::int64_t nb, const q8_0_batch& xb, std::int64_t t0,
                                   std::int64_t out, float* const* y) {
  q4_0_layout_pass<K, G> pass(groups, nb);
  __m256i prev[G][K];
  const auto at = [&](int g, std::int64_t b) { return groups[g] + static_cast<std::size_t>(b) * q4_0_packed_block; };
  for (std::int64_t b = 0; b < nb; ++b) {
    pass.fetch(b, t0);
    __m256i sum[G][K];
    // Unrolled, so that each group's accumulators are fixed registers or slots (IQ4_NL:2048:2048,
    // one thread, AVX2 (Zen 3), alternated: 2 rows 0.189 -> 0.176 ms, 3 rows 0.283 -> 0.245).
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) Sums::template half<K>(at(g, b), xb, nb, t0, b, 0, sum[g]);
    if (b > 0) {
#pragma GCC unroll 2
      for (int g = 0; g < G; ++g) pass.add(g, at(g, b - 1), xb, nb, t0, b - 1, prev[g]);
    }
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) {
      Sums::template half<K>(at(g, b), xb, nb, t0, b, 1, sum[g]);
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) prev[g][k] = sum[g][k];
    }
  }
  if (nb > 0) {
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) pass.add(g, at(g, nb - 1), xb, nb, t0, nb - 1, prev[g]);
  }
  pass.store(y, t0, out);
}

template <class Sums, int K>
SPITE_AVX2 void q4_0_layout_tile(const std::byte* group, std::int64_t nb, const q8_0_batch& xb, std::int64_t t0, std::int64_t out,
                                 float* y) {
  q4_0_layout_groups<Sums, K, 1>(&group, nb, xb, t0, out, &y);
}

using q4_0_tile_fn = void (*)(const std::byte* group, std::int64_t nb, const q8_0_batch& xb, std::int64_t t0,
                              std::int64_t out, float* y);
// Two groups in step against activation row t (two streams, by_group_pairs).
using q4_0_pair_fn = void (*)(const std::byte* const* groups, std::int64_t nb, const q8_0_batch& xb, std::int64_t t,
                              std::int64_t out, float* const* y);
struct q4_0_tiles {
  q4_0_tile_fn one, four;
  q4_0_pair_fn pair = nullptr;  // null: decode by groups with `one`
  // Two and three activation rows (from t) against two groups in one pass (null: a pass per row).
  q4_0_pair_fn pair2 = nullptr, pair3 = nullptr;
  // Two and three activation rows against one group: a batch's rows after its 4-row tiles (null:
  // a pass per row).
  q4_0_tile_fn two = nullptr, three = nullptr;
};

// AVX2 tiles from a Sums (IQ4_NL's; Q4_0 has tiles of its own, simd_x86_avx2.cpp).
template <class Sums>
const q4_0_tiles& q4_0_layout_tiles() {
  static const q4_0_tiles tiles{q4_0_layout_tile<Sums, 1>, q4_0_layout_tile<Sums, 4>, q4_0_layout_groups<Sums, 1, 2>,
                                q4_0_layout_groups<Sums, 2, 2>, q4_0_layout_groups<Sums, 3, 2>, q4_0_layout_tile<Sums, 2>,
                                q4_0_layout_tile<Sums, 3>};
  return tiles;
}

// A matrix in the packed Q4_0 layout (Q4_0, IQ4_NL) with the tiles of the widest instruction set
// that runs (AVX-512, AVX-VNNI or AVX2); decode as two streams (by_group_pairs) where the tiles
// have a pair.
inline void matmul_q4_0_layout(const weight& w, const q8_0_batch& xb, std::int64_t n_tokens, float* y, thread_pool& pool,
                               const q4_0_tiles& tiles) {
  const std::int64_t nb = w.in / qk0;
  const auto group_at = [&](std::int64_t g) { return w.packed + static_cast<std::size_t>(g * nb) * q4_0_packed_block; };
  // Two or three activation rows in one pass over each pair of groups, where a pass per row
  // unpacked them that many times: Q4_0:2048:11264 from memory, two threads, alternated, AVX2
  // alone 2 rows 0.51-0.63 -> 0.37-0.39 ms, 3 rows 0.70-0.78 -> 0.48-0.52; AVX-VNNI 0.37-0.46 ->
  // 0.32-0.41 and 0.55-0.69 -> 0.57-0.59 (Zen 5 with SPITE_CPU_AVX512=0 [SPITE_CPU_AVXVNNI=0]).
  const q4_0_pair_fn rows_pair = n_tokens == 2 ? tiles.pair2 : n_tokens == 3 ? tiles.pair3 : nullptr;
  if (rows_pair != nullptr) {
    return by_group_pairs(
        w.out / 8, 1, y, pool, group_at,
        [&](const std::byte* const* groups, std::int64_t, float* const* ys) { rows_pair(groups, nb, xb, 0, w.out, ys); },
        [&](const std::byte* group, std::int64_t, float* yg) {
          for (std::int64_t t = 0; t < n_tokens; ++t) tiles.one(group, nb, xb, t, w.out, yg);
        });
  }
  if (tiles.pair != nullptr && n_tokens < 4) {
    return by_group_pairs(
        w.out / 8, n_tokens, y, pool, group_at,
        [&](const std::byte* const* groups, std::int64_t t, float* const* ys) { tiles.pair(groups, nb, xb, t, w.out, ys); },
        [&](const std::byte* group, std::int64_t t, float* yg) { tiles.one(group, nb, xb, t, w.out, yg); });
  }
  by_groups_and_token_blocks(w.out / 8, n_tokens, token_block(q8_0_batch::row_bytes(nb)), pool,
                             [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
                               std::int64_t t = t0;
                               for (; t + 4 <= t1; t += 4) tiles.four(group_at(g), nb, xb, t, w.out, y + 8 * g);
                               // The last 2 or 3 rows (5-7 sequences decoding together) unpack
                               // the group once more, not once per row.
                               const q4_0_tile_fn rest = t1 - t == 3 ? tiles.three : t1 - t == 2 ? tiles.two : nullptr;
                               if (rest != nullptr) return rest(group_at(g), nb, xb, t, w.out, y + 8 * g);
                               for (; t < t1; ++t) tiles.one(group_at(g), nb, xb, t, w.out, y + 8 * g);
                             });
}

}  // namespace spite::dispatch::cpu::x86

#endif
