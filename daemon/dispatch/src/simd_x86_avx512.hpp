// Shared preamble of the AVX-512 VNNI kernel files (simd_x86_avx512.cpp, simd_x86_q8_0_packed.cpp,
// simd_x86_q4k_x16.cpp): their target attribute. Internal to spite::dispatch; x86-64 only.
#pragma once

// GCC 12's AVX-512 headers build some results from _mm512_undefined values and then warn about
// them (a known false positive); this header is included only by files of AVX-512 kernels.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "simd_x86.hpp"
#include "simd_x86_x16.hpp"
#include "../../gguf/src/quants/iq_tables.hpp"

#define SPITE_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

#if defined(__x86_64__)
namespace spite::dispatch::cpu::x86 {

// A Q4_K or Q5_K super-block's 6-bit scales and mins of 16 rows, unpacked from their 12 packed
// bytes P[k] as the 16-row layouts store them (at `packed`, byte k of row r at 16 k + r) by
// scales_mins_k4's rule, four bytes' 16-row vectors per operation: sub-block s < 4 scale P[s] &
// 63, min P[s + 4] & 63; s >= 4 scale the low nibble of P[s + 4] with P[s - 4]'s top two bits
// above it, min the high nibble of P[s + 4] with P[s]'s. Stored as the kernels read them:
// scales[s] a byte per row, mins[j] row r's mins of sub-blocks 2j and 2j + 1 at bytes 2r, 2r + 1
// (an int16 pair for VPMADDWD against the activation sums of the two).
struct x16_scales_mins {
  alignas(64) std::uint8_t scales[8][16];
  alignas(64) std::uint8_t mins[4][32];
  SPITE_AVX512 explicit x16_scales_mins(const std::byte* packed) {
    const __m512i p0 = _mm512_load_si512(packed), p4 = _mm512_load_si512(packed + 64), p8 = _mm512_load_si512(packed + 128);
    const __m512i low6 = _mm512_set1_epi8(0x3F), low4 = _mm512_set1_epi8(0x0F), top2 = _mm512_set1_epi8(0x30);
    const __m512i sc_low = _mm512_and_si512(p0, low6), m_low = _mm512_and_si512(p4, low6);
    const __m512i sc_high = _mm512_or_si512(_mm512_and_si512(p8, low4), _mm512_and_si512(_mm512_srli_epi16(p0, 2), top2));
    const __m512i m_high =
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(p8, 4), low4), _mm512_and_si512(_mm512_srli_epi16(p4, 2), top2));
    _mm512_store_si512(scales[0], sc_low);
    _mm512_store_si512(scales[4], sc_high);
    // [m0 m2 m4 m6] and [m1 m3 m5 m7] (16-row vectors), bytes interleaved lane by lane (rows 0-7,
    // then 8-15), then each pair's two halves put together.
    const __m512i even = _mm512_shuffle_i64x2(m_low, m_high, _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i odd = _mm512_shuffle_i64x2(m_low, m_high, _MM_SHUFFLE(3, 1, 3, 1));
    const __m512i lo = _mm512_unpacklo_epi8(even, odd), hi = _mm512_unpackhi_epi8(even, odd);
    const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    _mm512_store_si512(mins[0], _mm512_permutex2var_epi64(lo, first, hi));
    _mm512_store_si512(mins[2], _mm512_permutex2var_epi64(lo, second, hi));
  }
};

// The 16-row tiles (simd_x86_q5k_x16.cpp, simd_x86_q6k_x16.cpp) take T activation rows `stride`
// blocks apart; for super-block b: each row's block and quants, and its 8 lanes zeroed.
template <int T>
struct x16_activations {
  const gguf::block_q8_K* block[T];
  const std::int8_t* qs[T];
  SPITE_AVX512 x16_activations(const gguf::block_q8_K* x, std::int64_t stride, std::int64_t b, __m512i (*lanes)[8]) {
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) {
      block[t] = x + t * stride + b;
      qs[t] = block[t]->qs;
#pragma GCC unroll 8
      for (int L = 0; L < 8; ++L) lanes[t][L] = _mm512_setzero_si512();
    }
  }
  // Hides where qs points from the compiler, so that a decode reading two groups in turn
  // broadcasts each super-block's activation dwords afresh, rather than keeping all 64 of them
  // for the other group (in memory: Q6_K:5632:2048 from the caches 0.20 against 0.185 ms).
  SPITE_AVX512 void broadcast_afresh() {
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) asm("" : "+r"(qs[t]));
  }
};

// Groups::run<G, T>(args...) for the 8 groups G of a 16-row super-block, in order (the
// kernels' group functions take G as a template argument; a generic lambda instead kept them
// from being inlined: 0.17 -> 0.24 ms for Q5_K:2048:5632 from the caches).
template <class Groups, int T, class... Args>
[[gnu::always_inline]] SPITE_AVX512 inline void x16_eight_groups(Args... args) {
  Groups::template run<0, T>(args...);
  Groups::template run<1, T>(args...);
  Groups::template run<2, T>(args...);
  Groups::template run<3, T>(args...);
  Groups::template run<4, T>(args...);
  Groups::template run<5, T>(args...);
  Groups::template run<6, T>(args...);
  Groups::template run<7, T>(args...);
}

// Ternary-logic tables (operands A, B, C as 0xF0, 0xCC, 0xAA).
constexpr int a_or_b_and_c = 0xF8;  // A | (B & C)

// Dword r of `pairs` holds two int16 (a row's scales): the first (K = 0) or the second (K = 1)
// in both halves of dword r, for VPDPWSSD against a pair of products. One byte shuffle (a shift
// and a ternary-logic operation before, both on the units the products need).
template <int K>
SPITE_AVX512 inline __m512i x16_pair_half(__m512i pairs) {
  constexpr char lo = 2 * K, hi = 2 * K + 1;
  const __m512i pick = _mm512_broadcast_i32x4(_mm_setr_epi8(lo, hi, lo, hi, 4 + lo, 4 + hi, 4 + lo, 4 + hi, 8 + lo, 8 + hi, 8 + lo,
                                                            8 + hi, 12 + lo, 12 + hi, 12 + lo, 12 + hi));
  return _mm512_shuffle_epi8(pairs, pick);
}

// IQ4_NL's 16 values + 128 (1..241: unsigned, for VPDPBUSD) in each 128-bit lane, for VPSHUFB
// by index; the block sums then take 128 x sum(x) off.
SPITE_AVX512 inline __m512i iq4_nl_values_plus_128() {
  const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(gguf::quants::iq::kvalues_iq4nl));
  return _mm512_broadcast_i32x4(_mm_xor_si128(values, _mm_set1_epi8(static_cast<char>(0x80))));
}

// T activation rows' float accumulators, 8 lanes each, zeroed. Unrolled for every T the tiles
// take (up to 4): a loop left over T = 3 kept 16-row Q8_0's accumulators in memory through its
// whole tile (Q8_0:2048:5632 x 512 rows, one thread: 95.5 against 61 ms).
template <int T>
SPITE_AVX512 inline void x16_zero(__m512 (*acc)[8]) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 8
    for (int L = 0; L < 8; ++L) acc[t][L] = _mm512_setzero_ps();
  }
}

// The end of a super-block: each activation row's 8 lanes of integers into its float lanes,
// acc = fma(d_w * d_x, lane, acc), d_w the 16 rows' f16 scales at d16.
template <int T>
SPITE_AVX512 inline void x16_accumulate(const std::byte* d16, const x16_activations<T>& act, const __m512i (*lanes)[8],
                                        __m512 (*acc)[8]) {
  const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d16)));
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) {
    const __m512 dxw = _mm512_mul_ps(dw, _mm512_set1_ps(act.block[t]->d));
#pragma GCC unroll 8
    for (int L = 0; L < 8; ++L) acc[t][L] = _mm512_fmadd_ps(dxw, _mm512_cvtepi32_ps(lanes[t][L]), acc[t][L]);
  }
}

// The 8 lane vectors of 16 rows added as reduce8_vec adds a row's 8 lanes:
// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
SPITE_AVX512 inline __m512 x16_lane_sum(const __m512* acc) {
  const __m512 s0 = _mm512_add_ps(acc[0], acc[4]), s1 = _mm512_add_ps(acc[1], acc[5]);
  const __m512 s2 = _mm512_add_ps(acc[2], acc[6]), s3 = _mm512_add_ps(acc[3], acc[7]);
  return _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3));
}

// Lanes L and L + 4 (L < 4) of one super-block for T activation rows, for the tiles of four and
// more rows (8 lanes a row no longer fit the registers): Unpack::pair<L>(blk, g, q0, q1) gives
// group g's lanes L and L + 4 (elements 32g + 4L.. and 32g + 16 + 4L.. of the 16 rows), each
// unpacked once for the T rows, times first_scales[g] and second_scales[g]. Two lanes at a time
// keep 2T VPDPWSSD chains going (one lane's T chains waited on the instruction's latency).
template <class Unpack, int L, int T>
SPITE_AVX512 inline void x16_lane_pair(const std::byte* blk, const std::int8_t* const* xs, const __m512i* first_scales,
                                       const __m512i* second_scales, __m512i* first, __m512i* second) {
  static_assert(L >= 0 && L < 4);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) first[t] = second[t] = _mm512_setzero_si512();
#pragma GCC unroll 1
  for (int g = 0; g < 8; ++g) {
    __m512i q0, q1;
    Unpack::template pair<L>(blk, g, q0, q1);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const std::int8_t* x = xs[t] + 32 * g + 4 * L;
      first[t] = _mm512_dpwssd_epi32(first[t], _mm512_maddubs_epi16(q0, _mm512_set1_epi32(load_u32(x))), first_scales[g]);
      second[t] = _mm512_dpwssd_epi32(second[t], _mm512_maddubs_epi16(q1, _mm512_set1_epi32(load_u32(x + 16))), second_scales[g]);
    }
  }
}

// Super-block b of T activation rows (`stride` blocks apart from x) for the tiles of four and more
// rows: each row's block, quants and d_w * d_x (dw: the 16 rows' scales).
template <int T>
struct x16_block_rows {
  const gguf::block_q8_K* block[T];
  const std::int8_t* qs[T];
  __m512 dxw[T];
  SPITE_AVX512 x16_block_rows(const gguf::block_q8_K* x, std::int64_t stride, std::int64_t b, __m512 dw) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      block[t] = x + t * stride + b;
      qs[t] = block[t]->qs;
      dxw[t] = _mm512_mul_ps(dw, _mm512_set1_ps(block[t]->d));
    }
  }
};

// The four-row tiles' end: each activation row's float lanes (in memory) summed in reduce8_vec's
// order, plus extra[t] where given, to y16 + t * out.
template <int T>
SPITE_AVX512 inline void x16_store_lane_sums(const float (*acc)[8][16], float* y16, std::int64_t out, const __m512* extra = nullptr) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    __m512 lanes[8];
#pragma GCC unroll 8
    for (int L = 0; L < 8; ++L) lanes[L] = _mm512_load_ps(acc[t][L]);
    const __m512 sum = x16_lane_sum(lanes);
    _mm512_storeu_ps(y16 + t * out, extra != nullptr ? _mm512_add_ps(sum, extra[t]) : sum);
  }
}

// Part `part` of `parts` of a layout's block four ahead of blk (`block_bytes` each), for the
// batch tiles that prefetch a share of it per step. Two ahead left the 4-row Q6_K and Q5_K tiles
// waiting on memory (TYPE:2048:11264 --tokens 4 from memory, alternated: Q6_K one thread 0.81
// -> 0.67 ms, two threads 0.40-0.45 -> 0.34-0.39; Q5_K 0.72 -> 0.65 and 0.37-0.51 -> 0.34-0.39;
// IQ4_XS within the noise). The same share of the block six ahead goes into L2 as well, as the
// 16-row Q8_0, Q4_0 and Q4_K batch tiles fetch further into L2: Zen 4, from memory, min of 3
// rounds alternated, TYPE:2048:11264 x 4 rows, two threads: Q6_K 0.90-1.16 -> 0.63-0.66 ms (ten
// ahead 0.60-0.69), Q5_K 0.70-0.76 -> 0.57 (eight 0.52-0.61), IQ4_XS level; one thread Q6_K
// 1.60-2.01 -> 1.05-1.08; Q6_K:5632:2048 x 4 0.41-0.57 -> 0.29-0.33; 512 rows level.
template <std::size_t block_bytes, int part, int parts>
SPITE_AVX512 inline void x16_fetch_ahead(const std::byte* blk) {
  constexpr int lines = static_cast<int>(block_bytes / cache_line), share = (lines + parts - 1) / parts;
  constexpr std::size_t ahead = 4, ahead_l2 = 6;
  for (int j = share * part; j < std::min(share * part + share, lines); ++j) {
    prefetch_l1(blk + ahead * block_bytes + cache_line * j);
    prefetch_l2(blk + ahead_l2 * block_bytes + cache_line * j);
  }
}

// A 16-row tile: T activation rows from x (`stride` blocks apart) against the group at
// group_base; results `out` floats apart from y16.
using x16_tile_fn = void (*)(const std::byte* group_base, std::int64_t nb, const gguf::block_q8_K* x, std::int64_t stride,
                             std::int64_t out, float* y16);
// One activation row (x) against two groups read in step, block by block (two streams): results
// at y16[0] and y16[1].
using x16_pair_fn = void (*)(const std::byte* const* groups, std::int64_t nb, const gguf::block_q8_K* x, float* const* y16);

// fn(group, t0, t1, o) for each group of 16 rows (its packed bytes at `group`, `group_bytes`
// apart, its first row o) and each block of activation rows [t0, t1) (rows of `x_row_bytes`),
// across the pool.
template <class Fn>
void x16_for_groups(const weight& w, std::size_t group_bytes, std::size_t x_row_bytes, std::int64_t n_tokens, thread_pool& pool,
                    Fn fn) {
  by_groups_and_token_blocks(w.out / 16, n_tokens, token_block(x_row_bytes), pool, [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
    fn(w.packed + static_cast<std::size_t>(g) * group_bytes, t0, t1, 16 * g);
  });
}

// The same for a layout of `block_bytes` per group and super-block, against Q8_K activations.
template <class Fn>
void x16_for_groups_k(const weight& w, std::size_t block_bytes, std::int64_t n_tokens, thread_pool& pool, Fn fn) {
  const auto nb = static_cast<std::size_t>(w.in / qkk);
  x16_for_groups(w, nb * block_bytes, nb * sizeof(gguf::block_q8_K), n_tokens, pool, fn);
}

// Decode of one activation row (x) over a 16-row K-quant layout as two streams, the matrix's
// first half beside its second (by_group_pairs): `pair` for each pair of groups, `one` for the
// last group of an odd count.
inline void x16_decode_pairs(const gguf::block_q8_K* x, std::int64_t nb, std::size_t block_bytes, const weight& w, float* y,
                             thread_pool& pool, x16_pair_fn pair, x16_tile_fn one) {
  const std::size_t group_bytes = static_cast<std::size_t>(nb) * block_bytes;
  by_group_pairs<16>(
      w.out / 16, 1, y, pool, [&](std::int64_t g) { return w.packed + static_cast<std::size_t>(g) * group_bytes; },
      [&](const std::byte* const* both, std::int64_t, float* const* ys) { pair(both, nb, x, ys); },
      [&](const std::byte* group, std::int64_t, float* y16) { one(group, nb, x, nb, w.out, y16); });
}

// A matmul on a 16-row layout of `block_bytes` per group and super-block: each group against
// each block of activation rows, four rows per pass where the layout has such a tile, three
// left over in one pass where it has a tile for them, else two (each chunk unpacked once for all
// of them), then the last one alone. Three in one pass, against two and one, from memory, two
// threads (`--matmul T:2048:11264 --tokens 3 --cold`, alternated): Q6_K 0.46-0.51 -> 0.38-0.40
// ms, Q5_K 0.43-0.47 -> 0.32-0.36, IQ4_XS 0.36-0.38 -> 0.32-0.34. False, having done nothing, when the AVX-512 kernels stand aside.
inline bool x16_matmul(const weight& w, std::size_t block_bytes, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y,
                       thread_pool& pool, x16_tile_fn two, x16_tile_fn one, x16_tile_fn four = nullptr, x16_tile_fn three = nullptr) {
  if (avx512_q4_K_tiles() == nullptr) return false;
  const std::int64_t nb = w.in / qkk;
  x16_for_groups_k(w, block_bytes, n_tokens, pool, [&](const std::byte* group, std::int64_t t0, std::int64_t t1, std::int64_t o) {
    std::int64_t t = t0;
    if (four != nullptr) {
      for (; t + 4 <= t1; t += 4) four(group, nb, xq + t * nb, nb, w.out, y + t * w.out + o);
    }
    if (three != nullptr && t1 - t == 3) {
      three(group, nb, xq + t * nb, nb, w.out, y + t * w.out + o);
      return;
    }
    for (; t + 2 <= t1; t += 2) two(group, nb, xq + t * nb, nb, w.out, y + t * w.out + o);
    if (t < t1) one(group, nb, xq + t * nb, nb, w.out, y + t * w.out + o);
  });
  return true;
}

// Packs w into a 16-row layout of `unit_bytes` per group and Per blocks (of `elements`), where
// the AVX-512 VNNI kernels run and w.out is a multiple of 16 (else 0, nothing done): fill(unit,
// h, block, r) writes row r's block Per u + h into its group's zeroed unit u (a short last unit
// keeps its rest zero).
template <class Block, int Per, class Fill>
std::size_t x16_pack_units(weight& w, std::size_t unit_bytes, std::int64_t elements, Fill fill) {
  if (avx512_q4_K_tiles() == nullptr || w.out % 16 != 0) return 0;
  const std::int64_t nb = w.in / elements, units = (nb + Per - 1) / Per, groups = w.out / 16;
  const std::size_t bytes = static_cast<std::size_t>(groups * units) * unit_bytes;
  auto buffer = make_aligned_bytes(bytes);  // zeroed
  for_load_ranges(groups, [&](std::int64_t g0, std::int64_t g1) {
    for (std::int64_t g = g0; g < g1; ++g) {
      for (int r = 0; r < 16; ++r) {
        const auto* row = reinterpret_cast<const Block*>(w.row(16 * g + r));
        for (std::int64_t b = 0; b < nb; ++b) {
          std::byte* unit = buffer.get() + static_cast<std::size_t>(g * units + b / Per) * unit_bytes;
          fill(unit, static_cast<std::size_t>(b % Per), row[b], static_cast<std::size_t>(r));
        }
      }
    }
  });
  w.packed = buffer.get();
  w.packed_owner = std::move(buffer);
  w.packed_rows = 16;
  return bytes;
}

// A block per unit: fill(dst, block, r) writes row r's block into its group's zeroed block.
template <class Block, class Fill>
std::size_t x16_pack(weight& w, std::size_t block_bytes, Fill fill, std::int64_t elements = qkk) {
  return x16_pack_units<Block, 1>(w, block_bytes, elements, [&](std::byte* dst, std::size_t, const Block& block, std::size_t r) {
    fill(reinterpret_cast<std::uint8_t*>(dst), block, static_cast<int>(r));
  });
}

// The layouts of 32-element blocks in pairs (Q4_0 / IQ4_NL, Q8_0): fill(pair, h, block, r).
template <class Block, class Fill>
std::size_t x16_pack_pairs(weight& w, std::size_t pair_bytes, Fill fill) {
  return x16_pack_units<Block, 2>(w, pair_bytes, qk0, fill);
}

}  // namespace spite::dispatch::cpu::x86
#endif
