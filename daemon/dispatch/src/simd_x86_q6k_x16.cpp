// Q6_K packed in 16-row groups for processors with AVX-512 VNNI, for decode and batches.
// The same bits as the reference's Q6_K dot (dot_row<q6_K> in ref_dot_kquants.cpp): per row and
// super-block 8 int32 lanes (lane L: elements 4L..4L+3 of every 32-element group, times the
// group's 16-element scale, less 32 x (sc[2L] bsum[2L] + sc[2L+1] bsum[2L+1])), one fma per lane
// and super-block with d_x * d_w, the 8 lanes added as reduce8_vec adds them.
//
// The 4-row groups of pack_q6_K (simd_x86_q6k_avx512.cpp) keep the file's 210-byte blocks: each
// 64-byte load straddles cache lines and the high bits are shuffled into place per row (the
// decode tile: 51-53 GB/s from L3, 24-33 from memory where a plain read gave 35-45; this one
// 56-66 and, with its prefetch, 41-44, Q6_K:5632:2048, one thread). Here a register is one
// 4-element chunk of every row, so a lane is one vector of 16 rows: VPMADDUBSW and VPDPWSSD
// per 64 products, no shuffles. Per group of 16 rows and super-block (3392 bytes, 53 cache
// lines; the file's 16 x 210 = 3360 and 32 bytes of padding):
//   d[16]             f16 at 2 r;
//   scales[8][16][2]  i8 at 64 + 32 p + 2 r + h: row r's sc[2p + h] (an int16 pair per row for
//                     the offset's VPMADDWD against bsums 2p, 2p + 1);
//   then per 32-element group g, 384 bytes at 320 + 384 g, in the order the kernel reads them
//   (one forward stream):
//     low[4]          64-byte registers at + 64 n: bytes 4r..4r+3 hold row r's elements of
//                     chunk 8g + n (elements 32g + 4n..+3) in the low nibbles, of 8g + n + 4 in
//                     the high;
//     high[2]         64-byte registers at + 256 + 64 m: bits 2j..2j+1 of bytes 4r..4r+3 are the
//                     top two bits of row r's chunk 8g + 4m + j.
// Made only where the AVX-512 kernels run and the row count is a multiple of 16; after
// set_avx512(false) such a matrix goes through the AVX2 kernels on the file's layout.
#include "simd_x86_avx512.hpp"

#if defined(__x86_64__)
#include <algorithm>
#include <cstring>

#include "ref_kquants.hpp"

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::size_t x16_scales = 64, x16_groups = 320, x16_group = 6 * 64;
constexpr std::size_t x16_block = x16_groups + 8 * x16_group;
static_assert(x16_block % cache_line == 0 && x16_block == 16 * sizeof(gguf::block_q6_K) + 32);

// Where chunk k's low nibbles and top bits are, and at which bit.
constexpr std::size_t low_offset(int k) { return x16_groups + x16_group * (k / 8) + 64 * (k % 4); }
constexpr int low_shift(int k) { return k % 8 >= 4 ? 4 : 0; }
constexpr std::size_t high_offset(int k) { return x16_groups + x16_group * (k / 8) + 256 + 64 * (k % 8 / 4); }
constexpr int high_shift(int k) { return 2 * (k % 4); }

// Row r's sc[2p] and sc[2p + 1] as int16 (dword r).
SPITE_AVX512 inline __m512i scale_pairs(const std::byte* blk, int p) {
  return _mm512_cvtepi8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + x16_scales + 32 * static_cast<std::size_t>(p))));
}

// -8 x a pair of block sums (bsums[0], bsums[1]) as the two int16 halves of a dword, for the
// VPDPWSSD that takes the -32 offset off a lane with 4 sc (|bsum| <= 16 x 128: -8 bsum fits).
inline int minus8_pair(const std::int16_t* bsums) {
  const auto half = [](std::int16_t v) { return static_cast<std::uint32_t>(static_cast<std::uint16_t>(-8 * v)); };
  return static_cast<int>(half(bsums[0]) | half(bsums[1]) << 16);
}

// Chunk k (0..63) of the 16 rows: 4 unsigned 6-bit quants per row. The high register's fields
// j = 0, 2 are masked together (0x33), and 1, 3 (0xCC): shifted by 4, 2, 0 or -2 each has its
// two bits at 4-5 and zeros at 6-7, whatever 16-bit neighbour shifts in below bit 4, so one
// select (low nibble from `low`, the rest from `high`) makes the quant: two masks per register
// of four chunks where each chunk took one (Q6_K:2048:5632 from the caches, one thread,
// 0.185-0.186 -> 0.175 ms).
template <int K>
SPITE_AVX512 inline __m512i chunk(const std::byte* blk, __m512i m4) {
  constexpr int select_low_nibble = 0xE4;  // (A & C) | (B & ~C)
  __m512i low = _mm512_load_si512(blk + low_offset(K));
  if constexpr (low_shift(K) == 4) low = _mm512_srli_epi16(low, 4);
  const __m512i fields = _mm512_set1_epi8(static_cast<char>(K % 2 == 0 ? 0x33 : 0xCC));
  __m512i high = _mm512_and_si512(_mm512_load_si512(blk + high_offset(K)), fields);
  if constexpr (high_shift(K) == 0) high = _mm512_slli_epi16(high, 4);
  if constexpr (high_shift(K) == 2) high = _mm512_slli_epi16(high, 2);
  if constexpr (high_shift(K) == 6) high = _mm512_srli_epi16(high, 2);
  return _mm512_ternarylogic_epi32(low, high, m4, select_low_nibble);
}

// Chunk c, unpacked once, times each activation row's 4 values and the scales, into lane c % 8.
template <int C, int T>
SPITE_AVX512 inline void lane(const std::byte* blk, const std::int8_t* const* xs, __m512i m4, __m512i scales,
                              __m512i (*lanes)[8]) {
  const __m512i q = chunk<C>(blk, m4);
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) {
    lanes[t][C % 8] = _mm512_dpwssd_epi32(lanes[t][C % 8], _mm512_maddubs_epi16(q, _mm512_set1_epi32(load_u32(xs[t] + 4 * C))), scales);
  }
}

// Group g's 8 chunks into the 8 lanes.
template <int G, int T>
SPITE_AVX512 inline void group(const std::byte* blk, const std::int8_t* const* xs, const gguf::block_q8_K* const* xb, __m512i m4,
                               __m512i (*lanes)[8]) {
  // Row r's sc[2G] and sc[2G + 1] as int16 (dword r), each then in both halves of the dword.
  const __m512i pairs = scale_pairs(blk, G);
  const __m512i first = x16_pair_half<0>(pairs), second = x16_pair_half<1>(pairs);
  // Lane G's -32 offset, 32 (sc[2G] bsum[2G] + sc[2G + 1] bsum[2G + 1]), as one VPDPWSSD of 4 sc
  // against -8 bsum (both within int16, |bsum| <= 2048) where it took a multiply-add, a shift
  // and a subtraction after the super-block, with the scales widened again.
  const __m512i scales4 = _mm512_slli_epi16(pairs, 2);
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) {
    lanes[t][G] = _mm512_dpwssd_epi32(lanes[t][G], scales4, _mm512_set1_epi32(minus8_pair(xb[t]->bsums + 2 * G)));
  }
  // The super-block decode_fetch.q6_k ahead (by default two), 7 of its 53 lines per group. The
  // hardware prefetchers alone fed this tile at 47-65 % of a plain read of the same bytes
  // (Q6_K:5632:2048 from memory); two blocks ahead 92-98 % (one and two threads), four ahead
  // 73-97 %. As two streams (a group of each half of the matrix in turn, as Q4_K's decode reads
  // on a Zen 4 core) it read slower on a Zen 5 core (76-81 % against 85-87 %) and, inside a whole
  // model, on a Zen 4 one (one thread, 18-20 GB/s against 22-24; docs/performance-log.md).
  constexpr int lines = static_cast<int>(x16_block / cache_line);
  if (const auto ahead = static_cast<std::size_t>(decode_fetch.q6_k); ahead != 0) {
    for (int j = 7 * G; j < std::min(7 * G + 7, lines); ++j) prefetch_l1(blk + ahead * x16_block + cache_line * j);
  }
  lane<8 * G + 0, T>(blk, xs, m4, first, lanes);
  lane<8 * G + 1, T>(blk, xs, m4, first, lanes);
  lane<8 * G + 2, T>(blk, xs, m4, first, lanes);
  lane<8 * G + 3, T>(blk, xs, m4, first, lanes);
  lane<8 * G + 4, T>(blk, xs, m4, second, lanes);
  lane<8 * G + 5, T>(blk, xs, m4, second, lanes);
  lane<8 * G + 6, T>(blk, xs, m4, second, lanes);
  lane<8 * G + 7, T>(blk, xs, m4, second, lanes);
}

// group<G, T> for x16_eight_groups.
struct groups {
  template <int G, int T>
  [[gnu::always_inline]] SPITE_AVX512 static void run(const std::byte* blk, const std::int8_t* const* xs, const gguf::block_q8_K* const* xb,
                                                      __m512i m4, __m512i (*lanes)[8]) {
    group<G, T>(blk, xs, xb, m4, lanes);
  }
};

// Super-block b of the group at group_base against T activation rows (from x, `stride` blocks
// apart) into acc: each chunk unpacked once for the T rows, then one fma per lane and row.
// Always inlined: called as a function (decode_pair calls it twice) its sums went through memory
// (Q6_K:5632:2048 from the caches 0.185 -> 0.208 ms).
template <int T>
[[gnu::always_inline]] SPITE_AVX512 inline void super_block(const std::byte* group_base, std::int64_t b, const gguf::block_q8_K* x,
                                                            std::int64_t stride, __m512 (*acc)[8]) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const std::byte* blk = group_base + static_cast<std::size_t>(b) * x16_block;
  // Its header and first group in address order (x16_header_first), 11 of its 53 lines: two
  // streams from memory, one thread, Q6_K:5632:2048 0.330-0.352 -> 0.304-0.307 ms, 2048:11264
  // 0.68-0.71 -> 0.59-0.60 (the header alone 0.31-0.32 / 0.64-0.66; 17 lines as 11; 29 or all
  // 53 as none).
  x16_header_first<x16_groups + x16_group>(blk);
  __m512i lanes[T][8];
  x16_activations<T> act(x, stride, b, lanes);
  act.broadcast_afresh();  // for decode_pair
  x16_eight_groups<groups, T>(blk, act.qs, act.block, m4, lanes);
  x16_accumulate<T>(blk, act, lanes, acc);
}

// T activation rows (results `out` floats apart) against a group of 16 rows.
template <int T>
SPITE_AVX512 void tile16(const std::byte* group_base, std::int64_t nb, const gguf::block_q8_K* x, std::int64_t stride,
                         std::int64_t out, float* y16) {
  __m512 acc[T][8];
  x16_zero<T>(acc);
  for (std::int64_t b = 0; b < nb; ++b) super_block<T>(group_base, b, x, stride, acc);
  // reduce8_vec's order: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) {
    _mm512_storeu_ps(y16 + t * out, x16_lane_sum(acc[t]));
  }
}

// Decode as two streams where this core's table asks for them (decode_fetch.q6_k_pairs): a group
// of the matrix's first half beside one of its second, a super-block of each in turn
// (x16_decode_pairs). On a Zen 4 core, with no software prefetch, one thread, alternated:
// Q6_K:5632:2048 from memory 0.37-0.39 -> 0.32 ms (the same 0.18 from the caches), TinyLlama
// Q4_K_M's Q6_K matrices inside the model 22-24 -> 25-27 GB/s. (With software prefetch two
// super-blocks ahead, as one stream reads on a Zen 5 core, two streams read slower, in the model
// too: docs/performance-log.md.)
SPITE_AVX512 void decode_pair(const std::byte* const* groups, std::int64_t nb, const gguf::block_q8_K* x, float* const* y16) {
  __m512 acc[2][8];
  x16_zero<2>(acc);
  for (std::int64_t b = 0; b < nb; ++b) {
    super_block<1>(groups[0], b, x, nb, &acc[0]);
    super_block<1>(groups[1], b, x, nb, &acc[1]);
  }
  _mm512_storeu_ps(y16[0], x16_lane_sum(acc[0]));
  _mm512_storeu_ps(y16[1], x16_lane_sum(acc[1]));
}

// The lane pairs of x16_lane_pair: chunks 8g + L and 8g + L + 4 share their low-nibble register,
// and their shifts depend on L alone.
struct lane_pairs {
  template <int L>
  SPITE_AVX512 static void pair(const std::byte* blk, int g, __m512i& q0, __m512i& q1) {
    static_assert(low_offset(L) == low_offset(L + 4) && high_shift(L) == high_shift(L + 4));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const std::byte* at = blk + x16_group * static_cast<std::size_t>(g);
    q0 = chunk<L>(at, m4);
    q1 = chunk<L + 4>(at, m4);
  }
};

// Lanes L and L + 4 of the T rows, their offsets taken off, into the rows' float lanes.
template <int L, int T>
SPITE_AVX512 inline void lane_pair_of_rows(const std::byte* blk, const x16_block_rows<T>& rows, const __m512i* scales,
                                           float (*acc)[8][16]) {
  x16_fetch_ahead<x16_block, L, 4>(blk);
  __m512i first[T], second[T];
  x16_lane_pair<lane_pairs, L, T>(blk, rows.qs, scales, scales + 8, first, second);
  const gguf::block_q8_K* const* xb = rows.block;
  const __m512* dxw = rows.dxw;
  // The lanes' -32 offsets as in group (4 sc against -8 bsum, one VPDPWSSD a lane).
  const __m512i scales4_0 = _mm512_slli_epi16(scale_pairs(blk, L), 2), scales4_1 = _mm512_slli_epi16(scale_pairs(blk, L + 4), 2);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const __m512i l0 = _mm512_dpwssd_epi32(first[t], scales4_0, _mm512_set1_epi32(minus8_pair(xb[t]->bsums + 2 * L)));
    const __m512i l1 = _mm512_dpwssd_epi32(second[t], scales4_1, _mm512_set1_epi32(minus8_pair(xb[t]->bsums + 2 * (L + 4))));
    _mm512_store_ps(acc[t][L], _mm512_fmadd_ps(dxw[t], _mm512_cvtepi32_ps(l0), _mm512_load_ps(acc[t][L])));
    _mm512_store_ps(acc[t][L + 4], _mm512_fmadd_ps(dxw[t], _mm512_cvtepi32_ps(l1), _mm512_load_ps(acc[t][L + 4])));
  }
}

// tile16's sums for T >= 4 activation rows, lane pair by lane pair: one unpack of each chunk
// serves all T rows (two-row passes unpack it T / 2 times), with 2T + 4 registers live, not 8T.
template <int T>
SPITE_AVX512 void tile16_by_lane(const std::byte* group_base, std::int64_t nb, const gguf::block_q8_K* x, std::int64_t stride,
                                 std::int64_t out, float* y16) {
  // In memory: each lane's float sum is touched once per super-block.
  alignas(64) float acc[T][8][16] = {};
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = group_base + static_cast<std::size_t>(b) * x16_block;
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk)));
    const x16_block_rows<T> rows(x, stride, b, dw);
    // Group g's scale of its first 16 elements at g, of its second at 8 + g.
    __m512i scales[16];
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i pairs = _mm512_cvtepi8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + x16_scales + 32 * g)));
      scales[g] = x16_pair_half<0>(pairs);
      scales[8 + g] = x16_pair_half<1>(pairs);
    }
    lane_pair_of_rows<0, T>(blk, rows, scales, acc);
    lane_pair_of_rows<1, T>(blk, rows, scales, acc);
    lane_pair_of_rows<2, T>(blk, rows, scales, acc);
    lane_pair_of_rows<3, T>(blk, rows, scales, acc);
  }
  x16_store_lane_sums<T>(acc, y16, out);
}

}  // namespace

std::size_t pack_q6_K_x16(weight& w) {
  return x16_pack<gguf::block_q6_K>(w, x16_block, [](std::uint8_t* dst, const gguf::block_q6_K& blk, int r) {
    std::int8_t q[qkk], sc[16];
    kquants::unpack_q6_K(blk, q, sc);
    std::memcpy(dst + 2 * r, &blk.d, 2);
    for (int s = 0; s < 16; ++s) dst[x16_scales + 32 * (s / 2) + 2 * r + s % 2] = static_cast<std::uint8_t>(sc[s]);
    static_assert(low_offset(8) - low_offset(0) == x16_group && high_offset(0) == low_offset(0) + 4 * 64);
    pack_q6_K_dwords(q, dst + low_offset(0), x16_group, 64, 4 * static_cast<std::size_t>(r));
  });
}

bool matmul_q6_K_x16(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool) {
  // Batches too: two activation rows per pass over a group, each chunk unpacked once for both,
  // beat unpacking rows once per block of activation rows for the row-pair tiles
  // (Q6_K:2048:2048, 128 rows, one thread: 275-291 against 164-167 GFLOP/s; Q4_K_M prefill 512
  // 158 against 145 t/s). Four rows lane by lane: the decode of four sequences (Q6_K:5632:2048,
  // four rows, two threads, from memory: 0.213-0.227 -> 0.181-0.196 ms; TinyLlama Q4_K_M, four
  // sequences on two threads 265-271 -> 279-284 t/s); prefill alike (301 GFLOP/s either way).
  if (n_tokens == 1 && pool.size() <= decode_fetch.q6_k_pairs && avx512_q4_K_tiles() != nullptr) {
    x16_decode_pairs(xq, w.in / qkk, x16_block, w, y, pool, decode_pair, tile16<1>);
    return true;
  }
  return x16_matmul(w, x16_block, xq, n_tokens, y, pool, tile16<2>, tile16<1>, tile16_by_lane<4>, tile16_by_lane<3>);
}

}  // namespace spite::dispatch::cpu::x86

#endif
