// IQ4_XS packed in 16-row groups for processors with AVX-512 VNNI, for decode and batches. The
// same bits as the reference's IQ4_XS dot (dot_plain<iq4_xs> in iquant_dots.hpp): per row and
// super-block 8 int32 lanes (lane L: elements 4L..4L+3 of every 32-element sub-block, table
// values in [-127, 113], times the sub-block's scale - 32), one fma per lane and super-block with
// d_w * d_x, the 8 lanes added as reduce8_vec adds them.
//
// The file's layout went through a 256-bit tile that takes 4 rows at a time (about 17 GB/s from
// cache on one core). Here a 64-byte register is one 4-element chunk of 16 rows, so a lane of 16
// rows is one vector, as in simd_x86_q6k_x16.cpp. The values are signed, so VPMADDUBSW takes
// their magnitudes (a second table) and the activations negated where a value is negative (the
// table's first 8 entries: index bit 3 clear), as the reference's kernel does with VPSIGNB; a
// pair of products stays within 2 x 127 x 127. Per group of 16 rows and super-block (2240
// bytes, 35 cache lines; the file's 16 x 136 = 2176 and 64 bytes of padding):
//   d[16]            f16 at 2 r;
//   scales[8][16]    i8 at 32 + 16 s + r: row r's scale - 32 of sub-block s;
//   quants[8][4]     64-byte registers at 192 + 256 s + 64 m: bytes 4r..4r+3 are row r's index
//                    bytes 16 s + 4 m..+3 as in the file (lane m in the low nibbles, m + 4 in
//                    the high ones).
// Made only where the AVX-512 kernels run and the row count is a multiple of 16; after
// set_avx512(false) such a matrix goes through the AVX2 kernels on the file's layout.
#include "simd_x86_avx512.hpp"

#if defined(__x86_64__)
#include <algorithm>
#include <cstring>

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::size_t x16_scales = 32, x16_quants = 192, x16_sub_block = 4 * 64;
constexpr std::size_t x16_block = x16_quants + 8 * x16_sub_block;
static_assert(x16_block % cache_line == 0 && x16_block == 16 * sizeof(gguf::block_iq4_xs) + 64);

// Decode and pairs of activation rows: VPERMB looks the magnitudes up where the processor has
// VBMI (it ignores an index's top two bits, which VPSHUFB needs cleared): 13 instructions per two
// 64-byte chunks instead of 15, IQ4_XS:5632:2048 one row from the caches 0.211-0.213 -> 0.182-0.184
// ms, 2048:2048 0.077 -> 0.067 (one thread, builds alternated).
namespace shuffled {
#define SPITE_X16_TARGET SPITE_AVX512
SPITE_AVX512 inline __m512i magnitudes_of(__m512i magnitudes, __m512i nibbles) {
  return _mm512_shuffle_epi8(magnitudes, _mm512_and_si512(nibbles, _mm512_set1_epi8(0x0F)));
}
#include "simd_x86_iq4xs_x16.inc"
#undef SPITE_X16_TARGET
}  // namespace shuffled

namespace permuted {
#define SPITE_X16_TARGET SPITE_AVX512_VBMI
SPITE_AVX512_VBMI inline __m512i magnitudes_of(__m512i magnitudes, __m512i nibbles) {
  return _mm512_permutexvar_epi8(nibbles, magnitudes);
}
#include "simd_x86_iq4xs_x16.inc"
#undef SPITE_X16_TARGET
}  // namespace permuted

// Lanes L and L + 4 (the low and high nibbles of each sub-block's register L) of T >= 4
// activation rows, sub-block by sub-block, into the rows' float lanes: each chunk's magnitudes
// and signs made once for the T rows (as simd_x86_q6k_x16.cpp's four-row tile does).
template <int L, int T>
SPITE_AVX512 inline void lane_pair_of_rows(const std::byte* blk, const x16_block_rows<T>& rows, const __m512i* scales,
                                           __m512i magnitudes, float (*acc)[8][16]) {
  x16_fetch_ahead<x16_block, L, 4>(blk);
  const __m512i m4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8), zero = _mm512_setzero_si512();
  __m512i first[T], second[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) first[t] = second[t] = zero;
#pragma GCC unroll 1
  for (int s = 0; s < 8; ++s) {
    const __m512i v = _mm512_load_si512(blk + x16_quants + x16_sub_block * static_cast<std::size_t>(s) + 64 * L);
    const __m512i i0 = _mm512_and_si512(v, m4), i1 = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    const __m512i g0 = _mm512_shuffle_epi8(magnitudes, i0), g1 = _mm512_shuffle_epi8(magnitudes, i1);
    const __mmask64 n0 = _mm512_testn_epi8_mask(i0, eight), n1 = _mm512_testn_epi8_mask(i1, eight);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const std::int8_t* x = rows.qs[t] + 32 * s + 4 * L;
      const __m512i x0 = _mm512_set1_epi32(load_u32(x)), x1 = _mm512_set1_epi32(load_u32(x + 16));
      first[t] = _mm512_dpwssd_epi32(first[t], _mm512_maddubs_epi16(g0, _mm512_mask_sub_epi8(x0, n0, zero, x0)), scales[s]);
      second[t] = _mm512_dpwssd_epi32(second[t], _mm512_maddubs_epi16(g1, _mm512_mask_sub_epi8(x1, n1, zero, x1)), scales[s]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    _mm512_store_ps(acc[t][L], _mm512_fmadd_ps(rows.dxw[t], _mm512_cvtepi32_ps(first[t]), _mm512_load_ps(acc[t][L])));
    _mm512_store_ps(acc[t][L + 4], _mm512_fmadd_ps(rows.dxw[t], _mm512_cvtepi32_ps(second[t]), _mm512_load_ps(acc[t][L + 4])));
  }
}

// tile16's sums for T >= 4 activation rows, lane pair by lane pair.
template <int T>
SPITE_AVX512 void tile16_by_lane(const std::byte* group_base, std::int64_t nb, const gguf::block_q8_K* x, std::int64_t stride,
                                 std::int64_t out, float* y16) {
  const __m512i magnitudes = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(gguf::quants::iq::kvalues_iq4nl_magnitudes)));
  alignas(64) float acc[T][8][16] = {};
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = group_base + static_cast<std::size_t>(b) * x16_block;
    const x16_block_rows<T> rows(x, stride, b, _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk))));
    __m512i scales[8];  // sub-block s's scale of each row in both int16 halves of its dword
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const __m512i s32 = _mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(blk + x16_scales + 16 * s)));
      scales[s] = _mm512_ternarylogic_epi32(_mm512_slli_epi32(s32, 16), s32, _mm512_set1_epi32(0xFFFF), a_or_b_and_c);
    }
    lane_pair_of_rows<0, T>(blk, rows, scales, magnitudes, acc);
    lane_pair_of_rows<1, T>(blk, rows, scales, magnitudes, acc);
    lane_pair_of_rows<2, T>(blk, rows, scales, magnitudes, acc);
    lane_pair_of_rows<3, T>(blk, rows, scales, magnitudes, acc);
  }
  x16_store_lane_sums<T>(acc, y16, out);
}

}  // namespace

std::size_t pack_iq4_xs_x16(weight& w) {
  return x16_pack<gguf::block_iq4_xs>(w, x16_block, [](std::uint8_t* dst, const gguf::block_iq4_xs& blk, int r) {
    std::memcpy(dst + 2 * r, &blk.d, 2);
    std::uint16_t scales_h;
    std::memcpy(&scales_h, &blk.scales_h, 2);
    for (int s = 0; s < 8; ++s) {
      const int ls = ((blk.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((scales_h >> (2 * s)) & 3) << 4);
      dst[x16_scales + 16 * s + r] = static_cast<std::uint8_t>(ls - 32);
      for (int m = 0; m < 4; ++m) std::memcpy(dst + x16_quants + x16_sub_block * s + 64 * m + 4 * r, blk.qs + 16 * s + 4 * m, 4);
    }
  });
}

bool matmul_iq4_xs_x16(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool) {
  // Four rows lane pair by lane pair (IQ4_XS:2048:5632, four rows: two threads from memory
  // 0.224-0.231 -> 0.184-0.192 ms, one thread from the caches 0.395-0.402 -> 0.33-0.35).
  if (avx512_vbmi_kernels()) {
    return x16_matmul(w, x16_block, xq, n_tokens, y, pool, permuted::tile16<2>, permuted::tile16<1>, tile16_by_lane<4>,
                      tile16_by_lane<3>);
  }
  return x16_matmul(w, x16_block, xq, n_tokens, y, pool, shuffled::tile16<2>, shuffled::tile16<1>, tile16_by_lane<4>,
                    tile16_by_lane<3>);
}

}  // namespace spite::dispatch::cpu::x86

#endif
