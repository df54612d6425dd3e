// Q2_K packed in 16-row groups for processors with AVX-512 VNNI, for decode and batches (the
// contract of simd_x86_avx2.cpp: the reference's exact integer sums and float operations, so the
// same bits). The reference is its repacked kernel (dot_q2_K_repacked in ref_q2k.hpp): per row
// and super-block the integer sums of scale x (q . x) and of min x bsum over the 16-element
// sub-blocks, one fma each per super-block (GEMV rows) or per 128-element half (GEMM rows),
// result acc - acc_min.
//
// The 8-row layout (simd_x86_q2k.cpp) computes with 256-bit registers and shuffles (about 15
// GB/s from memory on one core, half of what the memory gives). Here a 64-byte register holds
// 4 chunks of 4 elements of 16 rows (2 bits each), so a sub-block's sum of 16 rows is four
// VPDPBUSD against activation dwords broadcast from memory; two sub-blocks' sums, packed to an
// int16 pair per row, take their scales with one VPDPWSSD. Per group of 16 rows and super-block
// (1344 bytes, 21 cache lines: the file's 16 x 84, nothing added):
//   d[16], dmin[16]  f16 at 2 r and 32 + 2 r;
//   scales[8][16][2] u8 at 64 + 32 p + 2 r + k: row r's scales byte 2p + k as in the file (scale
//                    in the low nibble, min in the high), a pair per row;
//   quants[16]       64-byte registers at 320 + 64 s, one per sub-block s: bits 2j..2j+1 of
//                    bytes 4r..4r+3 are row r's elements 16 s + 4 j..+3.
// Made only where the AVX-512 kernels run and the row count is a multiple of 16; after
// set_avx512(false) such a matrix goes through the AVX2 kernels on the file's layout.
#include "simd_x86_avx512.hpp"

#if defined(__x86_64__)
#include <algorithm>
#include <cstring>

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::size_t x16_dmin = 32, x16_scales = 64, x16_quants = 320;
constexpr std::size_t x16_block = x16_quants + 16 * 64;
static_assert(x16_block % cache_line == 0 && x16_block == 16 * sizeof(gguf::block_q2_K));

// Sub-block S's sum of q . x for the 16 rows: chunk j of the register at bits 2j.
SPITE_AVX512 inline __m512i sub_block_sum(const __m512i* chunks, const std::int8_t* xs) {
  __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), chunks[0], _mm512_set1_epi32(load_u32(xs)));
  s = _mm512_dpbusd_epi32(s, chunks[1], _mm512_set1_epi32(load_u32(xs + 4)));
  s = _mm512_dpbusd_epi32(s, chunks[2], _mm512_set1_epi32(load_u32(xs + 8)));
  return _mm512_dpbusd_epi32(s, chunks[3], _mm512_set1_epi32(load_u32(xs + 12)));
}

// Super-block b (at blk) for K activation rows (x[k]) into acc / acc_min. `Halves`: the GEMM
// rows' float order (one fma per 128-element half), else the GEMV's (one per super-block).
template <int K, bool Halves>
SPITE_AVX512 inline void super_block(const std::byte* blk, const gguf::block_q8_K* const* x, __m512* acc, __m512* acc_min) {
  const __m512i m3 = _mm512_set1_epi8(3), low_nibbles = _mm512_set1_epi16(0x0F);
  // Per half: the scaled sums and the min terms.
  __m512i is[K][2], ms[K][2];
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) is[k][0] = is[k][1] = ms[k][0] = ms[k][1] = _mm512_setzero_si512();
  const auto ahead = static_cast<std::size_t>(decode_fetch.q2_k);
  x16_header_first<x16_quants>(blk);
#pragma GCC unroll 8
  for (int p = 0; p < 8; ++p) {
    // The super-block decode_fetch.q2_k ahead (by default two), 3 of its 21 lines per pair of
    // sub-blocks: the hardware prefetchers alone lag behind a stream this dense in lines (as in
    // simd_x86_q6k_x16.cpp).
    constexpr int lines = static_cast<int>(x16_block / cache_line);
    if (ahead != 0) {
      for (int l = 3 * p; l < std::min(3 * p + 3, lines); ++l) prefetch_l1(blk + ahead * x16_block + cache_line * l);
    }
    __m512i chunks[2][4];
#pragma GCC unroll 2
    for (int s = 0; s < 2; ++s) {
      const __m512i v = _mm512_load_si512(blk + x16_quants + 64 * (2 * p + s));
      chunks[s][0] = _mm512_and_si512(v, m3);
      chunks[s][1] = _mm512_and_si512(_mm512_srli_epi16(v, 2), m3);
      chunks[s][2] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m3);
      chunks[s][3] = _mm512_and_si512(_mm512_srli_epi16(v, 6), m3);
    }
    // Row r's scales bytes 2p, 2p + 1 as an int16 pair: scales in the low nibbles, mins high.
    const __m512i bytes = _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + x16_scales + 32 * p)));
    const __m512i scales = _mm512_and_si512(bytes, low_nibbles), mins = _mm512_srli_epi16(bytes, 4);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const std::int8_t* xs = x[k]->qs + 32 * p;
      // |sum| <= 16 x 3 x 128: an int16 each, sub-block 2p low, 2p + 1 high.
      const __m512i sums = _mm512_ternarylogic_epi32(_mm512_slli_epi32(sub_block_sum(chunks[1], xs + 16), 16),
                                                     sub_block_sum(chunks[0], xs), _mm512_set1_epi32(0xFFFF), a_or_b_and_c);
      is[k][p / 4] = _mm512_dpwssd_epi32(is[k][p / 4], scales, sums);
      std::int32_t bsums;
      std::memcpy(&bsums, x[k]->bsums + 2 * p, 4);
      ms[k][p / 4] = _mm512_dpwssd_epi32(ms[k][p / 4], mins, _mm512_set1_epi32(bsums));
    }
  }
  const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk)));
  const __m512 dmw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + x16_dmin)));
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) {
    const __m512 xd = _mm512_set1_ps(x[k]->d);
    const __m512 ds = _mm512_mul_ps(dw, xd), dm = _mm512_mul_ps(dmw, xd);
    if constexpr (Halves) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[k][h]), ds, acc[k]);
        acc_min[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ms[k][h]), dm, acc_min[k]);
      }
    } else {
      acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(is[k][0], is[k][1])), ds, acc[k]);
      acc_min[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(ms[k][0], ms[k][1])), dm, acc_min[k]);
    }
  }
}

// K activation rows from t0 against a group of 16 rows.
template <int K, bool Halves>
SPITE_AVX512 void tile16(const std::byte* group, std::int64_t nb, const gguf::block_q8_K* xq, std::int64_t t0, std::int64_t out,
                         float* y16) {
  __m512 acc[K], acc_min[K];
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) acc[k] = acc_min[k] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const gguf::block_q8_K* x[K];
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) x[k] = &xq[(t0 + k) * nb + b];
    super_block<K, Halves>(group + static_cast<std::size_t>(b) * x16_block, x, acc, acc_min);
  }
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) _mm512_storeu_ps(y16 + (t0 + k) * out, _mm512_sub_ps(acc[k], acc_min[k]));
}

// Decode: activation row t against S groups read in step, a super-block of each in turn (S = 2:
// a group of the matrix's first half beside one of its second, by_group_pairs). Against a plain
// read of the same bytes from memory (Q2_K:5632:2048 and 2048:5632, two alternated rounds,
// Zen 5): one thread 90-92 % as one stream, 91-107 % as two; two threads 85-101 -> 98-100 %.
template <int S, bool Halves>
SPITE_AVX512 void decode16(const std::byte* const* groups, std::int64_t nb, const gguf::block_q8_K* xq, std::int64_t t,
                           float* const* ys) {
  __m512 acc[S], acc_min[S];
#pragma GCC unroll 2
  for (int s = 0; s < S; ++s) acc[s] = acc_min[s] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const gguf::block_q8_K* x[1] = {&xq[t * nb + b]};
#pragma GCC unroll 2
    for (int s = 0; s < S; ++s) super_block<1, Halves>(groups[s] + static_cast<std::size_t>(b) * x16_block, x, &acc[s], &acc_min[s]);
  }
#pragma GCC unroll 2
  for (int s = 0; s < S; ++s) _mm512_storeu_ps(ys[s], _mm512_sub_ps(acc[s], acc_min[s]));
}

}  // namespace

std::size_t pack_q2_K_x16(weight& w) {
  return x16_pack<gguf::block_q2_K>(w, x16_block, [](std::uint8_t* dst, const gguf::block_q2_K& blk, int r) {
    std::memcpy(dst + 2 * r, &blk.d, 2);
    std::memcpy(dst + x16_dmin + 2 * r, &blk.dmin, 2);
    for (int j = 0; j < 16; ++j) dst[x16_scales + 32 * (j / 2) + 2 * r + j % 2] = blk.scales[j];
    pack_q2_K_dwords(blk.qs, dst + x16_quants, 64, 4 * static_cast<std::size_t>(r));
  });
}

bool matmul_q2_K_x16(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, std::int64_t ng, float* y,
                     thread_pool& pool) {
  if (avx512_q4_K_tiles() == nullptr) return false;
  const std::int64_t nb = w.in / qkk;
  if (n_tokens == 1) {
    const auto pairs = [&]<bool Halves>() {
      by_group_pairs<16>(
          w.out / 16, 1, y, pool, [&](std::int64_t g) { return w.packed + static_cast<std::size_t>(g * nb) * x16_block; },
          [&](const std::byte* const* both, std::int64_t t, float* const* ys) { decode16<2, Halves>(both, nb, xq, t, ys); },
          [&](const std::byte* group, std::int64_t t, float* y16) { decode16<1, Halves>(&group, nb, xq, t, &y16); });
    };
    if (ng > 0) {
      pairs.template operator()<true>();
    } else {
      pairs.template operator()<false>();
    }
    return true;
  }
  x16_for_groups_k(w, x16_block, n_tokens, pool, [&](const std::byte* group, std::int64_t t0, std::int64_t t1, std::int64_t o) {
    float* yg = y + o;
    std::int64_t t = t0;
    for (; t + 4 <= std::min(t1, ng); t += 4) tile16<4, true>(group, nb, xq, t, w.out, yg);
    for (; t < std::min(t1, ng); ++t) tile16<1, true>(group, nb, xq, t, w.out, yg);
    // The GEMV rows (at most 3) in one pass: a pass each unpacked the group that many times
    // (Q2_K:2048:11264 from memory, two threads, alternated: 2 rows 0.23-0.24 -> 0.17-0.19 ms, 3
    // rows 0.32 -> 0.21-0.23, 7 rows 0.48-0.49 -> 0.42-0.45).
    for (; t + 4 <= t1; t += 4) tile16<4, false>(group, nb, xq, t, w.out, yg);
    switch (t1 - t) {
      case 3: return tile16<3, false>(group, nb, xq, t, w.out, yg);
      case 2: return tile16<2, false>(group, nb, xq, t, w.out, yg);
      case 1: return tile16<1, false>(group, nb, xq, t, w.out, yg);
      default: return;
    }
  });
  return true;
}

}  // namespace spite::dispatch::cpu::x86

#endif
