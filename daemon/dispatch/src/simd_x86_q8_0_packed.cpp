// Q8_0 packed at load time for processors with AVX-512 VNNI (the contract of simd_x86_avx2.cpp:
// the reference's exact integer sums and float operations, so the same bits). Reference:
// dot_q8_0 in ref_dot_legacy.cpp, per row and block 8 int32 lanes (lane L the sum of q * x over
// elements 4L..4L+3), one fma per lane with d_w * d_x, the horizontal sum at the end.
//
// In the file's layout a block of one row costs the AVX2 kernel about 9 vector operations (two
// sign flips, two multiply-adds, the scale's conversion and broadcast, a multiply, a conversion,
// an fma) for 34 bytes: decode with one thread ran at ~50 % of the memory's pace, compute-bound.
// VPDPBUSD takes four u8 x s8 products per int32 lane at once, but one operand must be unsigned:
// the weights are stored as q + 128 and each lane starts at -128 x (the sum of its 4 activation
// quants), made once per activation block for all rows, so the lanes are exactly the sums of
// q * x. A group of 8 rows is one stream of spans of 4 blocks (1088 bytes, 17 cache lines):
//   quants   block 4s + j at 1088 s + 256 j: row r's 32 bytes (q + 128) at 32 r, so a 64-byte
//            load holds rows 2p and 2p + 1, the reference's 8 lanes of each in one 256-bit half;
//   scales   block 4s + j at 1088 s + 1024 + 16 j: row r's f16 at 2 r.
// (The scales first came after all of a group's quants: a second stream, which the hardware
// prefetchers followed so poorly that decode read 64-75 % of a plain read's bandwidth.)
// A block of the 8 rows is then 4 loads, 4 VPDPBUSD, one scale conversion and multiply, 4
// permutes (each half its row's scale product), 4 conversions and 4 fmas: about 3 operations a
// row and block, and decode runs at the memory's pace.
//
// The layout serves every x86 kernel set (matrices whose row count is a multiple of 8): AVX-512
// VNNI as above, for the row counts that are not a multiple of 16 (those take the 16-row layout
// of simd_x86_q8_0_x16.cpp, a register per reference lane of 16 rows, no permutes); AVX-VNNI and
// AVX2 alone (flipping the quants back) with 256-bit vectors, one row or a row pair per vector
// (simd_x86_q8_0_256.inc). For those two the layout is mostly about decode: one stream per group
// instead of the file's rows side by side, and each block's 8 scale products made at once.

#include "simd_x86_avx512.hpp"

#if defined(__x86_64__)
#include <cstring>
#include <optional>

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::size_t quants_per_block = 8 * qk0;  // 8 rows of 32 bytes
constexpr std::size_t scales_per_block = 8 * 2;    // 8 f16

constexpr std::size_t span_blocks = 4;
constexpr std::size_t span_bytes = span_blocks * (quants_per_block + scales_per_block);  // 17 cache lines
static_assert(span_bytes % cache_line == 0);

std::size_t group_stride(std::int64_t nb) { return (static_cast<std::size_t>(nb) + span_blocks - 1) / span_blocks * span_bytes; }

// Where block b's quants and scales are in a group (unsigned: a shift and a mask, not a signed
// division, in the tiles' loops).
inline const std::byte* span_of(const std::byte* group, std::int64_t b) {
  return group + static_cast<std::size_t>(b) / span_blocks * span_bytes;
}
inline std::size_t quants_at(std::int64_t b) { return static_cast<std::size_t>(b) % span_blocks * quants_per_block; }
inline std::size_t scales_at(std::int64_t b) {
  return span_blocks * quants_per_block + static_cast<std::size_t>(b) % span_blocks * scales_per_block;
}

// The pieces of tile and decode_groups. Permutes that give each 256-bit half row 2p or 2p + 1's
// scale product.
SPITE_AVX512 inline void row_pair_picks(__m512i (&pick)[4]) {
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    pick[p] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * p)), _mm256_set1_epi32(2 * p + 1), 1);
  }
}

// Block b's share of the bytes `spans` spans ahead (in this group or the next). The AVX-512
// batch tiles fetch 4 spans (4.3 KB) ahead, the AVX-512 decode decode_fetch.q8_0: 3 (3.3 KB) by
// default (on a Zen 5 core, `bench --matmul Q8_0:2048:5632` and `5632:2048 --cold`, three rounds
// alternated, one thread read 88-91 % of a plain read of the same bytes at 4 spans, 90-93 % at 3
// and 86-91 % at 2; two threads 88-95 % / 94-97 %); on a Zen 4 core 1 read best here (one
// thread 70-74 % against 64-69 % at 3 and 66-67 % with none), but its table has 0, measured for
// the 16-row layout that takes most matrices there (simd_x86_q8_0_x16.cpp); the 256-bit ones 8
// (8.7 KB): on a Zen 3 core (AVX2 alone) `bench --matmul Q8_0:2048:5632 --cold -t 1` read
// 75-77 % of a plain read of the same bytes at 4 spans and 88-90 % at 8 (12-32 spans: 82-89 %;
// prefetcht1 / t2 / nta as t0).
// The functions have no target attribute so that every kernel set inlines them (as an AVX-512
// function it was a call per block from the AVX2 kernels).
inline void fetch_ahead(const std::byte* group, std::int64_t b, std::size_t spans) {
  const std::size_t begin = static_cast<std::size_t>(b) * (span_bytes / span_blocks) + spans * span_bytes;
  for (std::size_t off = begin & ~std::size_t{63}; off < begin + span_bytes / span_blocks; off += 64) prefetch_l1(group + off);
}
template <int Spans = 4>
inline void fetch_ahead(const std::byte* group, std::int64_t b) {
  fetch_ahead(group, b, Spans);
}
// The same as a fixed span of prefetches (no loop over the lines).
template <int Spans>
inline void fetch_ahead_span(const std::byte* group, std::int64_t b) {
  prefetch_span<span_bytes / span_blocks>(group + static_cast<std::size_t>(b) * (span_bytes / span_blocks) + Spans * span_bytes);
}

// Activation block i against a block of the group's 8 rows (quants w, f16 scales widened in dw):
// acc[p] holds rows 2p and 2p + 1, one fma per lane with d_w * d_x as the reference.
SPITE_AVX512 inline void add_block(const __m512i (&w)[4], __m256 dw, const q8_0_batch& xb, const std::int32_t* corr, std::size_t i,
                                   const __m512i (&pick)[4], __m512 (&acc)[4]) {
  const __m512i x = _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(xb.qs(i))));
  const __m512i c = _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(corr + 8 * i)));
  // The 8 rows' d_w * d_x (as the reference: one multiply each), then each half its row's.
  const __m512 ds = _mm512_castps256_ps512(_mm256_mul_ps(dw, _mm256_set1_ps(xb.d[i])));
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    const __m512i lanes = _mm512_dpbusd_epi32(c, w[p], x);
    acc[p] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pick[p], ds), _mm512_cvtepi32_ps(lanes), acc[p]);
  }
}

// Block b of a group: its quants and its scales widened.
SPITE_AVX512 inline __m256 load_block(const std::byte* group, std::int64_t b, __m512i (&w)[4]) {
  const std::byte* span = span_of(group, b);
  const std::byte* q = span + quants_at(b);
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) w[p] = _mm512_load_si512(q + 64 * p);
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(span + scales_at(b))));
}

// The 8 rows' results (y[r], r < 8): each row's 8 lanes added as reduce8_vec adds them.
SPITE_AVX512 inline void store_rows(const __m512 (&acc)[4], float* y8) {
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    y8[2 * p] = reduce8_vec(_mm512_castps512_ps256(acc[p]));
    y8[2 * p + 1] = reduce8_vec(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[p]), 1)));
  }
}

// y[(t0 + k) * out + r], r < 8, for K activation rows from t0: the group's 8 rows, two per
// register (row 2p in the low half of acc[k][p], row 2p + 1 in the high one).
// With `fetch` (the first tile of a group and block of activation rows: the later ones find the
// group cached) the tile fetches the bytes a few KB ahead of where it reads.
template <int K>
SPITE_AVX512 void tile(const std::byte* group, std::int64_t nb, const q8_0_batch& xb, const std::int32_t* corr, std::int64_t t0,
                       std::int64_t out, bool fetch, float* y) {
  __m512i pick[4];
  row_pair_picks(pick);
  __m512 acc[K][4];
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) {
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) acc[k][p] = _mm512_setzero_ps();
  }
  for (std::int64_t b = 0; b < nb; ++b) {
    if (fetch) fetch_ahead(group, b);
    __m512i w[4];
    const __m256 dw = load_block(group, b, w);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) add_block(w, dw, xb, corr, static_cast<std::size_t>((t0 + k) * nb + b), pick, acc[k]);
  }
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) store_rows(acc[k], y + (t0 + k) * out);
}

// Decode and small batches: K activation rows from t0 against S groups read in step (S = 2: a group
// of the matrix's first half beside one of its second, by_group_pairs), each fetching
// decode_fetch.q8_0 spans ahead in its own stream when `fetch` (the first pass over the pair); each
// group's rows see tile<K>'s operations in its order. A group's blocks go against all K rows before
// the next group's, so its 4 loaded vectors and the K rows' accumulators are what the registers
// hold.
template <int S, int K>
SPITE_AVX512 void decode_groups(const std::byte* const* groups, std::int64_t nb, const q8_0_batch& xb, const std::int32_t* corr,
                                std::int64_t t0, std::int64_t out, bool fetch, const next_pair_share* share, float* const* ys) {
  __m512i pick[4];
  row_pair_picks(pick);
  __m512 acc[S][K][4];
#pragma GCC unroll 2
  for (int s = 0; s < S; ++s) {
#pragma GCC unroll 2
    for (int k = 0; k < K; ++k) {
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) acc[s][k][p] = _mm512_setzero_ps();
    }
  }
  const std::size_t spans = fetch ? static_cast<std::size_t>(decode_fetch.q8_0) : 0;
  for (std::int64_t b = 0; b < nb; ++b) {
    if (share != nullptr) share->step(b);
#pragma GCC unroll 2
    for (int s = 0; s < S; ++s) {
      if (spans != 0) fetch_ahead(groups[s], b, spans);
      __m512i w[4];
      const __m256 dw = load_block(groups[s], b, w);
#pragma GCC unroll 2
      for (int k = 0; k < K; ++k) add_block(w, dw, xb, corr, static_cast<std::size_t>((t0 + k) * nb + b), pick, acc[s][k]);
    }
  }
#pragma GCC unroll 2
  for (int s = 0; s < S; ++s) {
#pragma GCC unroll 2
    for (int k = 0; k < K; ++k) store_rows(acc[s][k], ys[s] + (t0 + k) * out);
  }
}

// The same layout with 256-bit vectors (simd_x86_q8_0_256.inc, compiled once for AVX-VNNI and
// once for AVX2 alone): a row's block is one register. With AVX-VNNI (Intel's client cores from
// Alder Lake on; Zen 5 with the AVX-512 kernels off) one VPDPBUSD against the activation block
// gives that row's 8 reference lanes, from the block's corrections; with AVX2 the quants are
// flipped back to signed and multiplied as simd_x86_avx2.cpp's decode does (two sign moves,
// VPMADDUBSW, VPMADDWD). Then a conversion and one fma with the row's d_w * d_x (broadcast from
// memory, not a permute). In the file's layout decode read 66 % of a plain read's bandwidth with
// one thread (AVX2: four rows of 34-byte blocks in step, a scalar scale conversion per row and
// block); here one stream per group, 8 rows per pass, each block's 8 scale products made at once.
//
// Batches with 256-bit vectors: rows 2p and 2p + 1 of a group against 4 activation rows from
// t0, both rows in each vector as simd_x86_avx2.cpp's q8_0_tile_2x4 has them (lanes 0-3 of row
// 2p in the low half and of row 2p + 1 in the high one, lanes 4-7 in a second vector), so a
// loaded pair and its sign moves serve 4 activation rows and each activation half is one
// broadcast load. Per pair, a pass over the group's blocks (the first reads from memory, the
// others find the group in the caches); the first 4 activation rows' passes fetch the next group
// meanwhile, a quarter each, so the memory is read at an even pace through all four. One activation row
// at a time (`rows`) cost 10-15 % of the prefill and the 4-sequence decode of TinyLlama's
// shape.
struct pair_block {
  __m256i lo, hi;  // [row 2p's bytes 0-15 | row 2p + 1's], [bytes 16-31 of both]: quants + 128
  __m256 scale;    // [row 2p x act k | row 2p + 1 x act k], k = 0..3
  // q: the pair's 64 bytes of a block, scales: its two f16, dx: the block's 4 activation scales.
  SPITE_AVX2 pair_block(const std::byte* q, const std::byte* scales, const float* dx) {
    lo = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(q + 32), reinterpret_cast<const __m128i*>(q));
    hi = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(q + 48), reinterpret_cast<const __m128i*>(q + 16));
    const __m128i dup = _mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3);
    std::int32_t d2;
    std::memcpy(&d2, scales, 4);
    const __m256 dw = _mm256_cvtph_ps(_mm_shuffle_epi8(_mm_cvtsi32_si128(d2), dup));
    scale = _mm256_mul_ps(dw, _mm256_broadcast_ps(reinterpret_cast<const __m128*>(dx)));
  }
};

SPITE_AVX2 inline void store_pair_tile(const __m256 (&lo)[4], const __m256 (&hi)[4], std::int64_t t0, std::int64_t out, float* y2) {
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    y2[(t0 + k) * out] = reduce8_vec(_mm256_permute2f128_ps(lo[k], hi[k], 0x20));
    y2[(t0 + k) * out + 1] = reduce8_vec(_mm256_permute2f128_ps(lo[k], hi[k], 0x31));
  }
}

namespace avx2 {
#define SPITE_Q8_256_TARGET SPITE_AVX2
constexpr bool corrected = false;  // the lanes need no corrections
struct prepared {
  __m256i q, magnitude;  // signed quants, |q|
};
SPITE_AVX2 inline prepared prepare(__m256i stored) {
  const __m256i q = _mm256_xor_si256(stored, _mm256_set1_epi8(static_cast<char>(0x80)));
  return {q, _mm256_sign_epi8(q, q)};
}
SPITE_AVX2 inline __m256i lanes(const prepared& w, __m256i x, __m256i) { return dot_lanes(w.magnitude, _mm256_sign_epi8(x, w.q)); }
#include "simd_x86_q8_0_256.inc"
#undef SPITE_Q8_256_TARGET
}  // namespace avx2

namespace vnni {
#define SPITE_Q8_256_TARGET SPITE_AVX_VNNI
constexpr bool corrected = true;  // each lane starts at -128 x its activations' sum
struct prepared {
  __m256i stored;  // quants + 128
};
SPITE_AVX_VNNI inline prepared prepare(__m256i stored) { return {stored}; }
SPITE_AVX_VNNI inline __m256i lanes(const prepared& w, __m256i x, __m256i c) { return _mm256_dpbusd_avx_epi32(c, w.stored, x); }
#include "simd_x86_q8_0_256.inc"
#undef SPITE_Q8_256_TARGET
}  // namespace vnni

}  // namespace

SPITE_AVX2 void q8_0_lane_corrections(const q8_0_batch& xb, std::int64_t nb, std::int64_t n_tokens, thread_pool& pool,
                                 aligned_vector<std::int32_t>& c) {
  c.resize(static_cast<std::size_t>(8 * nb * n_tokens));
  for_each_token(n_tokens, pool, [&](std::int64_t t) SPITE_AVX2 {
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
    for (std::int64_t b = 0; b < nb; ++b) {
      const std::size_t i = static_cast<std::size_t>(t * nb + b);
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs(i)));
      // 128 x (x[4L] + ... + x[4L + 3]); |x| <= 127, so the int16 pair sums stay below 2^15.
      const __m256i sums = dot_lanes(bias, x);
      _mm256_store_si256(reinterpret_cast<__m256i*>(c.data() + 8 * i), _mm256_sub_epi32(_mm256_setzero_si256(), sums));
    }
  });
}

std::size_t pack_q8_0(weight& w) {
  if (w.out % 8 != 0) return 0;
  const std::int64_t nb = w.in / qk0, groups = w.out / 8;
  const std::size_t stride = group_stride(nb);
  auto buffer = make_aligned_bytes(static_cast<std::size_t>(groups) * stride);
  for_load_ranges(groups, [&](std::int64_t g0, std::int64_t g1) {
    for (std::int64_t g = g0; g < g1; ++g) {
      std::byte* group = buffer.get() + static_cast<std::size_t>(g) * stride;
      for (int r = 0; r < 8; ++r) {
        const auto* row = reinterpret_cast<const gguf::block_q8_0*>(w.row(8 * g + r));
        for (std::int64_t b = 0; b < nb; ++b) {
          std::byte* span = group + static_cast<std::size_t>(b) / span_blocks * span_bytes;
          auto* q = reinterpret_cast<std::uint8_t*>(span + quants_at(b) + 32 * static_cast<std::size_t>(r));
          for (int j = 0; j < qk0; ++j) q[j] = static_cast<std::uint8_t>(static_cast<std::uint8_t>(row[b].qs[j]) ^ 0x80U);
          std::memcpy(span + scales_at(b) + 2 * static_cast<std::size_t>(r), &row[b].d, 2);
        }
      }
    }
  });
  w.packed = buffer.get();
  w.packed_owner = std::move(buffer);
  w.packed_rows = 8;
  return static_cast<std::size_t>(groups) * stride;
}

void matmul_q8_0_packed(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  constexpr std::int64_t small_batch = 8;
  const std::int64_t nb = w.in / qk0;
  const q8_0_batch xb(x, w.in, n_tokens, pool);
  const std::size_t stride = group_stride(nb);
  const bool vnni = avx512_q8_0_tiles() != nullptr;
  const bool vnni256 = !vnni && has_avx_vnni_kernels();
  aligned_vector<std::int32_t> corr;
  if (vnni || vnni256) q8_0_lane_corrections(xb, nb, n_tokens, pool, corr);
  const auto group_at = [&](std::int64_t g) { return w.packed + static_cast<std::size_t>(g) * stride; };
  // One activation row at a time through the 256-bit kernels: S groups in step.
  const auto rows = [&]<int S>(const std::byte* const* groups, std::int64_t t, bool fetch, float* const* ys,
                               const next_pair_share* share = nullptr) {
    if (vnni256) return vnni::rows<S>(groups, nb, xb, corr.data(), t, fetch, ys, share);
    avx2::rows<S>(groups, nb, xb, corr.data(), t, fetch, ys, share);
  };
  if (!vnni && !vnni256 && (n_tokens == 2 || n_tokens == 3)) {
    // Two or three sequences decoding together (AVX2 alone): each group of a pair takes the first
    // two activation rows in one pass, each weight vector made ready once for both; a third row
    // then goes as one row does. Q8_0:2048:2048 x 2 rows from the caches, one thread, three
    // rounds against a pass per row: 246-247 -> 216-217 us; Q8_0:2048:5632 --cold, two threads,
    // 412-456 -> 346-377 us; the two groups in step with 2 x 2 x 8 accumulators (more than the
    // registers) 249-252 / 364-379. TinyLlama Q8_0, two sequences, two threads: 44.1-45.5 ->
    // 51.8-56.0 t/s.
    by_group_pairs<8>(
        w.out / 8, 1, y, pool, group_at,
        [&](const std::byte* const* both, std::int64_t, float* const* ys) {
          for (int s = 0; s < 2; ++s) {
            const next_pair_share share(both, stride, nb, s, n_tokens);
            avx2::rows_k<1, 2>(&both[s], nb, xb, corr.data(), 0, true, w.out, &ys[s], &share);
          }
          if (n_tokens == 3) {
            const next_pair_share share(both, stride, nb, 2, 3);
            float* const y2[2] = {ys[0] + 2 * w.out, ys[1] + 2 * w.out};
            avx2::rows<2>(both, nb, xb, corr.data(), 2, false, y2, &share);
          }
        },
        [&](const std::byte* group, std::int64_t, float* y8) {
          avx2::rows_k<1, 2>(&group, nb, xb, corr.data(), 0, true, w.out, &y8);
          if (n_tokens == 3) {
            float* y2 = y8 + 2 * w.out;
            avx2::rows<1>(&group, nb, xb, corr.data(), 2, false, &y2);
          }
        });
    return;
  }
  if (!vnni && n_tokens < 4) {
    // One activation row per pass, the matrix as two streams; the passes after the first find
    // the pair in the caches. 2-3 rows went one stream (as the tiles below): Q8_0:2048:11264
    // from memory, two threads, alternated, AVX-VNNI 2 rows 0.74 -> 0.57-0.62 ms, 3 rows
    // 0.94-0.96 -> 0.78-0.87; AVX2 2 rows 0.73-0.76 -> 0.58-0.65, 3 rows 0.97-1.04 -> 0.82-0.90.
    by_group_pairs<8>(
        w.out / 8, n_tokens, y, pool, group_at,
        [&](const std::byte* const* both, std::int64_t t, float* const* ys) {
          float* const yt[2] = {ys[0] + t * w.out, ys[1] + t * w.out};
          const next_pair_share share(both, stride, nb, t, n_tokens);
          rows.template operator()<2>(both, t, t == 0, yt, n_tokens > 1 ? &share : nullptr);
        },
        [&](const std::byte* group, std::int64_t t, float* y8) {
          float* yt = y8 + t * w.out;
          rows.template operator()<1>(&group, t, t == 0, &yt);
        });
    return;
  }
  if (vnni && n_tokens <= small_batch) {
    // Decode as two streams per thread. Against a plain read of the same bytes from memory
    // (`bench --matmul Q8_0:2048:5632` and `5632:2048 --cold`, two rounds alternated with the
    // one stream of the tiles below): two threads 88-93 % as one stream, 102-107 % as two; one
    // thread 91-101 % and 96-99 %. Small batches the same way, two activation rows per pass
    // over a pair of groups (four would need more accumulators than there are registers); the
    // passes after the first find the pair in the caches. Q8_0:2048:11264 from memory, two
    // threads, alternated with the one-stream tiles: 2 rows 0.45-0.47 -> 0.35-0.39 ms (83-86 ->
    // 99-109 % of a plain read), 3-8 rows the same; two TinyLlama sequences 75-76 -> 91 t/s.
    const std::int64_t passes = (n_tokens + 1) / 2;
    const auto pass = [&]<int S>(const std::byte* const* groups, std::int64_t j, float* const* ys) {
      std::optional<next_pair_share> share;
      if constexpr (S == 2) {
        if (passes > 1) share.emplace(groups, stride, nb, j, passes);
      }
      const next_pair_share* ahead = share ? &*share : nullptr;
      if (n_tokens - 2 * j >= 2) return decode_groups<S, 2>(groups, nb, xb, corr.data(), 2 * j, w.out, j == 0, ahead, ys);
      decode_groups<S, 1>(groups, nb, xb, corr.data(), 2 * j, w.out, j == 0, ahead, ys);
    };
    by_group_pairs<8>(
        w.out / 8, passes, y, pool, group_at,
        [&](const std::byte* const* both, std::int64_t j, float* const* ys) { pass.template operator()<2>(both, j, ys); },
        [&](const std::byte* group, std::int64_t j, float* y8) { pass.template operator()<1>(&group, j, &y8); });
    return;
  }
  const std::size_t x_row_bytes = xb.row_bytes(nb) + static_cast<std::size_t>(nb) * 8 * sizeof(std::int32_t);
  by_groups_and_token_blocks(w.out / 8, n_tokens, token_block(x_row_bytes), pool, [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
    const std::byte* group = w.packed + static_cast<std::size_t>(g) * stride;
    float* yg = y + 8 * g;
    if (!vnni) {
      // xb.d_by_block exists from 4 activation rows on.
      std::int64_t t = t0;
      const next_group_prefetch next(group + stride, stride, 4 * nb);
      for (; n_tokens >= 4 && t + 4 <= t1; t += 4) {
        for (int p = 0; p < 4; ++p) {
          const next_group_prefetch* ahead = t == t0 ? &next : nullptr;
          if (vnni256) {
            vnni::pair_tile(group, p, nb, xb, corr.data(), t, w.out, ahead, yg + 2 * p);
          } else {
            avx2::pair_tile(group, p, nb, xb, corr.data(), t, w.out, ahead, yg + 2 * p);
          }
        }
      }
      // Rows left two at a time as two or three sequences decode (AVX2; AVX-VNNI's lanes a
      // row at a time).
      for (; !vnni256 && t + 2 <= t1; t += 2) {
        float* yt = yg + t * w.out;
        avx2::rows_k<1, 2>(&group, nb, xb, corr.data(), t, t == t0, w.out, &yt);
      }
      for (; t < t1; ++t) {
        float* yt = yg + t * w.out;
        rows.template operator()<1>(&group, t, t == t0, &yt);
      }
      return;
    }
    // The first tile of each block of activation rows fetches four spans (4.3 KB) ahead of
    // where it reads: prefetching the whole next group cost up to a fifth of the bandwidth
    // (Q8_0:2048:2048 from memory, alternated in one process with a plain read of the same
    // bytes: 85-92 % of it without, 70-93 % with, one thread), while four spans ahead,
    // Q8_0:5632:2048 three rounds interleaved, one thread read 34-37 GB/s against 29-33 without,
    // two 64-69 against 57-63 (eight spans: 27-33, 42-62). Batches did the whole next group
    // until that too measured worse: 4 sequences decoding together (TinyLlama, 2 threads)
    // 92-94 -> 109-120 tokens/s, prefill of 512 tokens 150-155 -> 166-168.
    const auto ahead = [&](std::int64_t t) { return t == t0; };
    std::int64_t t = t0;
    for (; t + 4 <= t1; t += 4) tile<4>(group, nb, xb, corr.data(), t, w.out, ahead(t), yg);
    switch (t1 - t) {
      case 3: return tile<3>(group, nb, xb, corr.data(), t, w.out, ahead(t), yg);
      case 2: return tile<2>(group, nb, xb, corr.data(), t, w.out, ahead(t), yg);
      case 1: return tile<1>(group, nb, xb, corr.data(), t, w.out, ahead(t), yg);
      default: return;
    }
  });
}

}  // namespace spite::dispatch::cpu::x86

#endif
