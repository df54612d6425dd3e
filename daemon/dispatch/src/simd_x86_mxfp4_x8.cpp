// MXFP4 packed in 8-row groups for processors without the AVX-512 kernels (AVX2; AVX-VNNI
// client cores take it too), under the contract of the file-layout kernel (mxfp4_tile in
// simd_x86_iquants.cpp; reference: matmul32<mxfp4> in ref_dot_repack.cpp): per row and
// activation row 8 lanes of 4 products per block, even blocks into one 8-lane accumulator and
// odd ones into another, the two added before reduce8_vec's sum, an odd last block after it.
//
// On the file's blocks every row's codes are unpacked and its d_x * d_w made as a scalar for each
// activation row, about 15 operations per 32 products: the product is compute-bound
// (MXFP4:2880:2880, one thread, from memory: 11-15 GB/s of weights; gpt-oss decode at 45 % of
// the bandwidth roofline on two threads). Here a 256-bit register is one 4-element chunk of 8
// rows, so a lane of 8 rows is one vector: per chunk and activation row a sign move,
// VPMADDUBSW, VPMADDWD, a conversion and an fma, the unpacking and the scales shared by the 8
// rows and all activation rows of a tile. MXFP4:2880:2880 with the AVX-512 kernels off
// (SPITE_CPU_AVX512=0 SPITE_CPU_AVXVNNI=0, Zen 5), alternated with the file's layout: one
// activation row from memory 0.289-0.312 -> 0.261-0.277 ms on one thread, 0.151-0.152 ->
// 0.137-0.141 on two; from the caches, one thread, 4 rows 0.94-0.96 -> 0.60-0.68, 16 rows
// 3.7-3.8 -> 2.4, 128 rows 29.7-30.0 -> 19.5-19.7. Per group of 8 rows and span of 8 blocks
// (1088 bytes, 17 cache lines; the file's 8 x 8 x 17):
//   exps[8][8]      u8 at 8 j + r: row r's E8M0 exponent of block 8s + j;
//   quants[8][4]    32-byte registers at 64 + 128 j + 32 i: bytes 4r..4r+3 are row r's
//                   qs[4i..4i+3] of block 8s + j (elements 4i + k in the low nibbles, 16 + 4i + k
//                   in the high ones).
// A last span of fewer blocks is left zero past them (never read). Made where the AVX-512
// kernels do not run (the 16-row layout of simd_x86_mxfp4_x16.cpp serves those) and the row
// count is a multiple of 8.
#include "simd_x86.hpp"

#if defined(__x86_64__)
#include <algorithm>
#include <cstring>

#include "../../gguf/src/quants/iq_tables.hpp"
#include "ref_quant.hpp"
#include "simd_x86_split.hpp"

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::int64_t span_blocks = 8;
constexpr std::size_t x8_quants = 64, x8_block_quants = 128;
constexpr std::size_t x8_span = x8_quants + span_blocks * x8_block_quants;
static_assert(x8_span == 17 * cache_line && x8_span == 8 * span_blocks * sizeof(gguf::block_mxfp4));

std::size_t group_bytes(std::int64_t nb) { return static_cast<std::size_t>((nb + span_blocks - 1) / span_blocks) * x8_span; }

// Where block b is: its span, and its place j in it.
inline const std::byte* span_of(const std::byte* group, std::int64_t b) {
  return group + static_cast<std::size_t>(b / span_blocks) * x8_span;
}

// The 8 rows' 2^(e - 128) (iq::e8m0_to_fp32_half) from their exponent bytes.
SPITE_AVX2 inline __m256 scales8(const std::byte* exps) {
  const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(exps)));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
}

// Register i of a block: chunks i (low nibbles) and 4 + i (high) as magnitudes and, for the
// activations' sign moves, bytes whose top bit is the code's sign bit (bit 3: codes 8-15 are the
// negative values): the high code's is already there, the low code's comes up by a shift. A
// sign byte is zero only where its code is 0, whose magnitude is 0 (a zeroed activation changes
// nothing), so it is one lookup and one shift where a lookup of the values and two absolute
// values were (one thread, AVX2, Zen 3, from the caches, alternated: MXFP4:2880:5760 one row
// 0.629 -> 0.585 ms, 2880:2880 4 rows 0.816 -> 0.781, 128 rows 26.3 -> 25.1).
struct chunk_pair {
  __m256i sign[2], magnitude[2];
  SPITE_AVX2 chunk_pair(const std::byte* quants, int i, __m256i magnitudes) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(quants + 32 * i));
    magnitude[0] = _mm256_shuffle_epi8(magnitudes, _mm256_and_si256(v, m4));
    magnitude[1] = _mm256_shuffle_epi8(magnitudes, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    sign[0] = _mm256_slli_epi16(v, 4);
    sign[1] = v;
  }
  // Chunk h's lane of the 8 rows against the 4 activation quants at x: exact (|value| <= 12).
  SPITE_AVX2 __m256i lane(int h, const std::int8_t* x) const {
    return dot_lanes(magnitude[h], _mm256_sign_epi8(_mm256_set1_epi32(load_u32(x)), sign[h]));
  }
};

SPITE_AVX2 inline __m256i value_table() {
  const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(gguf::quants::iq::kvalues_mxfp4));
  return _mm256_set_m128i(values, values);
}

SPITE_AVX2 inline __m256i magnitude_table() { return _mm256_abs_epi8(value_table()); }

// Block b's share (an eighth: two or three lines) of the span two ahead, by a fixed count of prefetches.
inline void fetch_ahead(const std::byte* span, std::int64_t b) {
  prefetch_span<x8_span / span_blocks>(span + 2 * x8_span + static_cast<std::size_t>(b % span_blocks) * (x8_span / span_blocks));
}

// The end for activation row t: lanes a[L] (the two parities added) summed in reduce8_vec's order
// for each of the 8 rows, ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)), then an odd last
// block's exact sum by one fma, to y.
SPITE_AVX2 inline void finish(const std::byte* group, std::int64_t nb, const q8_0_batch& xb, std::int64_t t, const __m256 (&a)[8],
                              __m256i table, float* y) {
  __m256 v = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6])),
                           _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7])));
  if (nb % 2 != 0) {
    const std::int64_t b = nb - 1;
    const std::byte* span = span_of(group, b);
    const auto j = static_cast<std::size_t>(b % span_blocks);
    const auto n = static_cast<std::size_t>(t * nb + b);
    __m256i total = _mm256_setzero_si256();
    for (int i = 0; i < 4; ++i) {
      const chunk_pair c(span + x8_quants + x8_block_quants * j, i, table);
      total = _mm256_add_epi32(total, _mm256_add_epi32(c.lane(0, xb.qs(n) + 4 * i), c.lane(1, xb.qs(n) + 4 * i + 16)));
    }
    v = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(xb.d[n]), scales8(span + 8 * j)), _mm256_cvtepi32_ps(total), v);
  }
  _mm256_storeu_ps(y, v);
}

// Block b of a tile of K activation rows from t0: its span and place, its share of the span two
// ahead fetched (with `fetch`), and each row's d_x * d_w.
template <int K>
struct tile_block {
  const std::byte* span;
  std::size_t j;
  __m256 d[K];
  SPITE_AVX2 tile_block(const std::byte* group, std::int64_t b, std::int64_t nb, const q8_0_batch& xb, std::int64_t t0, bool fetch)
      : span(span_of(group, b)), j(static_cast<std::size_t>(b % span_blocks)) {
    if (fetch) fetch_ahead(span, b);
    const __m256 dw = scales8(span + 8 * j);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) d[k] = _mm256_mul_ps(_mm256_set1_ps(xb.d[static_cast<std::size_t>((t0 + k) * nb + b)]), dw);
  }
  const std::byte* quants() const { return span + x8_quants + x8_block_quants * j; }
};

// A block's products against K activation rows (x[k]: the block's activation quants of row k)
// added to the lanes of its parity h, acc[k][h][lane] (one fma per lane with d_x * d_w).
template <int K>
SPITE_AVX2 inline void add_block(const tile_block<K>& blk, const std::int8_t* const* x, __m256i table, float (*acc)[2][8][8], std::size_t h) {
#pragma GCC unroll 1
  for (int i = 0; i < 4; ++i) {
    const chunk_pair c(blk.quants(), i, table);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        float* f = acc[k][h][i + 4 * half];
        const __m256 l = _mm256_cvtepi32_ps(c.lane(half, x[k] + 4 * i + 16 * half));
        _mm256_store_ps(f, _mm256_fmadd_ps(blk.d[k], l, _mm256_load_ps(f)));
      }
    }
  }
}

// A tile's end: each activation row's lanes (two parities, in memory) added and finished.
template <int K>
SPITE_AVX2 inline void finish_tile(const float (*acc)[2][8][8], const std::byte* group, std::int64_t nb, const q8_0_batch& xb,
                                   std::int64_t t0, std::int64_t out, float* y8) {
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) {
    __m256 a[8];
#pragma GCC unroll 8
    for (int L = 0; L < 8; ++L) a[L] = _mm256_add_ps(_mm256_load_ps(acc[k][0][L]), _mm256_load_ps(acc[k][1][L]));
    finish(group, nb, xb, t0 + k, a, magnitude_table(), y8 + (t0 + k) * out);
  }
}

// K activation rows from t0 against one group; with `fetch`, each block fetches its share of
// the span two ahead. The float lanes (row k, parity, lane) live in memory: AVX2's 16 registers
// do not hold one row's 16 with anything else. (One row going register by register instead,
// lanes i and 4 + i over all blocks, four lanes in registers: 0.217-0.221 ms against
// 0.159-0.166, MXFP4:2880:2880 from memory on two threads.)
template <int K>
SPITE_AVX2 void tile(const std::byte* group, std::int64_t nb, const q8_0_batch& xb, std::int64_t t0, std::int64_t out, bool fetch,
                     float* y8) {
  const __m256i table = magnitude_table();
  alignas(32) float acc[K][2][8][8] = {};
  const std::int64_t paired = nb & ~std::int64_t{1};
  for (std::int64_t b = 0; b < paired; ++b) {
    const tile_block<K> blk(group, b, nb, xb, t0, fetch);
    const std::int8_t* x[K];
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) x[k] = xb.qs(static_cast<std::size_t>((t0 + k) * nb + b));
    add_block<K>(blk, x, table, acc, static_cast<std::size_t>(b & 1));
  }
  finish_tile<K>(acc, group, nb, xb, t0, out, y8);
}

// Decode: activation row t against two groups in step, block by block, so that each thread reads
// two streams (by_group_pairs), as the other packed layouts' decode does; each group sees
// tile<1>'s operations in the same order. Against the one stream, alternated, medians of five
// rounds of the share of a plain read of the same bytes from memory: MXFP4:2880:2880 (gpt-oss's
// shapes) two threads 80.5 -> 86.9 %, one thread 55.8 -> 59.6 %; 2048:5632 two threads 76.1 ->
// 80.7 %; from the caches one row 0.285 -> 0.273 ms.
SPITE_AVX2 void decode_pair(const std::byte* const* groups, std::int64_t nb, const q8_0_batch& xb, std::int64_t t, std::int64_t out,
                            float* const* y8) {
  const __m256i table = magnitude_table();
  alignas(32) float acc[2][1][2][8][8] = {};
  const std::int64_t paired = nb & ~std::int64_t{1};
  const std::int8_t* x = xb.qs(static_cast<std::size_t>(t * nb));
  for (std::int64_t b = 0; b < paired; ++b, x += qk0) {
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g) add_block<1>(tile_block<1>(groups[g], b, nb, xb, t, t == 0), &x, table, acc[g], static_cast<std::size_t>(b & 1));
  }
  for (int g = 0; g < 2; ++g) finish_tile<1>(acc[g], groups[g], nb, xb, t, out, y8[g]);
}

// The same with AVX-VNNI (Intel's client cores from Alder Lake on; Zen 5 with the AVX-512
// kernels off): the values + 12 (0..24, unsigned) against the activation quants, each lane
// starting at -12 x the sum of its 4 activation quants (`corr`), so a chunk's lane is one
// VPDPBUSD (against a sign move, VPMADDUBSW and VPMADDWD): the same exact integers. One row
// from the caches 0.224-0.240 -> 0.186-0.207 ms (MXFP4:2880:2880, one thread); with more rows
// the float lanes are the bound either way (128 rows 19-21 ms both).
template <int K>
SPITE_AVX_VNNI void tile_vnni(const std::byte* group, std::int64_t nb, const q8_0_batch& xb, const std::int32_t* corr,
                              std::int64_t t0, std::int64_t out, bool fetch, float* y8) {
  const __m256i table = _mm256_add_epi8(value_table(), _mm256_set1_epi8(12)), m4 = _mm256_set1_epi8(0x0F);
  alignas(32) float acc[K][2][8][8] = {};
  const std::int64_t paired = nb & ~std::int64_t{1};
  for (std::int64_t b = 0; b < paired; ++b) {
    const auto h = static_cast<std::size_t>(b & 1);
    const tile_block<K> blk(group, b, nb, xb, t0, fetch);
#pragma GCC unroll 1
    for (int i = 0; i < 4; ++i) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(blk.quants() + 32 * i));
      const __m256i u[2] = {_mm256_shuffle_epi8(table, _mm256_and_si256(v, m4)),
                            _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4))};
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) {
        const auto n = static_cast<std::size_t>((t0 + k) * nb + b);
#pragma GCC unroll 2
        for (int half = 0; half < 2; ++half) {
          const int L = i + 4 * half;
          const __m256i lane = _mm256_dpbusd_avx_epi32(_mm256_set1_epi32(corr[8 * n + static_cast<std::size_t>(L)]), u[half],
                                                       _mm256_set1_epi32(load_u32(xb.qs(n) + 4 * L)));
          float* f = acc[k][h][L];
          _mm256_store_ps(f, _mm256_fmadd_ps(blk.d[k], _mm256_cvtepi32_ps(lane), _mm256_load_ps(f)));
        }
      }
    }
  }
  finish_tile<K>(acc, group, nb, xb, t0, out, y8);
}

// -12 x the sum of each lane's 4 activation quants, 8 int32 per activation block (block i at 8 i).
SPITE_AVX2 void lane_corrections12(const q8_0_batch& xb, std::int64_t nb, std::int64_t n_tokens, thread_pool& pool,
                                   aligned_vector<std::int32_t>& c) {
  c.resize(static_cast<std::size_t>(8 * nb * n_tokens));
  for_each_token(n_tokens, pool, [&](std::int64_t t) SPITE_AVX2 {
    for (std::int64_t b = 0; b < nb; ++b) {
      const auto i = static_cast<std::size_t>(t * nb + b);
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs(i)));
      const __m256i sums = dot_lanes(_mm256_set1_epi8(12), x);  // int16 pairs within 2 x 12 x 127
      _mm256_store_si256(reinterpret_cast<__m256i*>(c.data() + 8 * i), _mm256_sub_epi32(_mm256_setzero_si256(), sums));
    }
  });
}

}  // namespace

std::size_t pack_mxfp4_x8(weight& w) {
  if (w.out % 8 != 0) return 0;
  const std::int64_t nb = w.in / qk0, groups = w.out / 8;
  const std::size_t stride = group_bytes(nb), bytes = static_cast<std::size_t>(groups) * stride;
  auto buffer = make_aligned_bytes(bytes);  // zeroed
  for_load_ranges(groups, [&](std::int64_t g0, std::int64_t g1) {
    for (std::int64_t g = g0; g < g1; ++g) {
      for (std::size_t r = 0; r < 8; ++r) {
        const auto* row = reinterpret_cast<const gguf::block_mxfp4*>(w.row(8 * g + static_cast<std::int64_t>(r)));
        for (std::int64_t b = 0; b < nb; ++b) {
          std::byte* span = buffer.get() + static_cast<std::size_t>(g) * stride + static_cast<std::size_t>(b / span_blocks) * x8_span;
          const auto j = static_cast<std::size_t>(b % span_blocks);
          std::memcpy(span + 8 * j + r, &row[b].e, 1);
          for (std::size_t i = 0; i < 4; ++i) std::memcpy(span + x8_quants + x8_block_quants * j + 32 * i + 4 * r, row[b].qs + 4 * i, 4);
        }
      }
    }
  });
  w.packed = buffer.get();
  w.packed_owner = std::move(buffer);
  w.packed_rows = 8;
  return bytes;
}

void matmul_mxfp4_x8(const weight& w, const q8_0_batch& xb, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qk0;
  const std::size_t stride = group_bytes(nb);
  const bool vnni = has_avx_vnni_kernels();
  aligned_vector<std::int32_t> corr;
  if (vnni) lane_corrections12(xb, nb, n_tokens, pool, corr);
  if (n_tokens == 1 && !vnni) {
    const auto group_at = [&](std::int64_t g) { return w.packed + static_cast<std::size_t>(g) * stride; };
    return by_group_pairs(
        w.out / 8, 1, y, pool, group_at,
        [&](const std::byte* const* groups, std::int64_t t, float* const* ys) { decode_pair(groups, nb, xb, t, w.out, ys); },
        [&](const std::byte* group, std::int64_t t, float* yg) { tile<1>(group, nb, xb, t, w.out, true, yg); });
  }
  const std::size_t x_row_bytes = q8_0_batch::row_bytes(nb) + (vnni ? static_cast<std::size_t>(nb) * 8 * sizeof(std::int32_t) : 0);
  by_groups_and_token_blocks(w.out / 8, n_tokens, token_block(x_row_bytes), pool, [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
    const std::byte* group = w.packed + static_cast<std::size_t>(g) * stride;
    float* y8 = y + 8 * g;
    // Tiles of 4, 3, 2 and 1 activation rows: three sequences decoding together unpack each
    // block once, not once for a tile of 2 and again for 1.
    const auto run = [&]<int K>(std::int64_t t) {
      if (vnni) {
        tile_vnni<K>(group, nb, xb, corr.data(), t, w.out, t == t0, y8);
      } else {
        tile<K>(group, nb, xb, t, w.out, t == t0, y8);
      }
    };
    std::int64_t t = t0;
    for (; t + 4 <= t1; t += 4) run.template operator()<4>(t);
    if (t + 3 == t1) {
      run.template operator()<3>(t), t += 3;
    } else if (t + 2 <= t1) {
      run.template operator()<2>(t), t += 2;
    }
    if (t < t1) run.template operator()<1>(t);
  });
}

}  // namespace spite::dispatch::cpu::x86

#endif
