// Q5_0, Q5_1 and Q4_1 packed in 16-row groups for processors with AVX-512 VNNI, for decode and
// batches. The same bits as the references (ref_dot_legacy.cpp; the 8-row layout of
// simd_x86_legacy_packed.cpp keeps them the same way): per row and 32-element block 8 int32
// lanes (lane L: elements 4L..4L+3; Q5_0: q5 - 16 against Q8_0 activations, Q5_1 / Q4_1: the
// unsigned quants against Q8_1 ones), one fma per lane and block with d_w * d_x, the lanes added
// in reduce8's order; Q5_1 / Q4_1 then add their min terms, a chain fma(m_w, s_x, summs).
//
// The 8-row layout computes with 256-bit registers (23-31 GB/s from cache, one thread: below
// what the memory gives). Here a 64-byte register is lane L of 16 rows, so one VPDPBUSD gives
// lane L of every row and the rows stay float lanes to the end (no transposes). Per group of
// 16 rows and block (16 x the file's block, nothing added):
//   d[16]       f16 at 2 r;
//   m[16]       (Q5_1, Q4_1) f16 at 32 + 2 r;
//   qh[8]       (Q5_0, Q5_1) 64-bit masks: bit 4r + j of qh[L] is the fifth bit of row r's
//               element 4L + j (a lane's byte mask, one load into a mask register);
//   nib[4]      64 bytes each: byte 4r + j of nib[i] is row r's qs[4i + j] (its element 4i + j
//               in the low nibble, 16 + 4i + j in the high one).
// Q4_1 (320 bytes) and Q5_1 (384) blocks are whole cache lines; Q5_0's (352) every other one.
// Made only where the AVX-512 kernels run and the row count is a multiple of 16; after
// set_avx512(false) such a matrix goes through the AVX2 kernels on the file's layout.
#include "simd_x86_avx512.hpp"

#if defined(__x86_64__)
#include <cstring>
#include <type_traits>
#include <vector>

namespace spite::dispatch::cpu::x86 {
namespace {

// Blocks of 16 rows ahead that the batch tiles prefetch (decode: decode_fetch.legacy, by default
// the same).
constexpr std::size_t batch_fetch_blocks = 16, batch_fetch_l2_blocks = 40;

template <class Block>
using format16 = legacy_layout<Block, 16>;

SPITE_AVX512 inline __m512 halves16(const std::byte* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Lane L's quants of the 16 rows (Q5_*: 0..31, Q4_1: 0..15) from nib[L % 4] and the fifth bits:
// 16 added to the bytes of the lane's mask. With the bits as bytes' bit L (the 8-row layout's
// arrangement) each lane took a shift, a mask and a merge for them: 27 of a Q5_0 block's 59
// vector operations went to its quants, now 20 of 44 with the offsets below.
template <class Block, int L>
SPITE_AVX512 inline __m512i lane_quants(const __m512i* nib, const std::byte* qh) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i low = _mm512_and_si512(L < 4 ? nib[L % 4] : _mm512_srli_epi16(nib[L % 4], 4), m4);
  if constexpr (!format16<Block>::fifth_bit) return low;
  std::uint64_t bits;
  std::memcpy(&bits, qh + 8 * L, sizeof bits);
  return _mm512_mask_add_epi8(low, _cvtu64_mask64(bits), low, _mm512_set1_epi8(16));
}

// Lane L of a block for T activation rows (blocks at[t] of the batch, scales ds[t]): one exact
// int32 lane of 16 rows each, into acc[t][L] with one fma.
template <class Block, int L, int T>
SPITE_AVX512 inline void lane(const __m512i* nib, const std::byte* qh, const typename format16<Block>::batch& xb, const std::size_t* at,
                              const __m512* ds, const std::int32_t* offsets, __m512 (*acc)[8]) {
  const __m512i q = lane_quants<Block, L>(nib, qh);
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) {
    // Q5_0: sum((q - 16) x) = sum(q x) - 16 sum(x), the sum starting at its offset.
    const __m512i start = format16<Block>::mins ? _mm512_setzero_si512() : _mm512_set1_epi32(offsets[8 * at[t] + L]);
    const __m512i sums = _mm512_dpbusd_epi32(start, q, _mm512_set1_epi32(load_u32(xb.qs(at[t]) + 4 * L)));
    acc[t][L] = _mm512_fmadd_ps(ds[t], _mm512_cvtepi32_ps(sums), acc[t][L]);
  }
}

// All 8 lanes of a block.
template <class Block, int T>
SPITE_AVX512 inline void lanes(const __m512i* nib, const std::byte* qh, const typename format16<Block>::batch& xb, const std::size_t* at,
                               const __m512* ds, const std::int32_t* offsets, __m512 (*acc)[8]) {
  lane<Block, 0, T>(nib, qh, xb, at, ds, offsets, acc);
  lane<Block, 1, T>(nib, qh, xb, at, ds, offsets, acc);
  lane<Block, 2, T>(nib, qh, xb, at, ds, offsets, acc);
  lane<Block, 3, T>(nib, qh, xb, at, ds, offsets, acc);
  lane<Block, 4, T>(nib, qh, xb, at, ds, offsets, acc);
  lane<Block, 5, T>(nib, qh, xb, at, ds, offsets, acc);
  lane<Block, 6, T>(nib, qh, xb, at, ds, offsets, acc);
  lane<Block, 7, T>(nib, qh, xb, at, ds, offsets, acc);
}

// T activation rows from t0 against a group of 16 rows. offsets (Q5_0): per activation row and
// block, lane L's -16 x (x[4L] + ... + x[4L + 3]) at 8 i + L.
template <class Block, int T>
SPITE_AVX512 void tile16(const std::byte* group, std::int64_t nb, const typename format16<Block>::batch& xb,
                         const std::int32_t* offsets, std::int64_t t0, std::int64_t out, float* y16) {
  using f = format16<Block>;
  __m512 acc[T][8], summs[T];
  x16_zero<T>(acc);
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) summs[t] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = group + static_cast<std::size_t>(b) * f::bytes;
    // The block 16 ahead (5-6 KB): the hardware prefetchers alone lag behind a dense stream
    // (as in simd_x86_q6k_x16.cpp), and 8 ahead left these kernels' arithmetic and reads partly
    // one after the other (TYPE:2048:11264 from memory, alternated, two threads: Q5_1
    // 0.378-0.382 -> 0.353-0.364 ms, Q5_0 0.341-0.351 -> 0.318-0.328, Q4_1 0.321-0.344 ->
    // 0.296-0.309; one thread Q5_1 0.76-0.79 -> 0.65-0.72; 24 ahead slower again). And the
    // block 40 ahead (14-15 KB) into L2, as x16_fetch_ahead does: Zen 4, x 4 rows from memory,
    // two threads, min of 3 rounds alternated, Q5_0 0.79-0.84 -> 0.60 ms (64 ahead 0.67-0.72),
    // Q5_1 0.74 -> 0.63-0.64, Q4_1 0.63-1.09 -> 0.50; 2 and 512 rows level.
    for (std::size_t off = 0; off < f::bytes; off += cache_line) {
      prefetch_l1(blk + batch_fetch_blocks * f::bytes + off);
      prefetch_l2(blk + batch_fetch_l2_blocks * f::bytes + off);
    }
    __m512i nib[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) nib[i] = _mm512_loadu_si512(blk + f::nibbles_at + 64 * i);
    const std::byte* qh = blk + f::qh_at;
    const __m512 dw = halves16(blk);
    [[maybe_unused]] const __m512 mw = f::mins ? halves16(blk + f::m_at) : _mm512_setzero_ps();
    std::size_t at[T];
    __m512 ds[T];
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) {
      at[t] = static_cast<std::size_t>((t0 + t) * nb + b);
      ds[t] = _mm512_mul_ps(dw, _mm512_set1_ps(xb.d[at[t]]));
      if constexpr (f::mins) summs[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(xb.s[at[t]]), summs[t]);
    }
    lanes<Block, T>(nib, qh, xb, at, ds, offsets, acc);
  }
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) {
    const __m512 sum = x16_lane_sum(acc[t]);
    _mm512_storeu_ps(y16 + (t0 + t) * out, f::mins ? _mm512_add_ps(sum, summs[t]) : sum);
  }
}

// Decode: activation row t against S groups read in step, block by block (S = 2: a group of
// the matrix's first half beside one of its second, by_group_pairs), each with its block 8
// ahead fetched as tile16 does. One thread, Zen 5, against a plain read of the same bytes from
// memory (`bench --matmul ... --cold`, two rounds): Q5_0 5632 x 2048 70-74 % as one stream,
// 92-94 % as two; Q4_1 2048 x 5632 87-88 -> 94-95 %; Q5_1 2048 x 2048 84 -> 88 %.
template <class Block, int S>
SPITE_AVX512 void decode16(const std::byte* const* groups, std::int64_t nb, const typename format16<Block>::batch& xb,
                           const std::int32_t* offsets, std::int64_t t, float* const* ys) {
  using f = format16<Block>;
  __m512 acc[S][8], summs[S];
  x16_zero<S>(acc);
#pragma GCC unroll 2
  for (int s = 0; s < S; ++s) summs[s] = _mm512_setzero_ps();
  const auto ahead = static_cast<std::size_t>(decode_fetch.legacy);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::size_t at[1] = {static_cast<std::size_t>(t * nb + b)};
    const __m512 dx = _mm512_set1_ps(xb.d[at[0]]);
    [[maybe_unused]] __m512 sx;
    if constexpr (f::mins) sx = _mm512_set1_ps(xb.s[at[0]]);
#pragma GCC unroll 2
    for (int s = 0; s < S; ++s) {
      const std::byte* blk = groups[s] + static_cast<std::size_t>(b) * f::bytes;
      if (ahead != 0) {
        for (std::size_t off = 0; off < f::bytes; off += cache_line) prefetch_l1(blk + ahead * f::bytes + off);
      }
      __m512i nib[4];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) nib[i] = _mm512_loadu_si512(blk + f::nibbles_at + 64 * i);
      const std::byte* qh = blk + f::qh_at;
      const __m512 ds[1] = {_mm512_mul_ps(halves16(blk), dx)};
      if constexpr (f::mins) summs[s] = _mm512_fmadd_ps(halves16(blk + f::m_at), sx, summs[s]);
      lanes<Block, 1>(nib, qh, xb, at, ds, offsets, &acc[s]);
    }
  }
#pragma GCC unroll 2
  for (int s = 0; s < S; ++s) {
    const __m512 sum = x16_lane_sum(acc[s]);
    _mm512_storeu_ps(ys[s], f::mins ? _mm512_add_ps(sum, summs[s]) : sum);
  }
}

template <class Block>
bool matmul_x16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  using f = format16<Block>;
  if (avx512_q4_K_tiles() == nullptr) return false;
  const std::int64_t nb = w.in / qk0;
  const typename f::batch xb = f::quantize(x, w.in, n_tokens, pool);
  std::vector<std::int32_t> offsets;
  if constexpr (!f::mins) {
    offsets.resize(static_cast<std::size_t>(8 * nb * n_tokens));
    for (std::size_t i = 0; i < offsets.size(); ++i) {
      const std::int8_t* q = xb.qs(i / 8) + 4 * (i % 8);
      offsets[i] = -16 * (q[0] + q[1] + q[2] + q[3]);
    }
  }
  if (n_tokens == 1) {
    const std::size_t group_bytes = static_cast<std::size_t>(nb) * f::bytes;
    by_group_pairs<16>(
        w.out / 16, 1, y, pool, [&](std::int64_t g) { return w.packed + static_cast<std::size_t>(g) * group_bytes; },
        [&](const std::byte* const* both, std::int64_t t, float* const* ys) {
          decode16<Block, 2>(both, nb, xb, offsets.data(), t, ys);
        },
        [&](const std::byte* group, std::int64_t t, float* y16) { decode16<Block, 1>(&group, nb, xb, offsets.data(), t, &y16); });
    return true;
  }
  // Per activation row and block: its quants, scale and sum or lane offsets.
  const std::size_t x_row_bytes = static_cast<std::size_t>(nb) * (qk0 + 2 * sizeof(float) + 32);
  x16_for_groups(w, static_cast<std::size_t>(nb) * f::bytes, x_row_bytes, n_tokens, pool,
                 [&](const std::byte* group, std::int64_t t0, std::int64_t t1, std::int64_t o) {
                   std::int64_t t = t0;
                   for (; t + 2 <= t1; t += 2) tile16<Block, 2>(group, nb, xb, offsets.data(), t, w.out, y + o);
                   if (t < t1) tile16<Block, 1>(group, nb, xb, offsets.data(), t, w.out, y + o);
                 });
  return true;
}

template <class Block>
std::size_t pack16(weight& w) {
  using f = format16<Block>;
  return x16_pack<Block>(
      w, f::bytes,
      [](std::uint8_t* dst, const Block& blk, int r) {
        std::memcpy(dst + 2 * r, &blk.d, 2);
        if constexpr (f::mins) std::memcpy(dst + f::m_at + 2 * r, &blk.m, 2);
        if constexpr (f::fifth_bit) {
          std::uint32_t qh;
          std::memcpy(&qh, blk.qh, 4);
          // Element e = 4L + j: bit 4r + j of mask L, i.e. byte r / 2, bit 4 (r % 2) + j: the 4
          // bits of chunk L at once.
          for (int L = 0; L < 8; ++L) {
            dst[f::qh_at + 8 * L + r / 2] |= static_cast<std::uint8_t>(((qh >> (4 * L)) & 0xFU) << (4 * (r % 2)));
          }
        }
        for (int i = 0; i < 4; ++i) std::memcpy(dst + f::nibbles_at + 64 * i + 4 * r, blk.qs + 4 * i, 4);
      },
      qk0);
}

}  // namespace

std::size_t pack_q5_0_x16(weight& w) { return pack16<gguf::block_q5_0>(w); }
std::size_t pack_q5_1_x16(weight& w) { return pack16<gguf::block_q5_1>(w); }
std::size_t pack_q4_1_x16(weight& w) { return pack16<gguf::block_q4_1>(w); }

bool matmul_q5_0_x16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  return matmul_x16<gguf::block_q5_0>(w, x, n_tokens, y, pool);
}
bool matmul_q5_1_x16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  return matmul_x16<gguf::block_q5_1>(w, x, n_tokens, y, pool);
}
bool matmul_q4_1_x16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  return matmul_x16<gguf::block_q4_1>(w, x, n_tokens, y, pool);
}

}  // namespace spite::dispatch::cpu::x86

#endif
