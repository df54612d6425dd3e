// AVX2 Q5_0 matmul on weights packed at load time (the contract of simd_x86_avx2.cpp: the
// reference's exact integer sums and float operations, so the same bits). Reference: dot_q5_0
// in ref_dot_legacy.cpp: per row and block 8 int32 lanes, lane L the sum of (q5 - 16) * x over
// elements 4L..4L+3, one fma per block into 8 float lanes with d_w * d_x, the AVX horizontal sum
// at the end.
//
// Unpacked, a block's fifth bits cost a spread of 32 bits into 32 bytes per row, its signed
// quants two sign flips per row and activation row, and its scale a conversion per row: about
// 21 vector operations per row and block, which kept decode of Q5_0 matrices (most of the
// weights of Qwen2.5-0.5B's Q4_K_M file, whose rows of 896 are no multiple of 256) below the
// memory's pace. Packed, per group of 8 rows and per block (176 bytes, the 8 blocks' own size):
//   d[8]       f16, row r's at 2r;
//   qh[32]     byte 4r + j, bit L: the fifth bit of row r's element 4L + j;
//   nib[4][32] byte 4r + j of vector m: row r's qs[4m + j] (its elements 4m + j in the low
//              nibble, 16 + 4m + j in the high one).
// Lane L of the 8 rows is then one vector (bytes 4r..4r+3: row r's elements 4L..4L+3): one
// multiply gives lane L of every row, rows as float lanes. The 8 accumulators hold the
// reference's lanes transposed (acc[L], element r: row r's lane L) and are transposed back for
// the reference's horizontal sum once per group. The quants stay unsigned (q5 = q + 16): each
// lane takes 16 x its activations' sum off, made once per activation block.
#include "simd_x86.hpp"

#if defined(__x86_64__)
#include <cstring>

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::size_t packed_block = 16 + 32 + 128;
constexpr std::size_t packed_qh = 16, packed_nibbles = 48;

// Lane L's quants q5 of the 8 rows of a packed block (0..31).
SPITE_AVX2 inline __m256i lane_quants(const std::byte* blk, __m256i qh, int lane) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + packed_nibbles + 32 * (lane % 4)));
  const __m256i nib = lane < 4 ? _mm256_and_si256(v, m4) : _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
  return _mm256_or_si256(nib, _mm256_and_si256(bit_to(qh, lane, 4), _mm256_set1_epi8(0x10)));
}

// Per activation row and block, lane L's 16 * (x[4L] + ... + x[4L + 3]) at 8 * (t * nb + b) + L.
struct lane_offsets {
  std::vector<std::int32_t> v;
  SPITE_AVX2 lane_offsets(const q8_0_batch& xb, std::int64_t nb, std::int64_t n_tokens, thread_pool& pool)
      : v(static_cast<std::size_t>(8 * nb * n_tokens)) {
    for_each_token(n_tokens, pool, [&](std::int64_t t) SPITE_AVX2 {
      for (std::int64_t b = 0; b < nb; ++b) {
        const std::size_t i = static_cast<std::size_t>(t * nb + b);
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs(i)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(v.data() + 8 * i), dot_lanes(_mm256_set1_epi8(16), x));
      }
    });
  }
};

// acc[L] += d_w * d_x * (lane L of the 8 rows), for lane quants q(L).
template <class LaneQuants>
SPITE_AVX2 inline void block_step(__m256* acc, __m256 ds, const std::int8_t* xq, const std::int32_t* offsets, const LaneQuants& q) {
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
  for (int lane = 0; lane < 8; ++lane) {
    std::int32_t x4;
    std::memcpy(&x4, xq + 4 * lane, 4);
    const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(q(lane), _mm256_set1_epi32(x4)), ones);
    const __m256i lanes = _mm256_sub_epi32(sums, _mm256_set1_epi32(offsets[lane]));
    acc[lane] = _mm256_fmadd_ps(ds, _mm256_cvtepi32_ps(lanes), acc[lane]);
  }
}

// Row r's result: the reference's horizontal sum of its 8 lanes (acc[L], element r).
SPITE_AVX2 inline void store_rows(const __m256* acc, float* y8) {
  alignas(32) float lanes[8][8];
  for (int lane = 0; lane < 8; ++lane) _mm256_store_ps(lanes[lane], acc[lane]);
  for (int r = 0; r < 8; ++r) {
    alignas(32) float row[8];
    for (int lane = 0; lane < 8; ++lane) row[lane] = lanes[lane][r];
    y8[r] = reduce8_vec(_mm256_load_ps(row));
  }
}

// Decode: one activation row, each block unpacked in registers where it is used.
SPITE_AVX2 void packed_row(const std::byte* group, std::int64_t nb, const q8_0_batch& xb, const lane_offsets& off,
                           std::int64_t t, bool prefetch, float* y8) {
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  const next_group_prefetch ahead(group + static_cast<std::size_t>(nb) * packed_block, static_cast<std::size_t>(nb) * packed_block, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (prefetch) ahead.step(b);
    const std::byte* blk = group + static_cast<std::size_t>(b) * packed_block;
    const std::size_t i = static_cast<std::size_t>(t * nb + b);
    const __m256 ds = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk))), _mm256_set1_ps(xb.d[i]));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + packed_qh));
    block_step(acc, ds, xb.qs(i), off.v.data() + 8 * i, [&](int lane) SPITE_AVX2 { return lane_quants(blk, qh, lane); });
  }
  store_rows(acc, y8);
}

// Batches: a group's lane quants and scales unpacked once, then read for each activation row.
struct unpacked_group {
  aligned_vector<std::uint8_t> q;  // block b, lane L at 32 * (8b + L)
  aligned_vector<float> d;         // block b, row r at 8b + r
};

SPITE_AVX2 void unpack_group(const std::byte* group, std::int64_t nb, unpacked_group& u) {
  u.q.resize(static_cast<std::size_t>(256 * nb));
  u.d.resize(static_cast<std::size_t>(8 * nb));
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = group + static_cast<std::size_t>(b) * packed_block;
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + packed_qh));
#pragma GCC unroll 8
    for (int lane = 0; lane < 8; ++lane) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(u.q.data() + 32 * (8 * b + lane)), lane_quants(blk, qh, lane));
    }
    _mm256_store_ps(u.d.data() + 8 * b, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk))));
  }
}

SPITE_AVX2 void unpacked_row(const unpacked_group& u, std::int64_t nb, const q8_0_batch& xb, const lane_offsets& off, std::int64_t t,
                             float* y8) {
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::size_t i = static_cast<std::size_t>(t * nb + b);
    const __m256 ds = _mm256_mul_ps(_mm256_load_ps(u.d.data() + 8 * b), _mm256_set1_ps(xb.d[i]));
    const std::uint8_t* q = u.q.data() + 256 * b;
    block_step(acc, ds, xb.qs(i), off.v.data() + 8 * i, [&](int lane) SPITE_AVX2 {
      return _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32 * lane));
    });
  }
  store_rows(acc, y8);
}

}  // namespace

std::size_t pack_q5_0(weight& w) {
  return pack_row_groups<gguf::block_q5_0>(w, packed_block, [](std::byte* dst, const gguf::block_q5_0& blk, int r) {
    std::memcpy(dst + 2 * r, &blk.d, 2);
    std::uint32_t qh;
    std::memcpy(&qh, blk.qh, 4);
    for (int j = 0; j < 4; ++j) {  // bits j, 4 + j, ..., 28 + j gathered into bits 0..7
      std::uint32_t bits = (qh >> j) & 0x11111111U;
      bits = (bits | (bits >> 3)) & 0x03030303U;
      bits = (bits | (bits >> 6)) & 0x000F000FU;
      bits = (bits | (bits >> 12)) & 0xFFU;
      dst[packed_qh + 4 * r + j] = static_cast<std::byte>(bits);
    }
    for (int m = 0; m < 4; ++m) std::memcpy(dst + packed_nibbles + 32 * m + 4 * r, blk.qs + 4 * m, 4);
  });
}

void matmul_q5_0_packed(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qk0;
  const q8_0_batch xb(x, w.in, n_tokens, pool);
  const lane_offsets off(xb, nb, n_tokens, pool);
  const std::size_t group_bytes = static_cast<std::size_t>(nb) * packed_block;
  by_groups_and_token_blocks(w.out / 8, n_tokens, token_block(xb.row_bytes(nb) + 32 * static_cast<std::size_t>(nb)), pool,
                             [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
                               const std::byte* group = w.packed + static_cast<std::size_t>(g) * group_bytes;
                               if (t1 - t0 == 1) return packed_row(group, nb, xb, off, t0, t0 == 0, y + t0 * w.out + 8 * g);
                               thread_local unpacked_group u;
                               unpack_group(group, nb, u);
                               for (std::int64_t t = t0; t < t1; ++t) unpacked_row(u, nb, xb, off, t, y + t * w.out + 8 * g);
                             });
}

}  // namespace spite::dispatch::cpu::x86

#endif
