// MXFP4 (gpt-oss's experts) packed in 16-row groups for processors with AVX-512 VNNI, under the
// contract of the file-layout kernels (simd_x86_mxfp4_avx512.cpp; reference: matmul32<mxfp4> in
// ref_dot_repack.cpp): per row and activation row 8 lanes of 4 products per block, even blocks
// into one 8-lane accumulator and odd ones into another (one fma per lane with d_x * d_w), the
// two added before reduce8_vec's sum, an odd last block after it as one fma.
//
// On the file's 17-byte blocks each row's codes are looked up, their signs moved onto the
// activations and the lanes reduced row by row (MXFP4:2880:2880, one thread, one activation
// row from memory: 67 % of a plain read). Here a 64-byte register is one 4-element chunk of 16
// rows, so a lane of 16 rows is one vector and every VPDPBUSD takes its activation dword as a
// broadcast (struct activations: how the signs are handled for one row and for several).
// Alternated with the file's layout (one thread, from the caches): 1 row 0.12 -> 0.10 ms, 2 rows
// 0.23 -> 0.18, 16 rows 2.2 -> 1.1, 128 rows 17.6 -> 9.1; one row from memory 67 -> 87 % of a
// plain read. The float lanes (two parities x 8, the reference's order) are the bound: 8
// conversions and 8 fmas a block for every 8 VPDPBUSD. Keeping them in registers pass by pass
// (lanes i and 4 + i) gave 12.1-12.4 ms for 128 rows; eight rows at a time, no gain.
// Per group of 16 rows and span of 4 blocks (1088 bytes, 17 cache lines; the file's 16 x 4 x 17):
//   exps[4][16]     u8 at 16 j + r: row r's E8M0 exponent of block 4s + j;
//   quants[4][4]    64-byte registers at 64 + 256 j + 64 i: bytes 4r..4r+3 are row r's
//                   qs[4i..4i+3] of block 4s + j (elements 4i + k in the low nibbles, 16 + 4i +
//                   k in the high ones).
// A last span of fewer blocks is left zero past them (never read). Made only where the AVX-512
// kernels run and the row count is a multiple of 16; after set_avx512(false) such a matrix goes
// through the AVX2 kernel on the file's layout.
#include "simd_x86_avx512.hpp"

#if defined(__x86_64__)
#include <algorithm>
#include <cstring>

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::int64_t span_blocks = 4;
constexpr std::size_t x16_quants = 64, x16_block_quants = 256;
constexpr std::size_t x16_span = x16_quants + span_blocks * x16_block_quants;
static_assert(x16_span == 17 * cache_line && x16_span == 16 * span_blocks * sizeof(gguf::block_mxfp4));

std::size_t group_bytes(std::int64_t nb) { return static_cast<std::size_t>((nb + span_blocks - 1) / span_blocks) * x16_span; }

// The 16 rows' 2^(e - 128) (iq::e8m0_to_fp32_half) from their exponent bytes: VSCALEFPS of
// 2^-128 (a subnormal float, exact) by e, exact for every e, subnormal results included.
SPITE_AVX512 inline __m512 scales16(const std::byte* exps) {
  const __m512i e = _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(exps)));
  return _mm512_scalef_ps(_mm512_castsi512_ps(_mm512_set1_epi32(0x00200000)), _mm512_cvtepi32_ps(e));
}

// The activations two ways. One activation row: the block's values + 128 (unsigned, VPDPBUSD's
// first operand) against the quants, each lane starting at -128 x the sum of its 4 activation
// quants (the lane corrections of packed Q8_0, from memory). Several: the values themselves
// (signed) against the quants + 128, each lane starting at -128 x the sum of its 4 values,
// made once per chunk for all the rows (16 operations a block, more than one row's 8 loads).
struct activations {
  const q8_0_batch& xb;
  const std::int32_t* corr;  // 8 per block, for one activation row
  const std::int8_t* xp;     // the quants + 128, for several
};

// Block chunk c (elements 4c..4c+3 of the 16 rows), as the form wants: values + 128 (Signed
// false) or the values with each lane's start.
template <bool Signed>
SPITE_AVX512 inline void unpack(const std::byte* quants, __m512i (&chunk)[8], __m512i (&start)[8]) {
  const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(gguf::quants::iq::kvalues_mxfp4));
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i table = Signed ? _mm512_broadcast_i32x4(values) : _mm512_xor_si512(_mm512_broadcast_i32x4(values), bias);
  const __m512i m4 = _mm512_set1_epi8(0x0F), zero = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512i v = _mm512_load_si512(quants + 64 * i);
    chunk[i] = _mm512_shuffle_epi8(table, _mm512_and_si512(v, m4));
    chunk[4 + i] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
  }
  if constexpr (Signed) {
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) start[c] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, chunk[c]));
  }
}

// Lane L of activation block i: the exact sum of the 4 products of each of the 16 rows.
template <bool Signed>
SPITE_AVX512 inline __m512i lane(const activations& a, std::size_t i, int L, const __m512i (&chunk)[8], const __m512i (&start)[8]) {
  if constexpr (Signed) {
    return _mm512_dpbusd_epi32(start[L], _mm512_set1_epi32(load_u32(a.xp + qk0 * i + 4 * L)), chunk[L]);
  } else {
    return _mm512_dpbusd_epi32(_mm512_set1_epi32(a.corr[8 * i + static_cast<std::size_t>(L)]), chunk[L],
                               _mm512_set1_epi32(load_u32(a.xb.qs(i) + 4 * L)));
  }
}

// Block b's share (a quarter) of the span `ahead` on (decode_fetch.mxfp4, by default four): the
// hardware prefetchers alone lag behind a stream of groups.
SPITE_AVX512 inline void fetch_ahead(const std::byte* span, std::int64_t b, std::size_t ahead) {
  const int j = static_cast<int>(b % span_blocks);
  for (int l = 5 * j; l < std::min(5 * j + 5, 17); ++l) prefetch_l1(span + ahead * x16_span + cache_line * l);
}

// S groups read in step (S = 2: two streams, by_group_pairs) against K activation rows from t0;
// with `fetch` each block fetches its share of the span decode_fetch.mxfp4 ahead. 16 float lanes per
// activation row and group, each touched once per block.
template <int S, int K>
SPITE_AVX512 void tile(const std::byte* const* groups, std::int64_t nb, const activations& a, std::int64_t t0, std::int64_t out,
                       bool fetch, float* const* y16) {
  constexpr bool Signed = K > 1;
  const q8_0_batch& xb = a.xb;
  // The float lanes (parity h, lane L of each row and group): in registers, spilled by the
  // compiler where they do not fit, or for two groups of two rows in memory, which measured
  // faster there (MXFP4:2880:2880, two rows from the caches: 0.175 against 0.208 ms; the other
  // tiles 10-20 % slower in memory).
  constexpr bool in_memory = S == 2 && K == 2;
  __m512 acc[S][K][2][8];
  alignas(64) float memory[in_memory ? S : 1][in_memory ? K : 1][2][8][16];
#pragma GCC unroll 2
  for (int s = 0; s < S; ++s) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
#pragma GCC unroll 8
      for (int L = 0; L < 8; ++L) acc[s][k][0][L] = acc[s][k][1][L] = _mm512_setzero_ps();
    }
  }
  if constexpr (in_memory) std::memset(memory, 0, sizeof memory);
  const std::size_t ahead = fetch ? static_cast<std::size_t>(decode_fetch.mxfp4) : 0;
  const std::int64_t paired = nb & ~std::int64_t{1};
  for (std::int64_t b0 = 0; b0 < paired; b0 += 2) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const std::int64_t b = b0 + h;
      const auto j = static_cast<std::size_t>(b % span_blocks);
#pragma GCC unroll 2
      for (int s = 0; s < S; ++s) {
        const std::byte* span = groups[s] + static_cast<std::size_t>(b / span_blocks) * x16_span;
        if (ahead != 0) fetch_ahead(span, b, ahead);
        const __m512 dw = scales16(span + 16 * j);
        __m512i chunk[8], start[8];
        unpack<Signed>(span + x16_quants + x16_block_quants * j, chunk, start);
#pragma GCC unroll 4
        for (int k = 0; k < K; ++k) {
          const auto i = static_cast<std::size_t>((t0 + k) * nb + b);
          const __m512 d = _mm512_mul_ps(_mm512_set1_ps(xb.d[i]), dw);  // the reference's d_x * d_w
#pragma GCC unroll 8
          for (int L = 0; L < 8; ++L) {
            const __m512 l = _mm512_cvtepi32_ps(lane<Signed>(a, i, L, chunk, start));
            if constexpr (in_memory) {
              float* f = memory[s][k][h][L];
              _mm512_store_ps(f, _mm512_fmadd_ps(d, l, _mm512_load_ps(f)));
            } else {
              acc[s][k][h][L] = _mm512_fmadd_ps(d, l, acc[s][k][h][L]);
            }
          }
        }
      }
    }
  }
#pragma GCC unroll 2
  for (int s = 0; s < S; ++s) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      __m512 lanes[8];
#pragma GCC unroll 8
      for (int L = 0; L < 8; ++L) {
        lanes[L] = in_memory ? _mm512_add_ps(_mm512_load_ps(memory[s][k][0][L]), _mm512_load_ps(memory[s][k][1][L]))
                             : _mm512_add_ps(acc[s][k][0][L], acc[s][k][1][L]);
      }
      __m512 v = x16_lane_sum(lanes);
      if (nb != paired) {  // the odd last block: its exact sum, one fma
        const std::int64_t b = nb - 1;
        const std::byte* span = groups[s] + static_cast<std::size_t>(b / span_blocks) * x16_span;
        const auto j = static_cast<std::size_t>(b % span_blocks);
        __m512i chunk[8], start[8];
        unpack<Signed>(span + x16_quants + x16_block_quants * j, chunk, start);
        const auto i = static_cast<std::size_t>((t0 + k) * nb + b);
        __m512i total = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int L = 0; L < 8; ++L) total = _mm512_add_epi32(total, lane<Signed>(a, i, L, chunk, start));
        v = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(xb.d[i]), scales16(span + 16 * j)), _mm512_cvtepi32_ps(total), v);
      }
      _mm512_storeu_ps(y16[s] + (t0 + k) * out, v);
    }
  }
}

}  // namespace

std::size_t pack_mxfp4_x16(weight& w) {
  if (avx512_q4_K_tiles() == nullptr || w.out % 16 != 0) return 0;
  const std::int64_t nb = w.in / qk0, groups = w.out / 16;
  const std::size_t stride = group_bytes(nb), bytes = static_cast<std::size_t>(groups) * stride;
  auto buffer = make_aligned_bytes(bytes);  // zeroed
  for_load_ranges(groups, [&](std::int64_t g0, std::int64_t g1) {
    for (std::int64_t g = g0; g < g1; ++g) {
      for (int r = 0; r < 16; ++r) {
        const auto* row = reinterpret_cast<const gguf::block_mxfp4*>(w.row(16 * g + r));
        for (std::int64_t b = 0; b < nb; ++b) {
          std::byte* span = buffer.get() + static_cast<std::size_t>(g) * stride + static_cast<std::size_t>(b / span_blocks) * x16_span;
          const auto j = static_cast<std::size_t>(b % span_blocks);
          std::memcpy(span + 16 * j + static_cast<std::size_t>(r), &row[b].e, 1);
          for (std::size_t i = 0; i < 4; ++i) {
            std::memcpy(span + x16_quants + x16_block_quants * j + 64 * i + 4 * static_cast<std::size_t>(r), row[b].qs + 4 * i, 4);
          }
        }
      }
    }
  });
  w.packed = buffer.get();
  w.packed_owner = std::move(buffer);
  w.packed_rows = 16;
  return bytes;
}

bool matmul_mxfp4_x16(const weight& w, const q8_0_batch& xb, std::int64_t n_tokens, float* y, thread_pool& pool) {
  // Up to here the activation rows go over the matrix as two streams; more take the tiles of a
  // group at a time by blocks of activation rows. Either way in tiles of 4, then 2, then 1.
  constexpr std::int64_t small_batch = 8;
  if (avx512_q4_K_tiles() == nullptr) return false;
  const std::int64_t nb = w.in / qk0;
  const std::size_t stride = group_bytes(nb);
  // Each form of the activations only where a tile takes it: a lone row (an odd count) its
  // lane corrections, the others their quants + 128.
  aligned_vector<std::int32_t> corr;
  if (n_tokens % 2 != 0) q8_0_lane_corrections(xb, nb, n_tokens, pool, corr);
  aligned_vector<std::int8_t> xp(n_tokens > 1 ? static_cast<std::size_t>(nb * n_tokens) * qk0 : 0);
  for (std::size_t n = 0; n < xp.size(); ++n) xp[n] = static_cast<std::int8_t>(xb.quants[n] ^ 0x80);
  const activations a{xb, corr.data(), xp.data()};
  // Rows [t0, t1) of a group (or a pair, S = 2) in tiles of 4, 2 and 1.
  const auto rows = [&]<int S>(const std::byte* const* groups, std::int64_t t0, std::int64_t t1, float* const* ys) {
    std::int64_t t = t0;
    for (; t + 4 <= t1; t += 4) tile<S, 4>(groups, nb, a, t, w.out, t == t0, ys);
    if (t + 2 <= t1) tile<S, 2>(groups, nb, a, t, w.out, t == t0, ys), t += 2;
    if (t < t1) tile<S, 1>(groups, nb, a, t, w.out, t == t0, ys);
  };
  if (n_tokens <= small_batch) {
    by_group_pairs<16>(
        w.out / 16, 1, y, pool, [&](std::int64_t g) { return w.packed + static_cast<std::size_t>(g) * stride; },
        [&](const std::byte* const* both, std::int64_t, float* const* ys) { rows.template operator()<2>(both, 0, n_tokens, ys); },
        [&](const std::byte* group, std::int64_t, float* y16) { rows.template operator()<1>(&group, 0, n_tokens, &y16); });
    return true;
  }
  const std::size_t x_row_bytes = q8_0_batch::row_bytes(nb) + static_cast<std::size_t>(nb) * qk0;
  x16_for_groups(w, stride, x_row_bytes, n_tokens, pool, [&](const std::byte* group, std::int64_t t0, std::int64_t t1, std::int64_t o) {
    float* yo = y + o;
    rows.template operator()<1>(&group, t0, t1, &yo);
  });
  return true;
}

}  // namespace spite::dispatch::cpu::x86

#endif
