// Q5_K packed in 16-row groups for processors with AVX-512 VNNI. The same bits as the reference's
// Q5_K dot (dot_row<q5_K> in ref_kquants.hpp; the 8-row layout of simd_x86_q5k_packed.cpp keeps
// them the same way): per row and super-block 8 int32 lanes (lane L: elements 4L..4L+3 of every
// 32-element group times the group's scale), one fma per lane and super-block with d_x * d_w,
// the 8 lanes added in reduce8_vec's order, then the mins chain fma(-d_x * dmin_w, sum_g min_g *
// (bsum[2g] + bsum[2g + 1]), summs) added.
//
// The 8-row layout computes with 256-bit registers (about 32 GB/s from cache, one thread: less
// than the memory gives). Here a 64-byte register is one 4-element chunk of 16 rows, so a lane of
// 16 rows is one vector (VPMADDUBSW and VPDPWSSD per 64 products), as in simd_x86_q6k_x16.cpp.
// Per group of 16 rows and super-block (2816 bytes, 44 cache lines: the file's 16 x 176):
//   d[16], dmin[16]  f16 at 2 r and 32 + 2 r;
//   scales[12][16]   u8 at 64 + 16 k + r: byte k of row r's 12 packed bytes of 6-bit scales and
//                    mins (as in the file), unpacked per super-block for the 16 rows
//                    (x16_scales_mins; until 2026-12-07 they were stored unpacked, 64 bytes more);
//   then per 32-element group g, 320 bytes at 256 + 320 g, in the order the tile reads them:
//     low[4]         64-byte registers at + 64 n: bytes 4r..4r+3 hold row r's elements
//                    32g + 4n..+3 (lane n) in the low nibbles and 32g + 16 + 4n..+3 (lane n + 4)
//                    in the high;
//     high           a 64-byte register at + 256: bit L of byte 4r + j is the fifth bit of row
//                    r's element 32g + 4L + j.
// Made only where the AVX-512 kernels run and the row count is a multiple of 16; after
// set_avx512(false) such a matrix goes through the AVX2 kernels on the file's layout.
#include "simd_x86_avx512.hpp"

#if defined(__x86_64__)
#include <algorithm>
#include <cstring>

#include "ref_kquants.hpp"

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::size_t x16_dmin = 32, x16_packed_scales = 64, x16_groups = 256, x16_group = 5 * 64;
constexpr std::size_t x16_block = x16_groups + 8 * x16_group;
static_assert(x16_block % cache_line == 0 && x16_block == 16 * sizeof(gguf::block_q5_K));

// Lane L of the 16 rows in the group at `group`: 4 unsigned 5-bit quants per row. The high
// register masked to bits L % 4 and L % 4 + 4 of each byte (two lanes' fifth bits): with bit L
// shifted to bit 4, bits 5-7 are zero whatever 16-bit neighbour shifts in below bit 4, so one
// select (low nibble from `low`, the rest from `high`) makes the quant: four masks per register
// of eight lanes where each lane took one (Q5_K:2048:5632 from the caches, one thread, 0.189-0.191
// -> 0.170-0.172 ms).
template <int L>
SPITE_AVX512 inline __m512i chunk(const std::byte* group, __m512i m4) {
  constexpr int select_low_nibble = 0xE4;  // (A & C) | (B & ~C)
  __m512i low = _mm512_load_si512(group + 64 * (L % 4));
  if constexpr (L >= 4) low = _mm512_srli_epi16(low, 4);
  __m512i high = _mm512_and_si512(_mm512_load_si512(group + 256), _mm512_set1_epi8(static_cast<char>(0x11 << (L % 4))));
  if constexpr (L < 4) high = _mm512_slli_epi16(high, 4 - L);
  if constexpr (L > 4) high = _mm512_srli_epi16(high, L - 4);
  return _mm512_ternarylogic_epi32(low, high, m4, select_low_nibble);
}

// Row r's scale (u8, at scales + r) as an int16 pair, dword r: the 16 bytes in each 128-bit lane,
// lane k's rows 4k..4k + 3 picked by one byte shuffle (zero-extended, both halves) where a
// widening, a shift and an or took three operations (Q5_K:2048:5632 from the caches, one
// thread, 0.171-0.172 -> 0.168 ms).
SPITE_AVX512 inline __m512i scale_pairs(const std::uint8_t* scales) {
  const __m512i bytes = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(scales)));
  const __m512i pick = _mm512_set_epi8(-1, 15, -1, 15, -1, 14, -1, 14, -1, 13, -1, 13, -1, 12, -1, 12,  //
                                       -1, 11, -1, 11, -1, 10, -1, 10, -1, 9, -1, 9, -1, 8, -1, 8,      //
                                       -1, 7, -1, 7, -1, 6, -1, 6, -1, 5, -1, 5, -1, 4, -1, 4,          //
                                       -1, 3, -1, 3, -1, 2, -1, 2, -1, 1, -1, 1, -1, 0, -1, 0);
  return _mm512_shuffle_epi8(bytes, pick);
}

template <int G, int L, int T>
SPITE_AVX512 inline void lane(const std::byte* blk, const std::int8_t* const* xs, __m512i m4, __m512i scales,
                              __m512i (*lanes)[8]) {
  const __m512i q = chunk<L>(blk + x16_groups + x16_group * G, m4);
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) {
    lanes[t][L] = _mm512_dpwssd_epi32(lanes[t][L], _mm512_maddubs_epi16(q, _mm512_set1_epi32(load_u32(xs[t] + 32 * G + 4 * L))), scales);
  }
}

// Group g's 8 lanes; the super-block decode_fetch.q5_k ahead (by default three, 8.6 KB) prefetched
// a few lines at a time. Two ahead left this kernel's arithmetic and its reads mostly one after the
// other (Q5_K:2048:11264 from memory, alternated: one thread 0.58 -> 0.49-0.54 ms, two threads
// 0.297-0.341 -> 0.229-0.246 ms; four ahead between them). Five ahead (14 KB) until a later Zen 5
// host read, of a plain read of the same bytes (`--matmul Q5_K:2048:5632` and `5632:2048 --cold`,
// three rounds alternated), one thread 76-83 % at five, 80-83 % at two, 84-88 % at three, 77-80 %
// at four; two threads 75-79 %, 80 %, 82-87 %, 77-87 %.
template <int G, int T>
SPITE_AVX512 inline void group(const std::byte* blk, const std::int8_t* const* xs, const x16_scales_mins* h, __m512i m4,
                               __m512i (*lanes)[8]) {
  constexpr int lines = static_cast<int>(x16_block / cache_line);
  if (const auto ahead = static_cast<std::size_t>(decode_fetch.q5_k); ahead != 0) {
    for (int j = 6 * G; j < std::min(6 * G + 6, lines); ++j) prefetch_l1(blk + ahead * x16_block + cache_line * j);
  }
  const __m512i scales = scale_pairs(h->scales[G]);
  lane<G, 0, T>(blk, xs, m4, scales, lanes);
  lane<G, 1, T>(blk, xs, m4, scales, lanes);
  lane<G, 2, T>(blk, xs, m4, scales, lanes);
  lane<G, 3, T>(blk, xs, m4, scales, lanes);
  lane<G, 4, T>(blk, xs, m4, scales, lanes);
  lane<G, 5, T>(blk, xs, m4, scales, lanes);
  lane<G, 6, T>(blk, xs, m4, scales, lanes);
  lane<G, 7, T>(blk, xs, m4, scales, lanes);
}

// The mins of one super-block against activation row x into summs: fma(-d_x * dmin_w, sum over
// group pairs p of min_2p (bsum[4p] + bsum[4p + 1]) + min_2p+1 (...), summs).
SPITE_AVX512 inline __m512 add_mins(const x16_scales_mins& h, __m512 dmw, const gguf::block_q8_K& x, __m512 summs) {
  __m512i msum = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    // Group pair p's mins of the 16 rows, an int16 pair per row.
    const __m512i mins = _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(h.mins[p])));
    const auto bp0 = static_cast<std::uint16_t>(x.bsums[4 * p] + x.bsums[4 * p + 1]);
    const auto bp1 = static_cast<std::uint16_t>(x.bsums[4 * p + 2] + x.bsums[4 * p + 3]);
    msum = _mm512_add_epi32(msum, _mm512_madd_epi16(mins, _mm512_set1_epi32(static_cast<int>(bp0 | (std::uint32_t{bp1} << 16)))));
  }
  return _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(-x.d), dmw), _mm512_cvtepi32_ps(msum), summs);
}

// group<G, T> for x16_eight_groups.
struct groups {
  template <int G, int T>
  [[gnu::always_inline]] SPITE_AVX512 static void run(const std::byte* blk, const std::int8_t* const* xs, const x16_scales_mins* h,
                                                      __m512i m4, __m512i (*lanes)[8]) {
    group<G, T>(blk, xs, h, m4, lanes);
  }
};

// Super-block b of the group at group_base against T activation rows (from x, `stride` blocks
// apart) into acc and summs. Always inlined, as Q6_K's (simd_x86_q6k_x16.cpp).
template <int T>
[[gnu::always_inline]] SPITE_AVX512 inline void super_block(const std::byte* group_base, std::int64_t b, const gguf::block_q8_K* x,
                                                            std::int64_t stride, __m512 (*acc)[8], __m512* summs) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const std::byte* blk = group_base + static_cast<std::size_t>(b) * x16_block;
  x16_header_first<x16_groups>(blk);  // the first group's lines too measured the same
  const x16_scales_mins h(blk + x16_packed_scales);
  __m512i lanes[T][8];
  x16_activations<T> act(x, stride, b, lanes);
  act.broadcast_afresh();  // for decode_pair
  x16_eight_groups<groups, T>(blk, act.qs, &h, m4, lanes);
  const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk)));
  const __m512 dmw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + x16_dmin)));
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) {
    const __m512 ds = _mm512_mul_ps(_mm512_set1_ps(act.block[t]->d), dw);
#pragma GCC unroll 8
    for (int L = 0; L < 8; ++L) acc[t][L] = _mm512_fmadd_ps(ds, _mm512_cvtepi32_ps(lanes[t][L]), acc[t][L]);
    summs[t] = add_mins(h, dmw, *act.block[t], summs[t]);
  }
}

// T activation rows (results `out` floats apart) against a group of 16 rows.
template <int T>
SPITE_AVX512 void tile16(const std::byte* group_base, std::int64_t nb, const gguf::block_q8_K* x, std::int64_t stride,
                         std::int64_t out, float* y16) {
  __m512 acc[T][8], summs[T];
  x16_zero<T>(acc);
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) summs[t] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) super_block<T>(group_base, b, x, stride, acc, summs);
  // reduce8_vec's order, then the mins.
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) {
    _mm512_storeu_ps(y16 + t * out, _mm512_add_ps(x16_lane_sum(acc[t]), summs[t]));
  }
}

// Decode as two streams where this core's table asks for them (decode_fetch.q5_k_pairs), as
// Q6_K's decode_pair: a group of the matrix's first half beside one of its second, a super-block
// of each in turn (x16_decode_pairs). Zen 4, one thread, alternated: Q5_K:2048:11264 from memory
// 0.60-0.65 -> 0.56-0.59 ms; TinyLlama Q5_K_M's Q5_K matrices inside the model 21-24 -> 23-26
// GB/s, the model 69-70 -> 69-73 % of the bandwidth roofline.
SPITE_AVX512 void decode_pair(const std::byte* const* groups, std::int64_t nb, const gguf::block_q8_K* x, float* const* y16) {
  __m512 acc[2][8], summs[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  x16_zero<2>(acc);
  for (std::int64_t b = 0; b < nb; ++b) {
    super_block<1>(groups[0], b, x, nb, &acc[0], &summs[0]);
    super_block<1>(groups[1], b, x, nb, &acc[1], &summs[1]);
  }
  _mm512_storeu_ps(y16[0], _mm512_add_ps(x16_lane_sum(acc[0]), summs[0]));
  _mm512_storeu_ps(y16[1], _mm512_add_ps(x16_lane_sum(acc[1]), summs[1]));
}

// The lane pairs of x16_lane_pair: lanes L and L + 4 share their low-nibble register.
struct lane_pairs {
  template <int L>
  SPITE_AVX512 static void pair(const std::byte* blk, int g, __m512i& q0, __m512i& q1) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const std::byte* group = blk + x16_groups + x16_group * static_cast<std::size_t>(g);
    q0 = chunk<L>(group, m4);
    q1 = chunk<L + 4>(group, m4);
  }
};

template <int L, int T>
SPITE_AVX512 inline void lane_pair_of_rows(const std::byte* blk, const x16_block_rows<T>& rows, const __m512i* scales,
                                           float (*acc)[8][16]) {
  x16_fetch_ahead<x16_block, L, 4>(blk);
  __m512i first[T], second[T];
  x16_lane_pair<lane_pairs, L, T>(blk, rows.qs, scales, scales, first, second);
  const __m512* dxw = rows.dxw;
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    _mm512_store_ps(acc[t][L], _mm512_fmadd_ps(dxw[t], _mm512_cvtepi32_ps(first[t]), _mm512_load_ps(acc[t][L])));
    _mm512_store_ps(acc[t][L + 4], _mm512_fmadd_ps(dxw[t], _mm512_cvtepi32_ps(second[t]), _mm512_load_ps(acc[t][L + 4])));
  }
}

// tile16's sums for T >= 4 activation rows, lane pair by lane pair (as in simd_x86_q6k_x16.cpp).
template <int T>
SPITE_AVX512 void tile16_by_lane(const std::byte* group_base, std::int64_t nb, const gguf::block_q8_K* x, std::int64_t stride,
                                 std::int64_t out, float* y16) {
  alignas(64) float acc[T][8][16] = {};
  __m512 summs[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) summs[t] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = group_base + static_cast<std::size_t>(b) * x16_block;
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk)));
    const __m512 dmw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + x16_dmin)));
    const x16_block_rows<T> rows(x, stride, b, dw);
    const x16_scales_mins h(blk + x16_packed_scales);
    // Row r's scale of group g as an int16 pair (dword r).
    __m512i scales[8];
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      scales[g] = scale_pairs(h.scales[g]);
    }
    lane_pair_of_rows<0, T>(blk, rows, scales, acc);
    lane_pair_of_rows<1, T>(blk, rows, scales, acc);
    lane_pair_of_rows<2, T>(blk, rows, scales, acc);
    lane_pair_of_rows<3, T>(blk, rows, scales, acc);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) summs[t] = add_mins(h, dmw, *rows.block[t], summs[t]);
  }
  x16_store_lane_sums<T>(acc, y16, out, summs);
}

}  // namespace

std::size_t pack_q5_K_x16(weight& w) {
  return x16_pack<gguf::block_q5_K>(w, x16_block, [](std::uint8_t* dst, const gguf::block_q5_K& blk, int r) {
    std::int8_t q[qkk], sc16[16], mins[8];
    kquants::unpack_q5_K(blk, q, sc16, mins);
    std::memcpy(dst + 2 * r, &blk.d, 2);
    std::memcpy(dst + x16_dmin + 2 * r, &blk.dmin, 2);
    for (int k = 0; k < 12; ++k) dst[x16_packed_scales + 16 * k + r] = blk.scales[k];
    for (int grp = 0; grp < 8; ++grp) {
      // Row r's dwords, four elements at a time (element by element, two read-modify-writes at
      // computed offsets each, as Q6_K's packer did before it took most of a Q6_K model's load):
      // chunk L = elements 32 grp + 4L + j in the low (L < 4) or high nibbles of vector L % 4,
      // their fifth bits at bit L of the last vector.
      std::uint8_t* gd = dst + x16_groups + x16_group * static_cast<std::size_t>(grp);
      std::uint32_t chunk[8], fifth = 0;
      std::memcpy(chunk, q + 32 * grp, 32);
      for (int L = 0; L < 8; ++L) fifth |= (chunk[L] >> 4 & 0x01010101U) << L;
      for (int m = 0; m < 4; ++m) {
        const std::uint32_t nibbles = (chunk[m] & 0x0F0F0F0FU) | (chunk[m + 4] & 0x0F0F0F0FU) << 4;
        std::memcpy(gd + 64 * m + 4 * static_cast<std::size_t>(r), &nibbles, 4);
      }
      std::memcpy(gd + 256 + 4 * static_cast<std::size_t>(r), &fifth, 4);
    }
  });
}

bool matmul_q5_K_x16(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool) {
  // Four rows lane pair by lane pair (Q5_K:2048:5632, four rows from memory: two threads 0.209-0.213
  // -> 0.167-0.195 ms, one thread 0.33-0.39 -> 0.30-0.31).
  if (n_tokens == 1 && pool.size() <= decode_fetch.q5_k_pairs && avx512_q4_K_tiles() != nullptr) {
    x16_decode_pairs(xq, w.in / qkk, x16_block, w, y, pool, decode_pair, tile16<1>);
    return true;
  }
  return x16_matmul(w, x16_block, xq, n_tokens, y, pool, tile16<2>, tile16<1>, tile16_by_lane<4>, tile16_by_lane<3>);
}

}  // namespace spite::dispatch::cpu::x86

#endif
