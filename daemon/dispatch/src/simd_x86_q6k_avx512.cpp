// AVX-512 VNNI versions of the Q6_K tiles of simd_x86_kquants.cpp (the same integer sums, the
// same float operations: the same bits). Reference: dot_row<q6_K> in ref_dot_kquants.cpp, 8
// int32 lanes per row and block (lane L: elements 4L..4L+3 of every 32-element group, each
// pair of products times its 16-element scale), the -32 offset through the activation sums, one
// fma per lane and block.
//
// The AVX2 tiles take a group of 32 elements per register: a multiply-add of unsigned quants by
// activations into int16 pairs, a multiply-add of those by the scales into int32, an addition
// (3 operations per 32 products). Here a 512-bit register holds two groups (the reference's 8
// lanes of group g in its low half, of g + 1 in its high half, folded at the block's end) and
// VPDPWSSD multiplies the pairs by the scales and accumulates at once: 2 operations per 64
// products. Quants are at most 63 and activations at least -128: the pair sums stay exact in
// int16, as in the AVX2 tiles.
//
// Where these tiles run, pack_q6_K copies a matrix (with a multiple of 8 rows) into groups of 4
// rows whose blocks sit side by side (row 4g + r's block b at block index 4 (g nb + b) + r;
// q6_K_blocks in simd_x86.hpp): the 4-row decode tile then reads one stream instead of four. The blocks are the file's, so every Q6_K tile (AVX2 ones
// after set_avx512(false) too) reads either layout through q6_K_blocks.
#include "simd_x86_avx512.hpp"

#include <cstring>

#if defined(__x86_64__)

namespace spite::dispatch::cpu::x86 {
namespace {

// Lanes L of the two groups added: the block's 8 lanes of the reference.
SPITE_AVX512 inline __m256i fold(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// The float step of a block for one row and activation row, as q6_K_fused / q6_K_dot do it:
// lane L -= 32 * (sc[2L] * bsum[2L] + sc[2L+1] * bsum[2L+1]), then one fma with d_x * d_w.
SPITE_AVX512 inline __m256 block_step(__m256 acc, __m512i lanes, __m256i scales16, const gguf::block_q8_K& x, float dw) {
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums));
  const __m256i l = _mm256_sub_epi32(fold(lanes), _mm256_slli_epi32(_mm256_madd_epi16(scales16, bs), 5));
  return _mm256_fmadd_ps(_mm256_set1_ps(x.d * dw), _mm256_cvtepi32_ps(l), acc);
}

// Decode and small batches on the stored blocks: R rows x K activation rows, each block's quants
// built in registers (groups 4c..4c+3 from 64 bytes of ql and 32 of qh).
template <int R, int K>
SPITE_AVX512 void fused(const weight& w, std::int64_t o, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0,
                        std::int64_t out, float* y) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x30);
  // Per-half shift counts: qh's bits 0..1 and 2..3 to bits 4..5 (<< 4, << 2), 4..5 and 6..7 (<< 0, >> 2).
  const __m512i shl01 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1),
                shr23 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  // int16 scale picks for groups (2p, 2p + 1): sc[4p] x 8, sc[4p + 1] x 8, sc[4p + 2] x 8, sc[4p + 3] x 8.
  __m512i pick[4];
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    alignas(64) std::int16_t idx[32];
    for (int i = 0; i < 32; ++i) idx[i] = static_cast<std::int16_t>(4 * p + i / 8);
    pick[p] = _mm512_load_si512(idx);
  }
  const q6_K_blocks blocks(w);
  const std::int64_t step = blocks.step();
  const gguf::block_q6_K* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = blocks.first(o + r);
  __m256 acc[R][K];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) acc[r][k] = _mm256_setzero_ps();
  }
  const next_group_prefetch ahead(reinterpret_cast<const std::byte*>(blocks.first(o + R)), R * w.row_bytes, nb);
  // The file's rows are four streams, which the software prefetch carries (without it this tile
  // read half as fast); the interleaved groups (pack_q6_K) are one, which the hardware
  // prefetchers follow better alone (Q6_K:2048:2048 from memory, alternated in one process with
  // a plain read of the same bytes: one thread 87-89 % of it without, 82 % with; Q6_K:5632:2048,
  // two threads, 76-77 % against 70 %; the file's rows with prefetch 69-70 %, one thread).
  const bool prefetch = t0 == 0 && !blocks.interleaved;
  for (std::int64_t b = 0; b < nb; ++b) {
    if (prefetch) ahead.step(b);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const gguf::block_q6_K& blk = rows[r][b * step];
      const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
      const __m512i sc = _mm512_castsi256_si512(scales16);
      __m512i lanes[K];
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) lanes[k] = _mm512_setzero_si512();
#pragma GCC unroll 2
      for (int c = 0; c < 2; ++c) {
        const __m512i l = _mm512_loadu_si512(blk.ql + 64 * c);
        // Element 128c + 32j + i: nibble of ql[64c + 32(j & 1) + i] (low for j < 2) with bits
        // 2j..2j+1 of qh[32c + i] above it (moved to bits 4..5): qh's 32 bytes in both halves,
        // each half shifted by its own count (bits crossing into a neighbour byte are masked).
        const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * c)));
        const __m512i h01 = _mm512_sllv_epi16(h, shl01), h23 = _mm512_srlv_epi16(h, shr23);
        const __m512i q[2] = {_mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(h01, m2)),
                              _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), _mm512_and_si512(h23, m2))};
#pragma GCC unroll 2
        for (int i = 0; i < 2; ++i) {
          const int g = 4 * c + 2 * i;  // groups g, g + 1
          const __m512i s = _mm512_permutexvar_epi16(pick[g / 2], sc);
#pragma GCC unroll 4
          for (int k = 0; k < K; ++k) {
            const __m512i xv = _mm512_loadu_si512(xq[(t0 + k) * nb + b].qs + 32 * g);
            lanes[k] = _mm512_dpwssd_epi32(lanes[k], _mm512_maddubs_epi16(q[i], xv), s);
          }
        }
      }
      const float dw = _cvtsh_ss(blk.d);
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) acc[r][k] = block_step(acc[r][k], lanes[k], scales16, xq[(t0 + k) * nb + b], dw);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) y[(t0 + k) * out + o + r] = reduce8_vec(acc[r][k]);
  }
}

// Batches on rows unpacked once (q6_K_row): R rows x K activation rows.
template <int R, int K>
SPITE_AVX512 void dot(const q6_K_row* const* rows, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0, std::int64_t out,
                      std::int64_t o, float* y) {
  __m256 acc[R][K];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) acc[r][k] = _mm256_setzero_ps();
  }
  for (std::int64_t b = 0; b < nb; ++b) {
    const gguf::block_q8_K* xs[K];
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) xs[k] = &xq[(t0 + k) * nb + b];
    __m512i lanes[R * K];
#pragma GCC unroll 8
    for (int i = 0; i < R * K; ++i) lanes[i] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {  // groups 2p, 2p + 1
      __m512i v[R], s[R];
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
        v[r] = _mm512_loadu_si512(rows[r]->q.data() + b * qkk + 64 * p);
        s[r] = _mm512_loadu_si512(rows[r]->scales.data() + 16 * 8 * b + 32 * p);
      }
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) {
        const __m512i xv = _mm512_loadu_si512(xs[k]->qs + 64 * p);
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) lanes[r * K + k] = _mm512_dpwssd_epi32(lanes[r * K + k], _mm512_maddubs_epi16(v[r], xv), s[r]);
      }
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      const __m256i offsets = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r]->offsets.data() + 16 * b));
      const float dw = rows[r]->d[static_cast<std::size_t>(b)];
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) acc[r][k] = block_step(acc[r][k], lanes[r * K + k], offsets, *xs[k], dw);
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) y[(t0 + k) * out + o + r] = reduce8_vec(acc[r][k]);
  }
}

constexpr q6_K_tiles k_tiles{fused<4, 1>, fused<1, 1>, fused<1, 4>, dot<2, 4>, dot<1, 1>};

}  // namespace

const q6_K_tiles* avx512_q6_K_tiles() { return avx512_q4_K_tiles() != nullptr ? &k_tiles : nullptr; }

std::size_t pack_q6_K(weight& w) {
  if (avx512_q6_K_tiles() == nullptr || w.out % 4 != 0) return 0;  // the layout serves the VNNI kernels
  const std::int64_t nb = w.in / qkk;
  const std::size_t bytes = static_cast<std::size_t>(w.out) * w.row_bytes;
  auto buffer = make_aligned_bytes(bytes);
  constexpr std::size_t block = sizeof(gguf::block_q6_K);
  for_load_ranges(w.out, [&](std::int64_t o0, std::int64_t o1) {
    for (std::int64_t o = o0; o < o1; ++o) {
      const std::byte* row = w.row(o);
      std::byte* dst = buffer.get() + static_cast<std::size_t>(o / 4) * 4 * w.row_bytes + static_cast<std::size_t>(o % 4) * block;
      for (std::int64_t b = 0; b < nb; ++b) std::memcpy(dst + static_cast<std::size_t>(4 * b) * block, row + static_cast<std::size_t>(b) * block, block);
    }
  });
  w.packed = buffer.get();
  w.packed_owner = std::move(buffer);
  w.packed_rows = 4;
  return bytes;
}

}  // namespace spite::dispatch::cpu::x86

#endif
