// Q8_0 packed in 16-row groups for processors with AVX-512 VNNI (the contract of
// simd_x86_avx2.cpp: the reference's exact integer sums and float operations, so the same bits).
// Reference: dot_q8_0 in ref_dot_legacy.cpp, per row and block 8 int32 lanes (lane L the sum of
// q * x over elements 4L..4L+3), one fma per lane with d_w * d_x, the horizontal sum at the end.
//
// The 8-row layout (simd_x86_q8_0_packed.cpp) holds two rows' 8 lanes in a register, so each
// block and activation row costs 4 VPDPBUSD, 4 conversions, 4 fmas and 4 permutes that give each
// half its row's d_w * d_x: 17 operations per 256 products, and the prefill of a Zen 4 core,
// which runs 512-bit operations at half a Zen 5's width, was bound by them. Here a register is
// one reference lane of 16 rows, as the 16-row Q4_0 layout has its chunks: the activation dword
// of lane L is a broadcast, the 16 rows' d_w * d_x is one multiply, and no permute is needed: 8
// VPDPBUSD, 8 conversions, 8 fmas and a multiply per 512 products (25 against 34). The fmas and
// the VPDPBUSD are what remains: each lane and block takes one of each in the reference's order.
//
// Per group of 16 rows and pair of blocks (1088 bytes, 17 cache lines: 16 x 2 x 34, nothing
// added):
//   d[2][16]        f16 at 32 h + 2 r: row r's scale of block 2p + h;
//   quants[2][8]    64-byte registers at 64 + 512 h + 64 L: bytes 4r..4r+3 are row r's
//                   qs[4L..4L+3] of block 2p + h, + 128 (unsigned for VPDPBUSD; each lane starts
//                   at q8_0_lane_corrections' -128 x the sum of its 4 activation quants).
// An odd last block leaves its pair's second half zero (never read). Made only where the AVX-512
// kernels run and the row count is a multiple of 16 (else the 8-row layout); after
// set_avx512(false) such a matrix goes through the AVX2 kernels on the file's layout.
#include "simd_x86_avx512.hpp"

#if defined(__x86_64__)
#include <cstring>

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::size_t x16_scales = 64, x16_block_quants = 8 * 64;
constexpr std::size_t x16_pair = x16_scales + 2 * x16_block_quants;
static_assert(x16_pair == 17 * cache_line && x16_pair == 2 * 16 * sizeof(gguf::block_q8_0));

inline const std::byte* pair_of(const std::byte* group, std::int64_t b) { return group + static_cast<std::size_t>(b) / 2 * x16_pair; }

// Block h of a pair's share of the pair `ahead` pairs on: its first 9 lines for h = 0, the
// other 8 for h = 1, into L1 (or, Fetch = prefetch_l2, into L2). Decode fetches
// decode_fetch.q8_0 pairs ahead into L1 (in the units of the 8-row layout's spans, 1088 bytes
// too); batches 4 (4.3 KB, as the 8-row tiles) and, into L2, 12. A tile of 3 activation rows
// spends about 100 cycles on a pair, so 4 pairs in flight barely cover the memory's latency;
// into L2 alone further ahead they do. Zen 4, two threads, from memory, min of 3-4 rounds
// alternated: Q8_0:2048:11264 x 4 rows 1.00-1.03 -> 0.81-0.82 ms (24 pairs 0.67-0.85), one
// thread 1.64-1.99 -> 1.09-1.15 (16 pairs 1.20-1.48); 2 rows 0.78-0.79 -> 0.52-0.77;
// Q8_0:5632:2048 x 8 rows 0.71-0.76 -> 0.63-0.67; 512 rows level or better (63-66 against 66-78
// ms). Into L2 ahead of a one-row decode instead: level (12 or 24 pairs, one and two threads).
constexpr std::size_t batch_fetch_pairs = 4, batch_fetch_l2_pairs = 12;
template <void (*Fetch)(const void*) = prefetch_l1>
inline void fetch_ahead(const std::byte* pair, std::size_t h, std::size_t ahead) {
  const std::byte* next = pair + ahead * x16_pair;
  for (std::size_t l = 9 * h; l < 9 + 8 * h; ++l) Fetch(next + cache_line * l);
}

SPITE_AVX512 inline __m512 block_scales(const std::byte* pair, std::size_t h) {
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(pair + 32 * h)));
}
SPITE_AVX512 inline __m512i block_lane(const std::byte* pair, std::size_t h, int lane) {
  return _mm512_load_si512(pair + x16_scales + x16_block_quants * h + 64 * static_cast<std::size_t>(lane));
}

// Lane L of 16 rows against activation block (x, c): the exact sums of q * x.
SPITE_AVX512 inline __m512i lane_sums(__m512i w, const std::int8_t* x, const std::int32_t* c, int lane) {
  return _mm512_dpbusd_epi32(_mm512_set1_epi32(c[lane]), w, _mm512_set1_epi32(load_u32(x + 4 * lane)));
}

// K activation rows from t0 (K <= 3: 8 accumulators each) against a group of 16 rows; with
// `fetch` (the first tile of a group and block of activation rows, which reads the group from
// memory; the later ones find it in the caches) each block fetches its share of the pairs 4 on
// (into L1) and 12 on (into L2).
template <int K>
SPITE_AVX512 void tile16(const std::byte* group, std::int64_t nb, const q8_0_batch& xb, const std::int32_t* corr, std::int64_t t0,
                         std::int64_t out, bool fetch, float* y16) {
  __m512 acc[K][8];
  x16_zero<K>(acc);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* pair = pair_of(group, b);
    const std::size_t h = static_cast<std::size_t>(b) % 2;
    if (fetch) {
      fetch_ahead(pair, h, batch_fetch_pairs);
      fetch_ahead<prefetch_l2>(pair, h, batch_fetch_l2_pairs);
    }
    const __m512 dw = block_scales(pair, h);
    __m512 ds[K];
    const std::int8_t* x[K];
    const std::int32_t* c[K];
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const auto i = static_cast<std::size_t>((t0 + k) * nb + b);
      ds[k] = _mm512_mul_ps(dw, _mm512_set1_ps(xb.d[i]));  // as the reference: one multiply per row
      x[k] = xb.qs(i);
      c[k] = corr + 8 * i;
    }
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) {
      const __m512i w = block_lane(pair, h, l);
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) acc[k][l] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lane_sums(w, x[k], c[k], l)), ds[k], acc[k][l]);
    }
  }
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) _mm512_storeu_ps(y16 + (t0 + k) * out, x16_lane_sum(acc[k]));  // reduce8_vec's order
}

// Decode: the activation row against S groups read in step, block by block (S = 2: a group of
// the matrix's first half beside one of its second, by_group_pairs), each activation dword
// broadcast once for both, each group's pair decode_fetch.q8_0 ahead fetched meanwhile.
template <int S>
SPITE_AVX512 void decode16(const std::byte* const* groups, std::int64_t nb, const q8_0_batch& xb, const std::int32_t* corr,
                           float* const* y16) {
  __m512 acc[S][8];
  x16_zero<S>(acc);
  const auto ahead = static_cast<std::size_t>(decode_fetch.q8_0);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::size_t h = static_cast<std::size_t>(b) % 2;
    const auto i = static_cast<std::size_t>(b);
    const __m512 dx = _mm512_set1_ps(xb.d[i]);
    const std::int8_t* x = xb.qs(i);
    const std::int32_t* c = corr + 8 * i;
    const std::byte* pair[S];
    __m512 ds[S];
#pragma GCC unroll 2
    for (int s = 0; s < S; ++s) {
      pair[s] = pair_of(groups[s], b);
      if (ahead != 0) fetch_ahead(pair[s], h, ahead);
      ds[s] = _mm512_mul_ps(block_scales(pair[s], h), dx);
    }
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) {
#pragma GCC unroll 2
      for (int s = 0; s < S; ++s) {
        acc[s][l] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lane_sums(block_lane(pair[s], h, l), x, c, l)), ds[s], acc[s][l]);
      }
    }
  }
#pragma GCC unroll 2
  for (int s = 0; s < S; ++s) _mm512_storeu_ps(y16[s], x16_lane_sum(acc[s]));
}

}  // namespace

std::size_t pack_q8_0_x16(weight& w) {
  return x16_pack_pairs<gguf::block_q8_0>(w, x16_pair, [](std::byte* pair, std::size_t h, const gguf::block_q8_0& block, std::size_t r) {
    std::memcpy(pair + 32 * h + 2 * r, &block.d, 2);
    for (std::size_t l = 0; l < 8; ++l) {
      auto* q = reinterpret_cast<std::uint8_t*>(pair + x16_scales + x16_block_quants * h + 64 * l + 4 * r);
      for (std::size_t j = 0; j < 4; ++j) q[j] = static_cast<std::uint8_t>(static_cast<std::uint8_t>(block.qs[4 * l + j]) ^ 0x80U);
    }
  });
}

bool matmul_q8_0_x16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (avx512_q8_0_tiles() == nullptr) return false;
  const std::int64_t nb = w.in / qk0;
  const std::size_t group_bytes = static_cast<std::size_t>((nb + 1) / 2) * x16_pair;
  const q8_0_batch xb(x, w.in, n_tokens, pool);
  aligned_vector<std::int32_t> corr;
  q8_0_lane_corrections(xb, nb, n_tokens, pool, corr);
  if (n_tokens == 1) {
    by_group_pairs<16>(
        w.out / 16, 1, y, pool, [&](std::int64_t g) { return w.packed + static_cast<std::size_t>(g) * group_bytes; },
        [&](const std::byte* const* both, std::int64_t, float* const* ys) { decode16<2>(both, nb, xb, corr.data(), ys); },
        [&](const std::byte* group, std::int64_t, float* y16) { decode16<1>(&group, nb, xb, corr.data(), &y16); });
    return true;
  }
  // Small batches too take the tiles, one stream: a pass per activation row over a pair of
  // groups (decode16's way, the later passes reading the pair from the caches) ran at half the
  // tiles' pace per row, each weight register used once (Q8_0:2048:11264 x 4 rows from memory,
  // one thread, Zen 4: 2.04-2.05 ms against 1.51-1.53 as tiles; the 8-row layout's two-row
  // passes over two streams 1.77-1.83).
  // Blocks of about 1 MiB of activation rows (with their corrections), not token_block's 192 KiB:
  // rows of 5632 elements came 16 at a time, so the weights streamed from memory once per 16
  // rows. Q8_0:5632:2048 x 512 rows, one thread, Zen 4: 16 rows 71-73 ms (min), 48 62-64, 96
  // 61-63, 192 60-62; 2048:5632 (40 rows) 65-75 against 62-63 at 96-192. TinyLlama Q8_0 pp512,
  // one thread, three rounds alternated: 77-81 -> 84-88 t/s.
  const std::size_t x_row_bytes = q8_0_batch::row_bytes(nb) + static_cast<std::size_t>(nb) * 8 * sizeof(std::int32_t);
  const std::int64_t block = token_block(x_row_bytes, std::size_t{1} << 20, 3);
  by_groups_and_token_blocks(w.out / 16, n_tokens, block, pool, [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
    const std::byte* group = w.packed + static_cast<std::size_t>(g) * group_bytes;
    const std::int64_t o = 16 * g;
    std::int64_t t = t0;
    for (; t + 3 <= t1; t += 3) tile16<3>(group, nb, xb, corr.data(), t, w.out, t == t0, y + o);
    switch (t1 - t) {
      case 2: return tile16<2>(group, nb, xb, corr.data(), t, w.out, t == t0, y + o);
      case 1: return tile16<1>(group, nb, xb, corr.data(), t, w.out, t == t0, y + o);
      default: return;
    }
  });
  return true;
}

}  // namespace spite::dispatch::cpu::x86

#endif
