// AVX2 Q5_0, Q5_1 and Q4_1 matmuls on weights packed at load time (the contract of
// simd_x86_avx2.cpp: the reference's exact integer sums and float operations, so the same bits).
// References (ref_dot_legacy.cpp): per row and block 8 int32 lanes, lane L the sum of q * x over
// elements 4L..4L+3 (Q5_0: q5 - 16 against Q8_0 activations; Q5_1 / Q4_1: the unsigned quants
// against Q8_1 ones), one fma per block into 8 float lanes with d_w * d_x, the AVX horizontal
// sum at the end; Q5_1 / Q4_1 add their min terms, a scalar chain fma(m_w, s_x, summs) per row.
//
// Unpacked, one row at a time, a block's fifth bits cost a spread of 32 bits into 32 bytes, its
// nibbles a shift and two masks, Q5_0's signed quants two sign flips per activation row, the
// scale a conversion: about 21 vector operations per row and block, which kept decode of these
// types (Q5_0: most of the weights of Qwen2.5-0.5B's Q4_K_M file, whose rows of 896 are no
// multiple of 256) below the memory's pace. Packed, per group of 8 rows and per block (the 8
// blocks' own size):
//   d[8]       f16, row r's at 2r;
//   m[8]       (Q5_1, Q4_1) f16, row r's at 2r;
//   high[32]   (Q5_0, Q5_1) byte 4r + j: the top two bits of row r's u_4..u_7 at bits 0-1, 2-3,
//              4-5 and 6-7 (u_L: its element 4L + j, 0..31);
//   nib[4][32] byte 4r + j of vector i: Q4_1 row r's qs[4i + j] (its elements 4i + j in the low
//              nibble, 16 + 4i + j in the high one); Q5_* u_i | the low three bits of u_{i+4}
//              << 5, so that lanes 0-3 come out with one AND and 4-7 with five operations (24
//              for the block where the file's split of four bits and one took 35).
// Lane L of the 8 rows is then one vector (bytes 4r..4r+3: row r's elements 4L..4L+3): one
// multiply gives lane L of every row, rows as float lanes. The 8 accumulators hold the
// reference's lanes transposed (acc[L], element r: row r's lane L) and are transposed back for
// the reference's horizontal sum once per group; the min terms' chains are one vector, row r's
// in lane r. Q5_0's quants stay unsigned (q5 = q + 16): each lane takes 16 x its activations'
// sum off, made once per activation block.
#include "simd_x86.hpp"

#if defined(__x86_64__)
#include <cstring>
#include <type_traits>

namespace spite::dispatch::cpu::x86 {
namespace {

template <class Block>
using format = legacy_layout<Block, 8>;

// Lane L's quants of the 8 rows of a packed block (Q5_*: 0..31, Q4_1: 0..15). Q5_*: lanes 0-3
// one AND, 4-7 five operations (literal shift counts, as the sanitizer build's -O1 needs; bits a
// 16-bit shift brings from the neighbour byte are masked off; the low bits' by the lanes' own
// 5-bit mask before the shift, which leaves one constant fewer in the registers: one row of
// Q5_0:2048:5632 from the caches, one thread, AVX2 (Zen 3), alternated, 0.367 -> 0.356 ms).
template <class Block>
SPITE_AVX2 inline __m256i lane_quants(const std::byte* blk, __m256i high, int lane) {
  using f = format<Block>;
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + f::nibbles_at + 32 * (lane % 4)));
  if constexpr (!f::fifth_bit) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    return lane < 4 ? _mm256_and_si256(v, m4) : _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
  } else {
    if (lane < 4) return _mm256_and_si256(v, _mm256_set1_epi8(0x1F));
    __m256i top;
    switch (lane) {
      case 4: top = _mm256_slli_epi16(high, 3); break;
      case 5: top = _mm256_slli_epi16(high, 1); break;
      case 6: top = _mm256_srli_epi16(high, 1); break;
      default: top = _mm256_srli_epi16(high, 3); break;
    }
    return _mm256_or_si256(_mm256_srli_epi16(_mm256_andnot_si256(_mm256_set1_epi8(0x1F), v), 5), _mm256_and_si256(top, _mm256_set1_epi8(0x18)));
  }
}

// Per activation row and block, lane L's Q5_0 offset 16 * (x[4L] + ... + x[4L + 3]) at
// 8 * (t * nb + b) + L; empty for the other types.
struct lane_offsets {
  std::vector<std::int32_t> v;
  template <class Batch>
  SPITE_AVX2 lane_offsets(const Batch& xb, std::int64_t nb, std::int64_t n_tokens, bool needed, thread_pool& pool) {
    if (!needed) return;
    v.resize(static_cast<std::size_t>(8 * nb * n_tokens));
    for_each_token(n_tokens, pool, [&](std::int64_t t) SPITE_AVX2 {
      for (std::int64_t b = 0; b < nb; ++b) {
        const std::size_t i = static_cast<std::size_t>(t * nb + b);
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs(i)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(v.data() + 8 * i), dot_lanes(_mm256_set1_epi8(16), x));
      }
    });
  }
};

// The float state of one group against one activation row.
struct group_acc {
  __m256 lanes[8];  // the reference's lane L of row r in element r of lanes[L]
  __m256 summs;     // (Q5_1, Q4_1) row r's min-term chain in lane r
};

// One block: acc.lanes[L] += d_w * d_x * (lane L of the 8 rows), for lane quants q(L); the
// min terms' chains take fma(m_w, s_x, summs).
template <class Block, class LaneQuants>
SPITE_AVX2 inline void block_step(group_acc& acc, __m256 dw, __m256 mw, const typename format<Block>::batch& xb, std::size_t i,
                                  const lane_offsets& off, const LaneQuants& q) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256 ds = _mm256_mul_ps(dw, _mm256_set1_ps(xb.d[i]));
  const std::int8_t* xq = xb.qs(i);
#pragma GCC unroll 8
  for (int lane = 0; lane < 8; ++lane) {
    std::int32_t x4;
    std::memcpy(&x4, xq + 4 * lane, 4);
    __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(q(lane), _mm256_set1_epi32(x4)), ones);
    if constexpr (!format<Block>::mins) sums = _mm256_sub_epi32(sums, _mm256_set1_epi32(off.v[8 * i + static_cast<std::size_t>(lane)]));
    acc.lanes[lane] = _mm256_fmadd_ps(ds, _mm256_cvtepi32_ps(sums), acc.lanes[lane]);
  }
  if constexpr (format<Block>::mins) {
    acc.summs = _mm256_fmadd_ps(mw, _mm256_set1_ps(xb.s[i]), acc.summs);
  }
}

template <class Block>
SPITE_AVX2 inline void store_rows(const group_acc& acc, float* y8) {
  alignas(32) float summs[8];
  _mm256_store_ps(summs, acc.summs);
  store_lane_rows(acc.lanes, format<Block>::mins ? summs : nullptr, y8);
}

SPITE_AVX2 inline void clear(group_acc& acc) {
#pragma GCC unroll 8
  for (auto& a : acc.lanes) a = _mm256_setzero_ps();
  acc.summs = _mm256_setzero_ps();
}

SPITE_AVX2 inline __m256 halves(const std::byte* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// Activation row t against S groups, each block unpacked in registers where it is used (S = 2:
// decode's two streams in step, by_group_pairs, which this core fetches from memory faster than
// one). With `fetch` each stream fetches the block about 4 KB ahead.
template <class Block, int S>
SPITE_AVX2 void packed_rows(const std::byte* const* groups, std::int64_t nb, const typename format<Block>::batch& xb, const lane_offsets& off,
                            std::int64_t t, bool fetch, float* const* y8) {
  using f = format<Block>;
  constexpr std::size_t ahead = (4096 / f::bytes) * f::bytes;
  group_acc acc[S];
  for (auto& a : acc) clear(a);
  for (std::int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 2
    for (int s = 0; s < S; ++s) {
      const std::byte* blk = groups[s] + static_cast<std::size_t>(b) * f::bytes;
      if (fetch) {
        for (std::size_t o = 0; o < f::bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + ahead + o), _MM_HINT_T0);
      }
      const __m256i qh = f::fifth_bit ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + f::qh_at)) : _mm256_setzero_si256();
      const __m256 mw = f::mins ? halves(blk + f::m_at) : _mm256_setzero_ps();
      block_step<Block>(acc[s], halves(blk), mw, xb, static_cast<std::size_t>(t * nb + b), off,
                        [&](int lane) SPITE_AVX2 { return lane_quants<Block>(blk, qh, lane); });
    }
  }
  for (int s = 0; s < S; ++s) store_rows<Block>(acc[s], y8[s]);
}

// Batches: a group's lane quants and scales unpacked once, then read for each activation row.
struct unpacked_group {
  aligned_vector<std::uint8_t> q;  // block b, lane L at 32 * (8b + L)
  aligned_vector<float> dm;        // block b: d of rows 0..7 at 16b, m at 16b + 8
};

template <class Block>
SPITE_AVX2 void unpack_group(const std::byte* group, std::int64_t nb, unpacked_group& u) {
  using f = format<Block>;
  u.q.resize(static_cast<std::size_t>(256 * nb));
  u.dm.resize(static_cast<std::size_t>(16 * nb));
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = group + static_cast<std::size_t>(b) * f::bytes;
    const __m256i qh = f::fifth_bit ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + f::qh_at)) : _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int lane = 0; lane < 8; ++lane) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(u.q.data() + 32 * (8 * b + lane)), lane_quants<Block>(blk, qh, lane));
    }
    _mm256_store_ps(u.dm.data() + 16 * b, halves(blk));
    if constexpr (f::mins) _mm256_store_ps(u.dm.data() + 16 * b + 8, halves(blk + f::m_at));
  }
}

// With `ahead`, the next group is fetched meanwhile (a batch's first activation row: without it
// the few activation rows of concurrent sequences waited on each group's unpacking).
template <class Block>
SPITE_AVX2 void unpacked_row(const unpacked_group& u, std::int64_t nb, const typename format<Block>::batch& xb, const lane_offsets& off,
                             std::int64_t t, const next_group_prefetch* ahead, float* y8) {
  group_acc acc;
  clear(acc);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (ahead != nullptr) ahead->step(b);
    const std::uint8_t* q = u.q.data() + 256 * b;
    const __m256 mw = format<Block>::mins ? _mm256_load_ps(u.dm.data() + 16 * b + 8) : _mm256_setzero_ps();
    block_step<Block>(acc, _mm256_load_ps(u.dm.data() + 16 * b), mw, xb, static_cast<std::size_t>(t * nb + b), off,
                      [&](int lane) SPITE_AVX2 { return _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32 * lane)); });
  }
  store_rows<Block>(acc, y8);
}

template <class Block>
void matmul_packed(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  using f = format<Block>;
  const std::int64_t nb = w.in / qk0;
  const typename f::batch xb = f::quantize(x, w.in, n_tokens, pool);
  const lane_offsets off(xb, nb, n_tokens, !f::mins, pool);
  const std::size_t group_bytes = static_cast<std::size_t>(nb) * f::bytes;
  // Per activation row and block: its quants, scale (and sum, or Q5_0's lane offsets).
  const std::size_t x_row_bytes = static_cast<std::size_t>(nb) * (qk0 + 2 * sizeof(float) + 32);
  // Up to this many activation rows each unpacks the group in registers itself, where a buffer
  // of the group's unpacked lanes (written once, read per row) cost more: from the caches
  // (`--matmul T:2048:2048 -t 1`, alternated), Q5_0 2 rows 312-315 -> 293 us, Q5_1 309-311 ->
  // 278, Q4_1 303-304 -> 203 (3, 4, 5 rows 394 / 480 / 568 -> 301 / 399 / 498; 8 alike; 64
  // 5943 against 6381), while Q5_0 3 rows took 408 against 436 with the buffer. Q5_0 2 rows
  // from memory, two threads (`--matmul Q5_0:896:4864 --cold -t 2`): 178-209 -> 163-190 us.
  // Since Q5_*'s cheaper unpacking (Zen 3) 3 rows in registers too: Q5_0:2048:2048 456 -> 398
  // us, Q5_1 417 -> 375, Q5_0:896:4864 from memory on two threads 233 -> 220; 4 rows alike.
  constexpr std::int64_t packed_rows_up_to = f::fifth_bit ? 3 : 7;
  const auto group_at = [&](std::int64_t g) { return w.packed + static_cast<std::size_t>(g) * group_bytes; };
  // Decode: Q4_1 as two streams; Q5_* as one, whose two groups' 16 float accumulators spilled
  // (Q5_0:2048:5632, one thread, from the caches, alternated: 0.380 -> 0.456 ms; Q4_1 0.284 ->
  // 0.267, from memory 0.334 -> 0.293).
  if (n_tokens == 1 && f::fifth_bit) {
    return by_groups_and_token_blocks(w.out / 8, 1, 1, pool, [&](std::int64_t g, std::int64_t, std::int64_t) {
      const std::byte* group = group_at(g);
      float* y8 = y + 8 * g;
      packed_rows<Block, 1>(&group, nb, xb, off, 0, true, &y8);
    });
  }
  if (n_tokens == 1) {
    return by_group_pairs(
        w.out / 8, 1, y, pool, group_at,
        [&](const std::byte* const* both, std::int64_t, float* const* ys) { packed_rows<Block, 2>(both, nb, xb, off, 0, true, ys); },
        [&](const std::byte* group, std::int64_t, float* y8) { packed_rows<Block, 1>(&group, nb, xb, off, 0, true, &y8); });
  }
  by_groups_and_token_blocks(w.out / 8, n_tokens, token_block(x_row_bytes), pool, [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
    const std::byte* group = group_at(g);
    if (t1 - t0 <= packed_rows_up_to) {
      for (std::int64_t t = t0; t < t1; ++t) {
        float* y8 = y + t * w.out + 8 * g;
        packed_rows<Block, 1>(&group, nb, xb, off, t, t == t0, &y8);
      }
      return;
    }
    thread_local unpacked_group u;
    unpack_group<Block>(group, nb, u);
    const next_group_prefetch ahead(group + group_bytes, group_bytes, nb);
    const bool last = 8 * g + 8 >= w.out;
    for (std::int64_t t = t0; t < t1; ++t) {
      unpacked_row<Block>(u, nb, xb, off, t, t == 0 && !last ? &ahead : nullptr, y + t * w.out + 8 * g);
    }
  });
}

template <class Block>
std::size_t pack(weight& w) {
  using f = format<Block>;
  return pack_row_groups<Block>(w, f::bytes, [](std::byte* dst, const Block& blk, int r) {
    std::memcpy(dst + 2 * r, &blk.d, 2);
    if constexpr (f::mins) std::memcpy(dst + f::m_at + 2 * r, &blk.m, 2);
    if constexpr (f::fifth_bit) {
      std::uint32_t qh;
      std::memcpy(&qh, blk.qh, 4);
      // Element e: its nibble (qs[e] low, or qs[e - 16] high) and bit e of qh.
      const auto u = [&](int e) { return static_cast<unsigned>((e < 16 ? blk.qs[e] & 0xF : blk.qs[e - 16] >> 4) | ((qh >> e) & 1u) << 4); };
      for (int j = 0; j < 4; ++j) {
        const std::size_t at = 4 * static_cast<std::size_t>(r) + static_cast<std::size_t>(j);
        dst[f::qh_at + at] = static_cast<std::byte>(u(16 + j) >> 3 | (u(20 + j) >> 3) << 2 | (u(24 + j) >> 3) << 4 | (u(28 + j) >> 3) << 6);
        for (int i = 0; i < 4; ++i) dst[f::nibbles_at + 32 * static_cast<std::size_t>(i) + at] = static_cast<std::byte>(u(4 * i + j) | (u(16 + 4 * i + j) & 7u) << 5);
      }
    } else {
      for (int i = 0; i < 4; ++i) std::memcpy(dst + f::nibbles_at + 32 * i + 4 * r, blk.qs + 4 * i, 4);
    }
  });
}

}  // namespace

std::size_t pack_q5_0(weight& w) { return pack<gguf::block_q5_0>(w); }
std::size_t pack_q5_1(weight& w) { return pack<gguf::block_q5_1>(w); }
std::size_t pack_q4_1(weight& w) { return pack<gguf::block_q4_1>(w); }

void matmul_q5_0_packed(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  matmul_packed<gguf::block_q5_0>(w, x, n_tokens, y, pool);
}
void matmul_q5_1_packed(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  matmul_packed<gguf::block_q5_1>(w, x, n_tokens, y, pool);
}
void matmul_q4_1_packed(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  matmul_packed<gguf::block_q4_1>(w, x, n_tokens, y, pool);
}

}  // namespace spite::dispatch::cpu::x86

#endif
