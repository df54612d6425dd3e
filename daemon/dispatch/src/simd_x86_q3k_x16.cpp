// Q3_K packed in 16-row groups for processors with AVX-512 VNNI, for decode and batches.
// The same bits as the reference's Q3_K dot (dot_row<q3_K> in ref_kquants.hpp): per row and
// super-block 8 int32 lanes (lane L: elements 4L..4L+3 of every 32-element group, quants in
// [-4, 3], times the group's 16-element scale), one fma per lane and super-block with d_x * d_w,
// the 8 lanes added as reduce8_vec adds them. The lanes are exact integers, so how they are
// summed is free: here the quants are stored unsigned (q + 4, 0..7) for VPMADDUBSW, and each
// lane starts from -4 x (its scales times its activation sums), taken two groups at a time by
// one VPDPWSSD.
//
// The file's blocks (110 bytes, quants split over a 2-bit and a 1-bit plane, scales packed in
// 6 bits) went through a row-by-row AVX2 tile at 9-21 GB/s. Here a 64-byte register is one
// 4-element chunk of 16 rows, so a lane of 16 rows is one vector, as in simd_x86_q6k_x16.cpp.
// Per group of 16 rows and super-block (1856 bytes, 29 cache lines; the file's 16 x 110 = 1760
// and 96 bytes of padding):
//   d[16]               f16 at 2 r;
//   scales[4][2][16][2] i8 at 32 + 64 p + 32 h + 2 r + k: row r's scale 4p + 2k + h, i.e. of
//                       group 2p + k's lanes 4h..4h + 3 (widened, an int16 pair per row: the
//                       scales of groups 2p and 2p + 1 for the same lanes);
//   then per 32-element group g, 192 bytes at 320 + 192 g: three 64-byte registers R[k] at
//                       + 64 k, whose byte 4r + i holds row r's quants (q + 4, 3 bits) of element
//                       i of lanes 2k (bits 0-2) and 2k + 1 (bits 4-6), lane L's elements being
//                       32g + 4L..+3; bit 3 of R[k] is bit 2 - k of lane 6's quant, bit 7 bit
//                       2 - k of lane 7's.
// Made only where the AVX-512 kernels run and the row count is a multiple of 16; after
// set_avx512(false) such a matrix goes through the AVX2 kernels on the file's layout.
#include "simd_x86_avx512.hpp"

#if defined(__x86_64__)
#include <algorithm>
#include <cstring>
#include <vector>

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::size_t x16_scales = 32, x16_groups = 320, x16_group = 3 * 64;
constexpr std::size_t x16_block = x16_groups + 8 * x16_group;
static_assert(x16_block % cache_line == 0 && x16_block == 16 * sizeof(gguf::block_q3_K) + 96);

// Lanes 6 and 7 of group G: bits 3, 2, 1 (lane 6's bits 2, 1, 0) and 7, 6, 5 (lane 7's) of R[0],
// R[1] and R[2]'s bits 3 and 7 gathered (bits 4 and 0 are left as they come: the lanes' masks
// drop them). Two bitwise selects where masks and ORs took five.
SPITE_AVX512 inline __m512i spare_bits(const std::byte* group) {
  const __m512i r0 = _mm512_load_si512(group), r1 = _mm512_load_si512(group + 64), r2 = _mm512_load_si512(group + 128);
  constexpr int select = 0xCA;  // a ? b : c, bit by bit
  const __m512i b32 = _mm512_ternarylogic_epi32(_mm512_set1_epi8(static_cast<char>(0x88)), r0, _mm512_srli_epi16(r1, 1), select);
  return _mm512_ternarylogic_epi32(_mm512_set1_epi8(0x22), _mm512_srli_epi16(r2, 2), b32, select);
}

// Lane L of group G of the 16 rows: 4 unsigned 3-bit quants per row. Lanes 0-5 take a mask (and
// a shift for the odd ones), 6 and 7 share the gathering of their bits (computed once: GCC
// merges the two calls; computed in group and passed in, it ran slower), each then a shift and a
// mask: about 2.5 operations per lane, where the file's planes (two bits in one register, the
// third in another) took 4.6 (two shifts, two masks and a select). From the caches, one thread,
// min of three rounds alternated: Q3_K:2048:5632 one row 0.207-0.233 -> 0.183-0.185 ms, 2 and
// 3 rows 0.279 / 0.472 -> 0.273 / 0.465; 256 rows within the noise (38-47 against 40-45 ms);
// inside TinyLlama Q3_K_M (one thread, `--profile`, three rounds) its Q3_K 2048x11264 matrices
// 9.6-20.9 -> 14.9-23.8 GB/s.
template <int G, int L>
SPITE_AVX512 inline __m512i chunk(const std::byte* blk, __m512i m7) {
  const std::byte* group = blk + x16_groups + x16_group * G;
  if constexpr (L < 6) {
    __m512i r = _mm512_load_si512(group + 64 * (L / 2));
    if constexpr (L % 2 != 0) r = _mm512_srli_epi16(r, 4);
    return _mm512_and_si512(r, m7);
  } else {
    return _mm512_and_si512(_mm512_srli_epi16(spare_bits(group), L == 6 ? 1 : 5), m7);
  }
}

template <int G, int L, int T>
SPITE_AVX512 inline void lane(const std::byte* blk, const std::int8_t* const* xs, __m512i m7, __m512i scales, __m512i (*lanes)[8]) {
  const __m512i q = chunk<G, L>(blk, m7);
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) {
    lanes[t][L] = _mm512_dpwssd_epi32(lanes[t][L], _mm512_maddubs_epi16(q, _mm512_set1_epi32(load_u32(xs[t] + 32 * G + 4 * L))), scales);
  }
}

template <int G, int T>
SPITE_AVX512 inline void group(const std::byte* blk, const std::int8_t* const* xs, __m512i m7, __m512i pairs0, __m512i pairs1,
                               __m512i (*lanes)[8]) {
  // Group G's scales of lanes 0..3 and 4..7, from the pairs of groups G - G % 2 and G - G % 2 + 1.
  const __m512i first = x16_pair_half<G % 2>(pairs0), second = x16_pair_half<G % 2>(pairs1);
  // The super-block decode_fetch.q3_k ahead (by default five, 9.3 KB), 4 of its 29 lines per group.
  // Two ahead (as simd_x86_q6k_x16.cpp does) until a Zen 5 host read, of a plain read of the same
  // bytes (`--matmul Q3_K:2048:5632` and `5632:2048 --cold`, three rounds alternated), one thread
  // 78-81 % at two, 63-65 % at one, 85-87 % at three, 85-87 % at four, 87-95 % at five, 83-93 % at
  // seven; two threads 71-74 % / 75-79 % / 78-91 % (three and four) / 91 % / 89-91 %.
  constexpr int lines = static_cast<int>(x16_block / cache_line);
  if (const auto ahead = static_cast<std::size_t>(decode_fetch.q3_k); ahead != 0) {
    for (int j = 4 * G; j < std::min(4 * G + 4, lines); ++j) prefetch_l1(blk + ahead * x16_block + cache_line * j);
  }
  // Tiles of 2+ activation rows also fetch six ahead into L2, as x16_fetch_ahead does: Zen 4,
  // Q3_K:2048:11264 from memory, min of 2-3 rounds alternated, two threads x 4 rows 0.82 -> 0.60
  // ms (ten ahead the same), x 2 rows 0.35-0.38 -> 0.31, one thread x 4 1.61 -> 1.20-1.49; 512
  // rows level.
  if constexpr (T >= 2) {
    for (int j = 4 * G; j < std::min(4 * G + 4, lines); ++j) prefetch_l2(blk + 6 * x16_block + cache_line * j);
  }
  lane<G, 0, T>(blk, xs, m7, first, lanes);
  lane<G, 1, T>(blk, xs, m7, first, lanes);
  lane<G, 2, T>(blk, xs, m7, first, lanes);
  lane<G, 3, T>(blk, xs, m7, first, lanes);
  lane<G, 4, T>(blk, xs, m7, second, lanes);
  lane<G, 5, T>(blk, xs, m7, second, lanes);
  lane<G, 6, T>(blk, xs, m7, second, lanes);
  lane<G, 7, T>(blk, xs, m7, second, lanes);
}

// Groups 2P and 2P + 1, with the -4 offset of both: lane L starts with
// -4 (sc[4P + h] S(2P, L) + sc[4P + 2 + h] S(2P + 1, L)), S(g, L) the sum of the activations of
// its elements in group g (h = L / 4).
template <int P, int T>
SPITE_AVX512 inline void group_pair(const std::byte* blk, const std::int8_t* const* xs, const std::int32_t (*const* offsets)[8],
                                    __m512i m7, __m512i (*lanes)[8]) {
  const auto* sc = reinterpret_cast<const __m256i*>(blk + x16_scales + 64 * P);
  const __m512i pairs0 = _mm512_cvtepi8_epi16(_mm256_load_si256(sc)), pairs1 = _mm512_cvtepi8_epi16(_mm256_load_si256(sc + 1));
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 8
    for (int L = 0; L < 8; ++L) {
      lanes[t][L] = _mm512_dpwssd_epi32(lanes[t][L], L < 4 ? pairs0 : pairs1, _mm512_set1_epi32(offsets[t][P][L]));
    }
  }
  group<2 * P, T>(blk, xs, m7, pairs0, pairs1, lanes);
  group<2 * P + 1, T>(blk, xs, m7, pairs0, pairs1, lanes);
}

// For one activation row's super-block: dword L of v[p] holds -4 S(2p, L) (low half) and
// -4 S(2p + 1, L) (high half); |4 S| <= 4 x 4 x 128 fits an int16. Made once per matmul.
struct block_offsets {
  alignas(32) std::int32_t v[4][8];
};

SPITE_AVX512 void activation_offsets(const gguf::block_q8_K* x, std::size_t n, block_offsets* out) {
  const __m512i minus4 = _mm512_set1_epi8(-4);
  for (std::size_t i = 0; i < n; ++i) {
    for (int p = 0; p < 4; ++p) {
      // VPDPBUSD takes its first operand unsigned: |x| with x's sign moved onto the 4.
      const __m512i xv = _mm512_loadu_si512(x[i].qs + 64 * p);
      const __m512i m = _mm512_mask_sub_epi8(minus4, _mm512_movepi8_mask(xv), _mm512_setzero_si512(), minus4);
      const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(xv), m);  // -4 S(2p, L) | -4 S(2p + 1, L)
      const __m256i lo = _mm512_castsi512_si256(sums), hi = _mm512_extracti64x4_epi64(sums, 1);
      _mm256_store_si256(reinterpret_cast<__m256i*>(out[i].v[p]), _mm256_blend_epi16(lo, _mm256_slli_epi32(hi, 16), 0xAA));
    }
  }
}

// Super-block b of the group at group_base for T activation rows (`stride` blocks apart) into acc.
template <int T>
SPITE_AVX512 inline void super_block(const std::byte* group_base, std::int64_t b, const gguf::block_q8_K* x,
                                     const block_offsets* offsets, std::int64_t stride, __m512 (*acc)[8]) {
  const __m512i m7 = _mm512_set1_epi8(0x07);
  const std::byte* blk = group_base + static_cast<std::size_t>(b) * x16_block;
  __m512i lanes[T][8];
  const x16_activations<T> act(x, stride, b, lanes);
  const std::int32_t (*off[T])[8];
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) off[t] = offsets[t * stride + b].v;
  group_pair<0, T>(blk, act.qs, off, m7, lanes);
  group_pair<1, T>(blk, act.qs, off, m7, lanes);
  group_pair<2, T>(blk, act.qs, off, m7, lanes);
  group_pair<3, T>(blk, act.qs, off, m7, lanes);
  x16_accumulate<T>(blk, act, lanes, acc);
}

template <int T>
SPITE_AVX512 void tile16(const std::byte* group_base, std::int64_t nb, const gguf::block_q8_K* x, const block_offsets* offsets,
                         std::int64_t stride, std::int64_t out, float* y16) {
  __m512 acc[T][8];
  x16_zero<T>(acc);
  for (std::int64_t b = 0; b < nb; ++b) super_block<T>(group_base, b, x, offsets, stride, acc);
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y16 + t * out, x16_lane_sum(acc[t]));
}

// Decode: one activation row against S groups read in step, a super-block of each in turn
// (S = 2: a group of the matrix's first half beside one of its second, by_group_pairs). Against
// a plain read of the same bytes from memory (`bench --matmul Q3_K:5632:2048 --cold`, and
// 2048:5632, two alternated rounds, Zen 5): one thread 67-77 % as one stream, 86-89 % as two;
// two threads 70-75 -> 73-78 %.
template <int S>
SPITE_AVX512 void decode16(const std::byte* const* groups, std::int64_t nb, const gguf::block_q8_K* x, const block_offsets* offsets,
                           float* const* ys) {
  __m512 acc[S][8];
  x16_zero<S>(acc);
  for (std::int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 2
    for (int s = 0; s < S; ++s) super_block<1>(groups[s], b, x, offsets, nb, &acc[s]);
  }
#pragma GCC unroll 2
  for (int s = 0; s < S; ++s) _mm512_storeu_ps(ys[s], x16_lane_sum(acc[s]));
}

}  // namespace

std::size_t pack_q3_K_x16(weight& w) {
  return x16_pack<gguf::block_q3_K>(w, x16_block, [](std::uint8_t* dst, const gguf::block_q3_K& blk, int r) {
    std::int8_t sc[16];
    q3_K_scales(blk.scales, sc);
    std::memcpy(dst + 2 * r, &blk.d, 2);
    for (int s = 0; s < 16; ++s) {
      const int p = s / 4, k = (s / 2) % 2, h = s % 2;
      dst[x16_scales + 64 * p + 32 * h + 2 * r + k] = static_cast<std::uint8_t>(sc[s]);
    }
    for (int g = 0; g < 8; ++g) {
      std::uint32_t low[2], high;
      q3_K_group_planes(blk, g, low, high);
      const auto quant = [&](int L, int i) {  // q + 4 of lane L's element i
        const auto bits = static_cast<unsigned>(((low[L / 4] >> (8 * i + 2 * (L % 4))) & 3U) | (((high >> (8 * i + L)) & 1U) << 2));
        return bits;
      };
      std::uint8_t* gd = dst + x16_groups + x16_group * static_cast<std::size_t>(g);
      for (int k = 0; k < 3; ++k) {
        for (int i = 0; i < 4; ++i) {
          const unsigned spare = ((quant(6, i) >> (2 - k)) & 1U) << 3 | ((quant(7, i) >> (2 - k)) & 1U) << 7;
          gd[64 * k + 4 * r + i] = static_cast<std::uint8_t>(quant(2 * k, i) | quant(2 * k + 1, i) << 4 | spare);
        }
      }
    }
  });
}

bool matmul_q3_K_x16(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (avx512_q4_K_tiles() == nullptr) return false;
  const std::int64_t nb = w.in / qkk;
  std::vector<block_offsets> offsets(static_cast<std::size_t>(nb * n_tokens));
  activation_offsets(xq, offsets.size(), offsets.data());
  if (n_tokens == 1) {
    by_group_pairs<16>(
        w.out / 16, 1, y, pool, [&](std::int64_t g) { return w.packed + static_cast<std::size_t>(g * nb) * x16_block; },
        [&](const std::byte* const* both, std::int64_t, float* const* ys) { decode16<2>(both, nb, xq, offsets.data(), ys); },
        [&](const std::byte* group, std::int64_t, float* y16) { decode16<1>(&group, nb, xq, offsets.data(), &y16); });
    return true;
  }
  x16_for_groups_k(w, x16_block, n_tokens, pool, [&](const std::byte* group, std::int64_t t0, std::int64_t t1, std::int64_t o) {
    std::int64_t t = t0;
    // Three rows (a batch's last) in one pass rather than two and one: Q3_K:2048:11264 from
    // memory, two threads, alternated, 0.40-0.48 -> 0.35-0.42 ms.
    if (t1 - t == 3) return tile16<3>(group, nb, xq + t * nb, offsets.data() + t * nb, nb, w.out, y + t * w.out + o);
    for (; t + 2 <= t1; t += 2) tile16<2>(group, nb, xq + t * nb, offsets.data() + t * nb, nb, w.out, y + t * w.out + o);
    if (t < t1) tile16<1>(group, nb, xq + t * nb, offsets.data() + t * nb, nb, w.out, y + t * w.out + o);
  });
  return true;
}

}  // namespace spite::dispatch::cpu::x86

#endif
