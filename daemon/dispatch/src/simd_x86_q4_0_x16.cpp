// Q4_0 and IQ4_NL packed in 16-row groups for processors with AVX-512 VNNI, for decode and
// batches. The reference repacks these types (ref_dot_repack.cpp): per row and block one exact
// integer sum and one fma with d_w * d_x, so rows are lanes and nothing is reduced.
//
// The 8-row layout (simd_x86.hpp, q4_0_tile in simd_x86_avx512.cpp) fills a 512-bit register
// with two 4-byte chunks of 8 rows, so each VPDPBUSD needs the activation dwords of two chunks
// side by side: a VPERMD per product, and the float work on 256-bit halves (64-67 GB/s from cache
// on one core). Here a register is one chunk of 16 rows, each VPDPBUSD takes its activation dword
// as a broadcast, and the block ends in one 512-bit fma. Q4_0's quants q - 8 go in as q (0..15)
// and 8 x sum(x) is taken off; IQ4_NL's as table value + 128 (VPSHUFB), and 128 x sum(x). Per
// group of 16 rows and pair of blocks (576 bytes, 9 cache lines: 16 x 2 x 18, nothing added):
//   d[2][16]        f16 at 32 h + 2 r: row r's scale of block 2p + h;
//   quants[2][4]    64-byte registers at 64 + 256 h + 64 i: bytes 4r..4r+3 are row r's
//                   qs[4i..4i+3] of block 2p + h (elements 4i + j in the low nibbles, 16 + 4i + j
//                   in the high ones).
// An odd last block leaves its pair's second half zero (never read). Made only where the AVX-512
// kernels run and the row count is a multiple of 16; after set_avx512(false) such a matrix goes
// through the AVX2 kernels on the file's layout.
#include "simd_x86_avx512.hpp"

#if defined(__x86_64__)
#include <algorithm>
#include <cstring>
#include <optional>


namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::size_t x16_pair = 2 * 16 * sizeof(gguf::block_q4_0), x16_quants = 64;
static_assert(x16_pair == 9 * cache_line && x16_quants + 2 * 4 * 64 == x16_pair);

// Q4_0's quants q - 8 as q (0..15), IQ4_NL's as table value + 128: chunk c of the 4 registers
// of a block's quants, low nibbles at c and high ones at 4 + c.
template <bool Nl>
SPITE_AVX512 inline void unpack_block(const std::byte* quants, __m512i table, __m512i* chunk) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512i v = _mm512_load_si512(quants + 64 * i);
    chunk[i] = _mm512_and_si512(v, m4);
    chunk[4 + i] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    if constexpr (Nl) {
      chunk[i] = _mm512_shuffle_epi8(table, chunk[i]);
      chunk[4 + i] = _mm512_shuffle_epi8(table, chunk[4 + i]);
    }
  }
}

// Block h of a pair's share of the pair `ahead` pairs on, half its lines. Batches fetch 6 ahead
// (3.5 KB), and so does decode (decode_fetch.q4_0) where the hardware prefetchers alone lag
// behind such a stream: on a Zen 5 core (`bench --matmul Q4_0:2048:5632` and `5632:2048 --cold`,
// three rounds alternated, share of a plain read of the same bytes) one thread read 87-88 % at 8
// pairs ahead, 89-91 % at 6, 83-84 % at 4, 80-82 % at 12-16 (and at 8 into L2 alone, prefetcht1:
// 76-80 %); two threads 90-93 %, 93-95 %, 96 %, 91-95 %. A Zen 4 core's decode reads best with
// none (one thread 90-93 % against 70-81 % at 1-6 pairs).
// Passes of 3-4 activation rows (a few sequences decoding together) also fetch 24 pairs (13.8
// KB) ahead into L2 (Fetch = prefetch_l2), as the 16-row Q8_0 tiles do: Zen 4, two threads, from
// memory, min of 3 rounds alternated, Q4_0:2048:11264 x 3 rows 0.44-0.46 -> 0.37-0.39 ms, x 4
// rows 0.47-0.53 -> 0.37-0.39 (12 and 48 pairs the same), one thread x 4 0.79-0.85 -> 0.57-0.60;
// 1, 2 and 8 rows level.
constexpr std::size_t batch_fetch_pairs = 6, batch_fetch_l2_pairs = 24;
template <void (*Fetch)(const void*) = prefetch_l1>
inline void fetch_ahead(const std::byte* pair, std::size_t h, std::size_t ahead) {
  for (std::size_t l = 5 * h; l < 5 + 4 * h; ++l) Fetch(pair + ahead * x16_pair + cache_line * l);
}

// K activation rows from t0 against a group of 16 rows; with `fetch`, each block fetches its
// share of the pair 6 ahead (batch_fetch_pairs; the first tile of a group and block of
// activation rows, which reads the group from memory; the later ones find it in the caches).
// Without it, four sequences decoding together (`bench --parallel 4`, TinyLlama Q4_0, two
// threads, Zen 5) ran at 149-151 t/s, compute and memory one after the other (Q4_0:2048:11264,
// 4 rows, from memory: 54-56 % of a plain read's speed); with it 210-212 t/s (66-68 %).
template <int K, bool Nl>
SPITE_AVX512 void tile16(const std::byte* group, std::int64_t nb, const q8_0_batch& xb, std::int64_t t0, std::int64_t out,
                         bool fetch, float* y16) {
  [[maybe_unused]] const __m512i table = Nl ? iq4_nl_values_plus_128() : _mm512_setzero_si512();
  __m512 acc[K];
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) acc[k] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* pair = group + static_cast<std::size_t>(b / 2) * x16_pair;
    const std::size_t h = static_cast<std::size_t>(b % 2);
    if (fetch) fetch_ahead(pair, h, batch_fetch_pairs);
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(pair + 32 * h)));
    __m512i chunk[8];
    unpack_block<Nl>(pair + x16_quants + 256 * h, table, chunk);
    // sum((q - 8) x) = sum(q x) - 8 sum(x) (IQ4_NL: - 128 sum(x)): each row's chain starts at
    // the offset; one chain of eight products per row, the K chains advancing side by side (row
    // after row, each row's chain waited on the instruction's latency: Zen 4, one thread, from
    // the caches, Q4_0:2048:1024 x 128 rows 1.74 -> 1.55 ms, IQ4_NL 1.90 -> 1.65; TinyLlama Q4_0
    // prefill of 128 tokens 118-129 -> 139-144 t/s).
    __m512i isum[K];
    const std::int8_t* x[K];
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const std::size_t i = static_cast<std::size_t>((t0 + k) * nb + b);
      x[k] = xb.qs(i);
      isum[k] = _mm512_set1_epi32(Nl ? -16 * xb.sum8[i] : -xb.sum8[i]);
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) {
        isum[k] = _mm512_dpbusd_epi32(isum[k], chunk[c], _mm512_set1_epi32(load_u32(x[k] + 4 * c)));
        isum[k] = _mm512_dpbusd_epi32(isum[k], chunk[4 + c], _mm512_set1_epi32(load_u32(x[k] + 16 + 4 * c)));
      }
    }
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const std::size_t i = static_cast<std::size_t>((t0 + k) * nb + b);
      acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[k]), _mm512_mul_ps(dw, _mm512_set1_ps(xb.d[i])), acc[k]);
    }
  }
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) _mm512_storeu_ps(y16 + (t0 + k) * out, acc[k]);
}

// Decode and small batches: K activation rows from t0 against S groups read in step, block by block
// (S = 2: a group of the matrix's first half beside one of its second, by_group_pairs), each
// activation dword broadcast once for them; each group's pair decode_fetch.q4_0 ahead fetched
// meanwhile (fetch_ahead). As one stream one activation row read 80-84 % of a plain read of the
// same bytes from memory for rows of 4096 elements and more (Q4_0:5632:2048 and 8192:2048, one
// thread, Zen 5) against 85-95 % for 2048; as two, 92-98 % for all (`spitectl bench --matmul ...
// --cold`, docs/performance.md). Four rows share each broadcast between the two groups: tile16<4>
// broadcasts once per group, and the loads were what held it back.
template <int S, int K, bool Nl>
SPITE_AVX512 void decode16(const std::byte* const* groups, std::int64_t nb, const q8_0_batch& xb, std::int64_t t0,
                           std::int64_t out, const next_pair_share* share, float* const* y16) {
  [[maybe_unused]] const __m512i table = Nl ? iq4_nl_values_plus_128() : _mm512_setzero_si512();
  __m512 acc[S][K];
#pragma GCC unroll 2
  for (int s = 0; s < S; ++s) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) acc[s][k] = _mm512_setzero_ps();
  }
  // Three rows and more compute long enough per block that the hardware prefetchers alone fall
  // behind, on a Zen 4 core too: Q4_0:2048:5632 from memory, one thread, 3 rows 0.42 ms with
  // none against 0.34-0.36 at 2-6 pairs ahead, 4 rows 0.47-0.50 against 0.37-0.40 (2 rows 0.24-0.30
  // with none against 0.34 at 6).
  const std::size_t ahead = K >= 3 ? batch_fetch_pairs : static_cast<std::size_t>(decode_fetch.q4_0);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (share != nullptr) share->step(b);
    const std::size_t h = static_cast<std::size_t>(b % 2);
    __m512 dw[S];
    __m512i chunk[S][8];
#pragma GCC unroll 2
    for (int s = 0; s < S; ++s) {
      const std::byte* pair = groups[s] + static_cast<std::size_t>(b / 2) * x16_pair;
      if (ahead != 0) fetch_ahead(pair, h, ahead);
      if constexpr (K >= 3) fetch_ahead<prefetch_l2>(pair, h, batch_fetch_l2_pairs);
      dw[s] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(pair + 32 * h)));
      unpack_block<Nl>(pair + x16_quants + 256 * h, table, chunk[s]);
    }
    // Rows k0 .. k0 + R - 1, their S x R chains advancing side by side; rows go two at a time
    // (Q4_0:2048:2048 from the caches, one thread: 3 rows 0.079-0.080 -> 0.077-0.078 ms, 4 rows
    // 0.102-0.103 -> 0.098-0.100), as all K at once would not leave the registers for it.
    const auto rows = [&]<int R>(int k0) SPITE_AVX512 {
      const std::int8_t* x[R];
      __m512i isum[R][S];
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
        const std::size_t i = static_cast<std::size_t>((t0 + k0 + r) * nb + b);
        x[r] = xb.qs(i);
        // sum((q - 8) x) = sum(q x) - 8 sum(x) (IQ4_NL: - 128 sum(x)): each chain starts at it.
#pragma GCC unroll 2
        for (int s = 0; s < S; ++s) isum[r][s] = _mm512_set1_epi32(Nl ? -16 * xb.sum8[i] : -xb.sum8[i]);
      }
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {  // chunk c pairs with activation dword c (low nibbles: 0-3)
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) {
          const __m512i xc = _mm512_set1_epi32(load_u32(x[r] + 4 * c));
#pragma GCC unroll 2
          for (int s = 0; s < S; ++s) isum[r][s] = _mm512_dpbusd_epi32(isum[r][s], chunk[s][c], xc);
        }
      }
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
        const __m512 dx = _mm512_set1_ps(xb.d[static_cast<std::size_t>((t0 + k0 + r) * nb + b)]);
#pragma GCC unroll 2
        for (int s = 0; s < S; ++s) {
          acc[s][k0 + r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][s]), _mm512_mul_ps(dw[s], dx), acc[s][k0 + r]);
        }
      }
    };
#pragma GCC unroll 2
    for (int k0 = 0; k0 + 2 <= K; k0 += 2) rows.template operator()<2>(k0);
    if constexpr (K % 2 == 1) rows.template operator()<1>(K - 1);
  }
#pragma GCC unroll 2
  for (int s = 0; s < S; ++s) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) _mm512_storeu_ps(y16[s] + (t0 + k) * out, acc[s][k]);
  }
}

template <class Block>
std::size_t pack16(weight& w) {
  static_assert(sizeof(Block) == sizeof(gguf::block_q4_0));
  return x16_pack_pairs<Block>(w, x16_pair, [](std::byte* pair, std::size_t h, const Block& block, std::size_t r) {
    std::memcpy(pair + 32 * h + 2 * r, &block.d, 2);
    for (std::size_t i = 0; i < 4; ++i) std::memcpy(pair + x16_quants + 256 * h + 64 * i + 4 * r, block.qs + 4 * i, 4);
  });
}

}  // namespace

std::size_t pack_q4_0_x16(weight& w) { return pack16<gguf::block_q4_0>(w); }
std::size_t pack_iq4_nl_x16(weight& w) { return pack16<gguf::block_iq4_nl>(w); }

bool matmul_q4_0_x16(const weight& w, const q8_0_batch& xb, std::int64_t n_tokens, bool nl, float* y, thread_pool& pool) {
  // Up to here the activation rows go over the matrix as two streams (decode16), each 4 of
  // them together; more take the tiles of a group at a time by blocks of activation rows.
  constexpr std::int64_t small_batch = 8;
  if (avx512_q4_K_tiles() == nullptr) return false;
  const std::int64_t nb = w.in / qk0;
  const std::size_t group_bytes = static_cast<std::size_t>((nb + 1) / 2) * x16_pair;
  const auto run = [&]<bool Nl>() {
    if (n_tokens <= small_batch) {
      // Tiles of 4 activation rows, then one of the 1-3 left, each over the pair of groups. The
      // rows left took a pass each: Q4_0:2048:11264 from memory, two threads, alternated, 2 rows
      // 0.28-0.31 -> 0.26-0.27 ms, 3 rows 0.35-0.39 -> 0.28-0.30, 7 rows 0.49-0.51 -> 0.43-0.47
      // (IQ4_NL 3 rows 0.40-0.47 -> 0.28-0.29). Beyond four rows each pass fetches its share of
      // the next pair (next_pair_share): Q4_0:2048:5632 x 8 rows from memory, two threads, Zen 5,
      // 0.165-0.167 -> 0.147-0.149 ms.
      const std::int64_t tiles = (n_tokens + 3) / 4;
      const auto tile = [&]<int S>(const std::byte* const* groups, std::int64_t j, float* const* ys) {
        std::optional<next_pair_share> share;
        if constexpr (S == 2) {
          if (tiles > 1) share.emplace(groups, group_bytes, nb, j, tiles);
        }
        const next_pair_share* ahead = share ? &*share : nullptr;
        switch (std::min<std::int64_t>(4, n_tokens - 4 * j)) {
          case 4: return decode16<S, 4, Nl>(groups, nb, xb, 4 * j, w.out, ahead, ys);
          case 3: return decode16<S, 3, Nl>(groups, nb, xb, 4 * j, w.out, ahead, ys);
          case 2: return decode16<S, 2, Nl>(groups, nb, xb, 4 * j, w.out, ahead, ys);
          default: return decode16<S, 1, Nl>(groups, nb, xb, 4 * j, w.out, ahead, ys);
        }
      };
      by_group_pairs<16>(
          w.out / 16, tiles, y, pool, [&](std::int64_t g) { return w.packed + static_cast<std::size_t>(g) * group_bytes; },
          [&](const std::byte* const* both, std::int64_t j, float* const* ys) { tile.template operator()<2>(both, j, ys); },
          [&](const std::byte* group, std::int64_t j, float* y16) { tile.template operator()<1>(&group, j, &y16); });
      return;
    }
    x16_for_groups(w, group_bytes, q8_0_batch::row_bytes(nb), n_tokens, pool,
                   [&](const std::byte* group, std::int64_t t0, std::int64_t t1, std::int64_t o) {
                     std::int64_t t = t0;
                     for (; t + 4 <= t1; t += 4) tile16<4, Nl>(group, nb, xb, t, w.out, t == t0, y + o);
                     switch (t1 - t) {
                       case 3: return tile16<3, Nl>(group, nb, xb, t, w.out, t == t0, y + o);
                       case 2: return tile16<2, Nl>(group, nb, xb, t, w.out, t == t0, y + o);
                       case 1: return tile16<1, Nl>(group, nb, xb, t, w.out, t == t0, y + o);
                       default: return;
                     }
                   });
  };
  if (nl) {
    run.template operator()<true>();
  } else {
    run.template operator()<false>();
  }
  return true;
}

}  // namespace spite::dispatch::cpu::x86

#endif
