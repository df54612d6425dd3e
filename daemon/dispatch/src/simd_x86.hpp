// Shared pieces of the x86 SIMD kernels (simd_x86_*.cpp): the target attributes, lane
// helpers, the activation batch of the Q8_0 family, the load-time packed layouts and the
// per-file entry points (how the work is split over the threads: simd_x86_split.hpp; software
// prefetch: simd_x86_prefetch.hpp).
// Internal to spite::dispatch; x86-64 only.
#pragma once

#include "ref_quant.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "aligned_buffer.hpp"
#include "load_workers.hpp"
#include "simd_x86_pack.hpp"
#include "simd_x86_split.hpp"
#include "spite/core/half.hpp"

// Functions carry target attributes instead of their files a -mavx2 flag: header code
// (std::vector, ...) instantiated in those files must stay baseline code, as the linker may keep
// that copy for the whole program.
#define SPITE_AVX2 __attribute__((target("avx2,fma,f16c")))
// AVX-VNNI: VPDPBUSD on 256-bit vectors (Intel's client cores from Alder Lake on, Zen 5).
#define SPITE_AVX_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
// AVX-512 VNNI with VBMI (VPERMB and its kin: Intel from Ice Lake on, AMD from Zen 4 on; not
// Skylake-X or Cascade Lake).
#define SPITE_AVX512_VBMI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))

#include "simd_x86_prefetch.hpp"

namespace spite::dispatch::cpu::x86 {

constexpr int qk0 = gguf::qk_legacy;
constexpr int qkk = gguf::qk_k;

// ---- building blocks

// Eight vectors of eight int32 partial sums to one vector whose lane r is the total of vector r.
SPITE_AVX2 inline __m256i transpose_sum8(const __m256i* v) {
  const __m256i s01 = _mm256_hadd_epi32(v[0], v[1]);
  const __m256i s23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i s45 = _mm256_hadd_epi32(v[4], v[5]);
  const __m256i s67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i s0123 = _mm256_hadd_epi32(s01, s23);  // [r0..r3 low halves | r0..r3 high halves]
  const __m256i s4567 = _mm256_hadd_epi32(s45, s67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(s0123, s4567, 0x20),
                          _mm256_permute2x128_si256(s0123, s4567, 0x31));
}

// Unsigned bytes times signed bytes: int32 lane j holds the sum of products 4j..4j+3 (exact:
// the int16 pair sums cannot saturate for quants below 64 or |weights| <= 128 with |x| <= 127).
SPITE_AVX2 inline __m256i dot_lanes(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// The same, each int16 pair sum multiplied by `scales` first.
SPITE_AVX2 inline __m256i dot_lanes_scaled(__m256i u, __m256i s, __m256i scales) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scales);
}

// 16 int8 scales widened to int16 once per block; of(a, b) is [s[a] x 8 | s[b] x 8] (a and b
// both below 8 or both from 8) with one in-lane byte shuffle, for madd with a group's pair sums.
struct scale_pairs16 {
  __m256i all;          // s[0..15]
  __m256i first, last;  // s[0..7], s[8..15] in both halves
  SPITE_AVX2 explicit scale_pairs16(__m128i s8)
      : all(_mm256_cvtepi8_epi16(s8)),
        first(_mm256_permute2x128_si256(all, all, 0x00)),
        last(_mm256_permute2x128_si256(all, all, 0x11)) {}
  SPITE_AVX2 __m256i of(int a, int b) const {
    const auto lo = static_cast<char>(2 * (a % 8)), hi = static_cast<char>(2 * (b % 8));
    const __m256i pick = _mm256_setr_epi8(lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1,
                                          lo, lo + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1,
                                          hi, hi + 1, hi, hi + 1);
    return _mm256_shuffle_epi8(a < 8 ? first : last, pick);
  }
};

// Bit `from` of every byte moved to bit `to` in one 16-bit shift (mask the result with 1 << to:
// the bits a shift carries across a byte boundary land elsewhere).
SPITE_AVX2 inline __m256i bit_to(__m256i v, int from, int to) {
  if (from < to) return _mm256_slli_epi16(v, to - from);
  return from == to ? v : _mm256_srli_epi16(v, from - to);
}

// v[i] = column i of the 8 x 8 matrix of dwords whose row j was v[j].
SPITE_AVX2 inline void transpose8_epi32(__m256i* v) {
  __m256i t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
    v[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
  }
}

// The 32 quants of a Q4_0 block (0..15, element order: low nibbles, then high nibbles).
SPITE_AVX2 inline __m256i nibbles32(const std::uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}


// 0xFF in byte i where bit i of `bits` is set.
SPITE_AVX2 inline __m256i bytes_from_bits(std::uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i others = _mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));  // all but bit i % 8
  return _mm256_cmpeq_epi8(others, _mm256_set1_epi64x(-1));
}

// The 32 unsigned quants of a Q5_0 / Q5_1 block in element order (low nibbles, then high), the
// fifth bit from qh.
template <class Block>
SPITE_AVX2 inline __m256i quants5(const Block& b) {
  std::uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  return _mm256_or_si256(nibbles32(b.qs), _mm256_and_si256(bytes_from_bits(qh), _mm256_set1_epi8(0x10)));
}

// Signed quants q times the activations as int16 pair sums, through |q| and x with q's signs
// (maddubs takes one unsigned operand). Exact as long as the activation quants lie in
// [-127, 127] (quantize_act_q8_K's rule): -128 would not survive the sign flip.
SPITE_AVX2 inline __m256i signed_pairs(__m256i q, __m256i abs_q, __m256i x) {
  return _mm256_maddubs_epi16(abs_q, _mm256_sign_epi8(x, q));
}

// The 8 int32 lanes of one super-block of R unpacked K-quant rows for K activation rows (row
// r, activation row k in lanes[r * K + k]): quants q (256) times the activations, int16 pair sums
// times the group's scales (16 int16 per 32-element group), lane L collecting elements
// 4L..4L+3 of every group. The quants are unsigned, or with Signed (Q3_K's -4..3) signed,
// multiplied through their magnitudes (signed_pairs): one multiply per pair sum instead of
// (q + 4) x and 4 x. Two rows share each activation load, which halves what a batch reads
// from L2 per product.
template <int R, int K, bool Signed = false>
SPITE_AVX2 inline void super_block_lanes(const std::uint8_t* const* q, const std::int16_t* const* scales,
                                         const gguf::block_q8_K* const* x, __m256i* lanes) {
#pragma GCC unroll 8
  for (int i = 0; i < R * K; ++i) lanes[i] = _mm256_setzero_si256();
  for (int g = 0; g < 8; ++g) {
    __m256i v[R], abs_v[R];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      v[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[r] + 32 * g));
      abs_v[r] = Signed ? _mm256_abs_epi8(v[r]) : v[r];
    }
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[k]->qs + 32 * g));
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
        const __m256i pairs = Signed ? signed_pairs(v[r], abs_v[r], xv) : _mm256_maddubs_epi16(v[r], xv);
        const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales[r] + 16 * g));
        lanes[r * K + k] = _mm256_add_epi32(lanes[r * K + k], _mm256_madd_epi16(pairs, s));
        // Keeps GCC from re-associating the 8 groups' sums into a tree whose products it spills.
        if constexpr (R * K > 1) __asm__("" : "+x"(lanes[r * K + k]));
      }
    }
  }
}

SPITE_AVX2 inline __m128i insert_half(__m128i h, gguf::half_bits v, int r) {
  switch (r) {
    case 0: return _mm_insert_epi16(h, v, 0);
    case 1: return _mm_insert_epi16(h, v, 1);
    case 2: return _mm_insert_epi16(h, v, 2);
    case 3: return _mm_insert_epi16(h, v, 3);
    case 4: return _mm_insert_epi16(h, v, 4);
    case 5: return _mm_insert_epi16(h, v, 5);
    case 6: return _mm_insert_epi16(h, v, 6);
    default: return _mm_insert_epi16(h, v, 7);
  }
}

// Element k of each 128-bit half, broadcast within the half. A switch, like insert_half: the
// shuffle takes an immediate, which a loop index is only once the loop is unrolled (-O2), and
// builds without unrolling (Debug, the sanitizer build at -O1) must compile too.
SPITE_AVX2 inline __m256 lane_broadcast(__m256 v, int k) {
  switch (k) {
    case 0: return _mm256_shuffle_ps(v, v, 0x00);
    case 1: return _mm256_shuffle_ps(v, v, 0x55);
    case 2: return _mm256_shuffle_ps(v, v, 0xaa);
    default: return _mm256_shuffle_ps(v, v, 0xff);
  }
}

// reduce8's order in registers: taking the lanes' address would keep a tile's accumulators in
// memory, and GCC then stores every one of them on each pass of the tile's loop. For the same
// reason tiles reduce their accumulator arrays in fully unrolled loops (#pragma GCC unroll): an
// array indexed in a rolled loop after the tile's loop lives in memory during it, too.
SPITE_AVX2 inline float reduce8_vec(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // a_i + a_i+4
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));  // (a0 + a4) + (a2 + a6), (a1 + a5) + (a3 + a7)
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// The lane-packed layouts (simd_x86_legacy_packed.cpp, simd_x86_q5k_packed.cpp) accumulate the
// reference's per-row lanes transposed: acc[L], element r, is row r's lane L. y8[r] = the
// reference's horizontal sum of row r's lanes, plus mins[r] where the type has a min term (with
// none, nothing is added: -0 stays -0).
SPITE_AVX2 inline void store_lane_rows(const __m256* acc, const float* mins, float* y8) {
  __m256i rows[8];
#pragma GCC unroll 8
  for (int lane = 0; lane < 8; ++lane) rows[lane] = _mm256_castps_si256(acc[lane]);
  transpose8_epi32(rows);  // rows[r]: row r's 8 lanes
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
    const float sum = reduce8_vec(_mm256_castsi256_ps(rows[r]));
    y8[r] = mins != nullptr ? sum + mins[r] : sum;
  }
}

// The same from lanes kept in memory (acc[lane][row]).
SPITE_AVX2 inline void store_lanes_from(const float (&acc)[8][8], float* y8) {
  __m256 lanes[8];
#pragma GCC unroll 8
  for (int l = 0; l < 8; ++l) lanes[l] = _mm256_load_ps(acc[l]);
  store_lane_rows(lanes, nullptr, y8);
}

// The end of an 8-row tile of K activation rows whose float lanes were kept in memory
// (acc[k][lane][row]): each activation row's 8 rows to y8 + (t0 + k) * out.
template <int K>
SPITE_AVX2 inline void store_tile_lanes(const float (&acc)[K][8][8], std::int64_t t0, std::int64_t out, float* y8) {
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) store_lanes_from(acc[k], y8 + (t0 + k) * out);
}

// The R rows of a decode tile in the file's layout: o, o + 1, ..., or with Split R / 2 from o
// beside R / 2 from o2 (two regions read in step, by_row_pair_streams); and the rows after
// each region, fetched at the tile's pace (`steps` shares; `address(row)` is where a row starts).
template <int R, bool Split>
struct tile_rows {
  static constexpr int run = Split ? R / 2 : R;  // rows in one region
  std::int64_t at[R];
  next_group_prefetch ahead, ahead2;
  template <class Address>
  tile_rows(std::int64_t o, std::int64_t o2, const Address& address, std::size_t row_bytes, std::int64_t steps)
      : ahead(address(o + run), run * row_bytes, steps), ahead2(address(o2 + run), run * row_bytes, steps) {
    for (int r = 0; r < R; ++r) at[r] = r < run ? o + r : o2 + r - run;
  }
  SPITE_AVX2 void step(std::int64_t share) const {
    ahead.step(share);
    if constexpr (Split) ahead2.step(share);
  }
};

// The sum of the 8 int32 lanes (exact while it fits).
SPITE_AVX2 inline int sum_epi32(__m256i s) {
  const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  const __m128i s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
  return _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 1)));
}

// Activation block scales as floats and the Q4_0 offset sums, once per batch.
// quantize_act_q8_0 on one block, plus the block's quant sum: the same max, the same division
// and multiplication, rounding to nearest even as nearbyint does in the default mode.
SPITE_AVX2 inline int quantize_block_q8_0(const float* x, std::int8_t* qs, float& d) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_loadu_ps(x + 8 * k);
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float max = _mm_cvtss_f32(m4);
  const float id = max != 0.0f ? 127.f / max : 0.0f;
  d = _cvtsh_ss(fp32_to_fp16(max / 127.f));
  const __m256 scale = _mm256_set1_ps(id);
  __m256i q[4];
  for (int k = 0; k < 4; ++k) {
    q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  // int32 -> int8 (|q| <= 127, no saturation), then undo the pack's lane interleaving.
  const __m256i q16a = _mm256_packs_epi32(q[0], q[1]), q16b = _mm256_packs_epi32(q[2], q[3]);
  const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16a, q16b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), q8);
  return sum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
}

// A batch of activation rows quantized as Q8_0 blocks: the quants of block i (row-major over
// rows and blocks) at 32 * i in cache-aligned storage, so no 32-byte load of them straddles
// two cache lines (a block_q8_0 array would put them 34 bytes apart); the scales as floats and
// the quant sums (Q4_0's offset term) beside them.
// The two f16 scales of a paired 2-row tile's blocks as [d0 x 4 | d1 x 4]: times the 4
// activation rows' scales [x0..x3 | x0..x3], the tile's 8 scale products in one multiply.
SPITE_AVX2 inline __m256 row_pair_scales(gguf::half_bits d0, gguf::half_bits d1) {
  const __m128i dup = _mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3);
  const auto h = static_cast<int>(static_cast<std::uint32_t>(d0) | static_cast<std::uint32_t>(d1) << 16);
  return _mm256_cvtph_ps(_mm_shuffle_epi8(_mm_cvtsi32_si128(h), dup));
}

struct q8_0_batch {
  aligned_vector<std::int8_t> quants;
  std::vector<float> d;
  std::vector<int> sum8;  // 8 x each block's quant sum: the term of Q4_0's offset of 8
  SPITE_AVX2 q8_0_batch(const float* x, std::int64_t in, std::int64_t n_tokens, thread_pool& pool) : tokens(n_tokens) {
    const std::int64_t nb = in / qk0;
    const auto n = static_cast<std::size_t>(nb * n_tokens);
    quants.resize(n * qk0);
    d.resize(n);
    sum8.resize(n);
    for_each_token(n_tokens, pool, [&](std::int64_t t) SPITE_AVX2 {
      for (std::int64_t b = 0; b < nb; ++b) {
        const std::size_t i = static_cast<std::size_t>(t * nb + b);
        sum8[i] = 8 * quantize_block_q8_0(x + t * in + b * qk0, quants.data() + qk0 * i, d[i]);
      }
    });
    if (n_tokens < 4) return;  // only the 4-row tiles read d_by_block
    d_by_block.resize(n);
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      for (std::int64_t b = 0; b < nb; ++b) d_by_block[static_cast<std::size_t>(b * n_tokens + t)] = d[static_cast<std::size_t>(t * nb + b)];
    }
  }
  std::int64_t tokens;
  // The scales again, block-major: block b of activation row t at b * tokens + t, so that a
  // tile's 4 activation rows take theirs in one load.
  std::vector<float> d_by_block;
  const std::int8_t* qs(std::size_t i) const noexcept { return quants.data() + qk0 * i; }
  // Bytes of one activation row of nb blocks, as the kernels read it.
  static std::size_t row_bytes(std::int64_t nb) noexcept { return static_cast<std::size_t>(nb) * (qk0 + sizeof(float) + sizeof(int)); }
};

// Q8_1 activation blocks with their quants in cache-aligned storage, 32 bytes apart (as
// q8_0_batch), and the scales and sums as floats; the sums also block-major (s_by_block[b *
// n_tokens + t]), so a tile's activation rows' sums of one block are one load.
struct q8_1_batch {
  aligned_vector<std::int8_t> quants;
  std::vector<float> d, s, s_by_block;
  std::int64_t n_tokens;
  q8_1_batch(const float* x, std::int64_t in, std::int64_t tokens) : n_tokens(tokens) {
    const std::int64_t nb = in / qk0;
    const auto n = static_cast<std::size_t>(nb * n_tokens);
    quants.resize(n * qk0);
    d.resize(n);
    s.resize(n);
    s_by_block.resize(n);
    std::vector<gguf::block_q8_1> row(static_cast<std::size_t>(nb));
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      quantize_act_q8_1(x + t * in, row.data(), in);
      for (std::int64_t b = 0; b < nb; ++b) {
        const std::size_t i = static_cast<std::size_t>(t * nb + b);
        std::memcpy(quants.data() + qk0 * i, row[static_cast<std::size_t>(b)].qs, qk0);
        d[i] = fp16_to_fp32(row[static_cast<std::size_t>(b)].d);
        s[i] = fp16_to_fp32(row[static_cast<std::size_t>(b)].s);
        s_by_block[static_cast<std::size_t>(b * n_tokens + t)] = s[i];
      }
    }
  }
  const std::int8_t* qs(std::size_t i) const noexcept { return quants.data() + qk0 * i; }
};

struct rows8_buffer {
  std::vector<std::uint8_t> q;  // row r at r * in, element order
  std::vector<float> d;         // block b, row r at 8 * b + r
  std::vector<float> dmin;      // (Q4_K) as d
  std::vector<std::int16_t> sc;  // (Q4_K) row r's sub-block scales at r * in / 32
  std::vector<std::int32_t> mins;  // (Q4_K) block b, sub-block g, row r at 64 * b + 8 * g + r
};

inline std::int32_t load_u32(const std::int8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The 8 scales (bytes 0..7) and 8 mins (bytes 8..15) of a Q4_K super-block from its 12 packed
// bytes: j < 4 in the low 6 bits of bytes j / j + 4; j >= 4 the low / high nibble of byte j + 4
// with the top two bits of bytes j - 4 / j above it.
inline void scales_mins_k4(const std::uint8_t* packed, std::uint32_t* out) {
  std::uint32_t u[3];
  std::memcpy(u, packed, sizeof u);
  constexpr std::uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
  out[0] = u[0] & low6;
  out[1] = (u[2] & low4) | (((u[0] >> 6) & low2) << 4);
  out[2] = u[1] & low6;
  out[3] = ((u[2] >> 4) & low4) | (((u[1] >> 6) & low2) << 4);
}

// ---- load-time packed layouts (packing itself, plain code: simd_x86_pack.hpp)

// Int16 k (0 or 1) of each dword of `pairs` in both its halves: one of a row's two scales for
// VPMADDWD / VPDPWSSD against pair sums (the 8-row K-quant layouts).
SPITE_AVX2 inline __m256i pair_half(__m256i pairs, int k) {
  const __m256i pick = k == 0 ? _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9,
                                                 12, 13, 12, 13)
                              : _mm256_setr_epi8(2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15, 2, 3, 2, 3, 6, 7, 6, 7, 10,
                                                 11, 10, 11, 14, 15, 14, 15);
  return _mm256_shuffle_epi8(pairs, pick);
}

// Q4_K, per group of 8 rows and super-block:
//   d[8], dmin[8] (f16); scales[8 sub-blocks][8 rows] (u8); mins[4 pairs][8 rows][2] (u8);
//   quants[4][8 chunks] of 32 bytes: bytes 4r..4r+3 of chunk c of j are row r's
//   qs[32j + 4c .. 32j + 4c + 3] (sub-block 2j in the low nibbles, 2j + 1 in the high ones).
// Each row's sums land in its own lanes, as in the reference's repacked kernel.
constexpr std::size_t q4_K_packed_block = 32 + 64 + 64 + 1024;
constexpr std::size_t q4_K_packed_scales = 32, q4_K_packed_mins = 96, q4_K_packed_quants = 160;

// One group of 8 packed rows against activation rows t0.. (1 or 4 of them): rows below `ng`
// with the GEMM's float order, the others with the GEMV's.
// Chunk c of sub-block pair j of a packed Q4_K block: the 8 rows' 4 quants of sub-block 2j
// (lo) and of 2j + 1 (hi), a row per 32-bit lane.
SPITE_AVX2 inline void q4_K_packed_chunk(const std::byte* blk, int j, int c, __m256i& lo, __m256i& hi) {
  const __m256i m = _mm256_set1_epi8(0x0F);
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + q4_K_packed_quants + 256 * j + 32 * c));
  lo = _mm256_and_si256(v, m);
  hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
}

// The float side of the packed Q4_K tiles, shared by their AVX2 and AVX-512 versions. One
// activation row's sums for sub-block pair j (rows as lanes, scales applied): GEMM rows add
// them with one fma each at once, GEMV rows collect them until the super-block ends.
struct q4_K_row_acc {
  __m256 acc, acc_min;
  __m256i is, ms;
};

// What a super-block's epilogue needs of one activation row, made once per block: the sums of
// its activation sums for each sub-block pair (sub-blocks 2j and 2j + 1 as one int16 pair for
// madd; the int16 additions wrap as the reference's 16-bit casts do) and the scale products.
struct q4_K_x_terms {
  alignas(32) std::int32_t pair_sums[8];  // pair j at (j & 1) + 4 * (j >> 1)
  __m256 ds, dm;                          // d_w * d_x, dmin_w * d_x (rows as lanes)
};

SPITE_AVX2 inline void q4_K_terms(const gguf::block_q8_K& x, __m256 dw, __m256 dmw, q4_K_x_terms& t) {
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums));
  _mm256_store_si256(reinterpret_cast<__m256i*>(t.pair_sums), _mm256_hadd_epi16(bs, bs));
  const __m256 xd = _mm256_set1_ps(x.d);
  t.ds = _mm256_mul_ps(dw, xd);
  t.dm = _mm256_mul_ps(dmw, xd);
}

SPITE_AVX2 inline void q4_K_add_pair(q4_K_row_acc& a, bool gemm, __m256i pair, __m256i mins, const q4_K_x_terms& t, int j) {
  const __m256i pair_min = _mm256_madd_epi16(mins, _mm256_set1_epi32(t.pair_sums[(j & 1) + 4 * (j >> 1)]));
  if (gemm) {
    a.acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pair), t.ds, a.acc);
    a.acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pair_min), t.dm, a.acc_min);
  } else {
    a.is = _mm256_add_epi32(a.is, pair);
    a.ms = _mm256_add_epi32(a.ms, pair_min);
  }
}

// At the end of a super-block: a GEMV row's one fma; then its integer sums start again.
SPITE_AVX2 inline void q4_K_end_block(q4_K_row_acc& a, bool gemm, const q4_K_x_terms& t) {
  if (!gemm) {
    a.acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a.is), t.ds, a.acc);
    a.acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a.ms), t.dm, a.acc_min);
  }
  a.is = a.ms = _mm256_setzero_si256();
}

// The GEMM rows' per-block terms of the packed Q4_K tiles for 4 activation rows x[0..3]: each
// row's d_w * d_x (ds), dmin_w * d_x (dm) and activation sums per sub-block pair (as
// q4_K_terms lays them out, each then broadcast by a load); add_min(j) adds pair j's min terms
// to acc_min, called in pair order (the order q4_K_add_pair gives them).
struct q4_K_gemm4_terms {
  __m256 ds[4], dm[4];
  alignas(32) std::int32_t pair_sums[4][8];
  SPITE_AVX2 q4_K_gemm4_terms(const std::byte* blk, const gguf::block_q8_K* const* x) {
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16)));
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256 xd = _mm256_set1_ps(x[k]->d);
      ds[k] = _mm256_mul_ps(dw, xd);
      dm[k] = _mm256_mul_ps(dmw, xd);
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[k]->bsums));
      _mm256_store_si256(reinterpret_cast<__m256i*>(pair_sums[k]), _mm256_hadd_epi16(bs, bs));
    }
  }
  SPITE_AVX2 void add_min(const std::byte* blk, int j, __m256* acc_min) const {
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + q4_K_packed_mins + 16 * j)));
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i pm = _mm256_madd_epi16(mins, _mm256_set1_epi32(pair_sums[k][(j & 1) + 4 * (j >> 1)]));
      acc_min[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pm), dm[k], acc_min[k]);
    }
  }
};

// The u8 scales of two sub-blocks (one per row, 8 bytes each) as int16 pairs (s, s) per int32
// lane, row r in lane r, for madd: one load and one byte shuffle per sub-block (packed Q4_K
// and Q2_K).
struct row_scale_pairs {
  __m256i lo, hi;
  SPITE_AVX2 explicit row_scale_pairs(const std::uint8_t* s)
      : row_scale_pairs(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s))) {}
  SPITE_AVX2 explicit row_scale_pairs(__m128i bytes) {
    alignas(32) static constexpr std::int8_t pick_lo[32] = {0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1,
                                                            4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1};
    alignas(32) static constexpr std::int8_t pick_hi[32] = {8, -1, 8, -1, 9, -1, 9, -1, 10, -1, 10, -1, 11, -1, 11, -1,
                                                            12, -1, 12, -1, 13, -1, 13, -1, 14, -1, 14, -1, 15, -1, 15, -1};
    const __m256i v = _mm256_broadcastsi128_si256(bytes);
    lo = _mm256_shuffle_epi8(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(pick_lo)));
    hi = _mm256_shuffle_epi8(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(pick_hi)));
  }
};

// Q2_K, per group of 8 rows and super-block (672 bytes, as the 8 rows' blocks):
//   d[8], dmin[8] (f16);
//   scales[8 pairs][8 rows][2] at 32 + 16 P + 2 r + k: row r's scale byte of sub-block 2P + k
//                   (scale in the low nibble, min in the high one);
//   quants[8 pairs][2] of 32 bytes at 160 + 64 P + 32 v: bits 2j..2j+1 of byte 4r + i are row
//                   r's element 32 P + 16 (i / 2) + 2 c + i % 2 of the block, chunk c = 4v + j
//                   holding elements 2c, 2c + 1 of sub-block 2P (i = 0, 1) and of 2P + 1 (i = 2, 3).
// A vector gives 4 chunks (8 rows x 4 elements) by one shift and mask each.
constexpr std::size_t q2_K_packed_block = 32 + 128 + 512;
constexpr std::size_t q2_K_packed_scales = 32, q2_K_packed_quants = 160;

using q4_K_tile_fn = void (*)(const std::byte* group, std::int64_t nb, const gguf::block_q8_K* xq, std::int64_t t0,
                              std::int64_t ng, std::int64_t out, float* y);
// Four activation rows that all take the GEMM's float order (prefill, decode of 4 sequences).
using q4_K_gemm_fn = void (*)(const std::byte* group, std::int64_t nb, const gguf::block_q8_K* xq, std::int64_t t0,
                              std::int64_t out, float* y);
// Two groups in step against activation row t0 (two streams, by_group_pairs).
using q4_K_pair_fn = void (*)(const std::byte* const* groups, std::int64_t nb, const gguf::block_q8_K* xq, std::int64_t t0,
                              std::int64_t ng, std::int64_t out, float* const* y);
struct q4_K_tiles {
  q4_K_tile_fn one, four;
  q4_K_gemm_fn gemm4;
  q4_K_pair_fn pair = nullptr;  // null: decode by groups with `one`
  // Two and three activation rows against two groups in one pass (null: a pass per row).
  q4_K_pair_fn pair2 = nullptr, pair3 = nullptr;
  // Two and three activation rows against one group: a batch's rows after its 4-row tiles (null:
  // a pass per row).
  q4_K_tile_fn two = nullptr, three = nullptr;
};

// A Q6_K row unpacked for batches (simd_x86_kquants.cpp unpack_q6_K_row): quants in element
// order (0..63), int16 scales per 32-element group ([sc[2g] x 8 | sc[2g + 1] x 8], the int16
// pairs of madd), each block's 16 scales again for the -32 offset, the block scales as floats.
struct q6_K_row {
  std::vector<std::uint8_t> q;    // element order, 0..63
  std::vector<std::int16_t> scales;   // 16 per 32 elements: sc[2g] x 8, sc[2g+1] x 8
  std::vector<std::int16_t> offsets;  // 16 per super-block: its scales, for the -32 term
  std::vector<float> d;
  explicit q6_K_row(std::int64_t in)
      : q(static_cast<std::size_t>(in)),
        scales(static_cast<std::size_t>(in / 32 * 16)),
        offsets(static_cast<std::size_t>(in / qkk * 16)),
        d(static_cast<std::size_t>(in / qkk)) {}
};

// Where a Q6_K matrix's blocks are: the file's rows, or, once pack_q6_K has run (where the
// AVX-512 VNNI kernels run), groups of 4 rows with each block's 4 rows side by side, so that the
// 4-row decode tile reads one stream instead of four. Row o's block b: first(o)[b * step].
struct q6_K_blocks {
  const std::byte* base;
  std::size_t row_bytes;
  bool interleaved;
  explicit q6_K_blocks(const weight& w)
      : base(w.packed != nullptr && w.packed_rows == 4 ? w.packed : w.data),
        row_bytes(w.row_bytes),
        interleaved(base == w.packed) {}
  const gguf::block_q6_K* first(std::int64_t o) const {
    const std::byte* p = interleaved ? base + static_cast<std::size_t>(o / 4) * 4 * row_bytes +
                                           static_cast<std::size_t>(o % 4) * sizeof(gguf::block_q6_K)
                                     : base + static_cast<std::size_t>(o) * row_bytes;
    return reinterpret_cast<const gguf::block_q6_K*>(p);
  }
  std::int64_t step() const { return interleaved ? 4 : 1; }
};

// ---- entry points of the files

struct q4_0_tiles;  // simd_x86_q4_0_layout.hpp

// simd_x86_avx512.cpp: the packed Q4_K tiles with AVX-512 VNNI; null without it, or when
// set_avx512(false) (tests use it to check both paths).
const q4_K_tiles* avx512_q4_K_tiles();
const q4_0_tiles* avx512_q4_0_tiles();
// IQ4_NL in the Q4_0 packed layout, the same way.
const q4_0_tiles* avx512_iq4_nl_tiles();
// simd_x86_avx_vnni.cpp: the Q4_0 and IQ4_NL tiles of that layout with AVX-VNNI; null without
// it, or when set_avx_vnni(false).
const q4_0_tiles* avx_vnni_q4_0_tiles();
const q4_0_tiles* avx_vnni_iq4_nl_tiles();
// The packed 8-row Q4_K tiles with AVX-VNNI (simd_x86_q4k_packed.inc), the same way.
const q4_K_tiles* avx_vnni_q4_K_tiles();
// Q8_0 in the file's layout with AVX-VNNI, the work split as matmul_q8_0_like's; false, having
// done nothing, without it.
bool matmul_q8_0_avx_vnni(const weight& w, const q8_0_batch& xb, std::int64_t n_tokens, float* y, thread_pool& pool);
// simd_x86_q8_0_packed.cpp: -128 x the sum of each lane's 4 activation quants, 8 int32 per
// activation block (block i at 8 i): a lane's start that makes VPDPBUSD of the quants + 128
// (q ^ 0x80 as unsigned) against the activations exactly the lane's sum of q x.
void q8_0_lane_corrections(const q8_0_batch& xb, std::int64_t nb, std::int64_t n_tokens, thread_pool& pool,
                           aligned_vector<std::int32_t>& c);
// Q8_0: 4 rows x 4 activation rows from row o and activation row t0 on (reference lane layout).
using q8_0_tile_fn = void (*)(const weight& w, std::int64_t o, const q8_0_batch& xb, std::int64_t nb, std::int64_t t0,
                              float* y);
// 4 weight rows against 8 (eight) or 4 (four) activation rows.
struct q8_0_tiles {
  q8_0_tile_fn eight, four;
};
const q8_0_tiles* avx512_q8_0_tiles();
// simd_x86_q6k_avx512.cpp: the Q6_K tiles of simd_x86_kquants.cpp with AVX-512 VNNI (null
// without it, or after set_avx512(false)): on the stored blocks R rows x K activation rows
// (fused41, fused11, fused14), on unpacked rows (dot24, dot11).
using q6_K_fused_fn = void (*)(const weight& w, std::int64_t o, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0,
                               std::int64_t out, float* y);
using q6_K_dot_fn = void (*)(const q6_K_row* const* rows, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0,
                             std::int64_t out, std::int64_t o, float* y);
struct q6_K_tiles {
  q6_K_fused_fn fused41, fused11, fused14;
  q6_K_dot_fn dot24, dot11;
};
const q6_K_tiles* avx512_q6_K_tiles();
// simd_x86_avx_vnni.cpp: the stored-block Q6_K tiles with AVX-VNNI (simd_x86_q6k_fused.inc);
// null without it, or when set_avx_vnni(false).
struct q6_K_fused_tiles {
  q6_K_fused_fn fused41, fused11, fused14;
};
const q6_K_fused_tiles* avx_vnni_q6_K_tiles();
// False after set_avx512(false): the AVX-512 kernels of every file stand aside.
bool avx512_allowed();
// Whether the AVX-512 kernels may take their VBMI forms: the processor has VBMI, the AVX-512
// kernels run, and set_avx512_vbmi(false) has not set those forms aside.
bool avx512_vbmi_kernels();
// simd_x86_avx512_bf16.cpp: the BF16 matmul with AVX-512 BF16 (w.in % 32 == 0); null without
// it, when the instruction does not follow the reference's order, or after set_avx512(false).
matmul_fn avx512_bf16_matmul();

// simd_x86_float.cpp
void matmul_f16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
void matmul_f32(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
void matmul_bf16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
// The reference's f16 vector dot product (the F16 matmul's one-row path, flash attention's K.q).
float vec_dot_f16(const std::uint16_t* a, const float* x, std::int64_t n);

// simd_x86_kquants.cpp
void matmul_q4_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
void matmul_q6_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
std::size_t pack_q4_K(weight& w);

// simd_x86_legacy.cpp
void matmul_q4_1(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
void matmul_q5_1(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);

// simd_x86_iquants.cpp
void matmul_iq4_xs(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
// simd_x86_q3k_x8.cpp: Q3_K in 8-row groups, where the 16-row AVX-512 layout is not made.
std::size_t pack_q3_K_x8(weight& w);
void matmul_q3_K_x8(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool);
// simd_x86_q6k_x8.cpp: Q6_K in 8-row groups, where the AVX-512 layouts are not made.
std::size_t pack_q6_K_x8(weight& w);
void matmul_q6_K_x8(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool);
// simd_x86_iq4xs_x8.cpp: IQ4_XS in 8-row groups, where the 16-row AVX-512 layout is not made.
std::size_t pack_iq4_xs_x8(weight& w);
void matmul_iq4_xs_x8(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool);
void matmul_iq4_nl(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
void matmul_mxfp4(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
// MXFP4's pieces shared with its AVX-512 kernel (simd_x86_mxfp4_avx512.cpp, which returns false
// where the AVX-512 VNNI kernels stand aside): 2^(e - 128) for every exponent byte, and an odd
// last block's exact sum against activation block i added to `sum` by one fma.
const float* e8m0_halves();
SPITE_AVX2 float mxfp4_last_block(const gguf::block_mxfp4* blk, const q8_0_batch& xb, std::size_t i, float sum);
bool matmul_mxfp4_avx512(const weight& w, const q8_0_batch& xb, std::int64_t n_tokens, float* y, thread_pool& pool);
// simd_x86_mxfp4_x8.cpp: MXFP4 in 8-row groups, where the AVX-512 kernels do not run.
std::size_t pack_mxfp4_x8(weight& w);
void matmul_mxfp4_x8(const weight& w, const q8_0_batch& xb, std::int64_t n_tokens, float* y, thread_pool& pool);

// simd_x86_iquant_grid.cpp: IQ1_S, IQ1_M, IQ2_*, IQ3_*, TQ1_0, TQ2_0
std::span<const exact_matmul> grid_iquant_matmuls();

// simd_x86_q2k.cpp
void matmul_q2_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
std::size_t pack_q2_K(weight& w);

// The packed Q5_0 / Q5_1 / Q4_1 layouts of `Rows` rows (simd_x86_legacy_packed.cpp: 8,
// simd_x86_legacy_x16.cpp: 16), per group and block, the blocks' own size: d[Rows] f16; m[Rows]
// f16 (Q5_1, Q4_1); qh (Q5_0, Q5_1: 8 rows, bit L of byte 4r + j the fifth bit of row r's
// element 4L + j; 16 rows, a 64-bit mask per lane, simd_x86_legacy_x16.cpp); nib[4] (byte 4r + j
// of nib[i]: row r's qs[4i + j]). Lane L of the rows is one vector.
template <class Block, std::size_t Rows>
struct legacy_layout {
  static constexpr bool fifth_bit = !std::is_same_v<Block, gguf::block_q4_1>;
  static constexpr bool mins = !std::is_same_v<Block, gguf::block_q5_0>;
  static constexpr std::size_t m_at = 2 * Rows;
  static constexpr std::size_t qh_at = mins ? 4 * Rows : 2 * Rows;
  static constexpr std::size_t nibbles_at = qh_at + (fifth_bit ? 4 * Rows : 0);
  static constexpr std::size_t bytes = nibbles_at + 16 * Rows;
  static_assert(bytes == Rows * sizeof(Block));
  using batch = std::conditional_t<mins, q8_1_batch, q8_0_batch>;
  // The activations as the type's reference quantizes them.
  static batch quantize(const float* x, std::int64_t in, std::int64_t n_tokens, thread_pool& pool) {
    if constexpr (mins) {
      return q8_1_batch(x, in, n_tokens);
    } else {
      return q8_0_batch(x, in, n_tokens, pool);
    }
  }
};

// simd_x86_legacy_packed.cpp: Q5_0 / Q5_1 / Q4_1 on weights packed by pack_q5_0 / pack_q5_1 /
// pack_q4_1 (8-row groups, each of the reference's lanes one vector)
std::size_t pack_q5_0(weight& w);
std::size_t pack_q5_1(weight& w);
std::size_t pack_q4_1(weight& w);
void matmul_q5_0_packed(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
void matmul_q5_1_packed(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
void matmul_q4_1_packed(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);

// simd_x86_q5k_packed.cpp: Q5_K packed by pack_q5_K (8-row groups, each of the reference's lanes
// one vector), against Q8_K activations, which it rewrites in place (prepare_activations).
std::size_t pack_q5_K(weight& w);
void matmul_q5_K_packed(const weight& w, gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool);

// simd_x86_q6k_avx512.cpp: Q6_K in 4-row groups (q6_K_blocks) where the AVX-512 VNNI kernels run.
std::size_t pack_q6_K(weight& w);

// simd_x86_q8_0_packed.cpp: Q8_0 packed by pack_q8_0 (8-row groups of quants + 128 for
// VPDPBUSD) where the AVX-512 VNNI kernels run.
std::size_t pack_q8_0(weight& w);
void matmul_q8_0_packed(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);

// simd_x86_k35.cpp
void matmul_q3_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
void matmul_q5_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);

}  // namespace spite::dispatch::cpu::x86

#endif
