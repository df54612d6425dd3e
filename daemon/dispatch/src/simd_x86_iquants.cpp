// AVX2 versions of the IQ4_XS and IQ4_NL matmuls (the contract of simd_x86_avx2.cpp: the
// reference's exact integer sums and float operations, so the same bits). Both map 4-bit
// indices through the same 16-value table, one byte shuffle for 32 of them.
// * IQ4_XS (reference: dot_plain<iq4_xs> in ref_dot_iquants.cpp): Q8_K activations, 8 int32
//   lanes per super-block, each 32-element sub-block weighted by its 6-bit scale - 32, one fma
//   per super-block with d_w * d_x, the lanes reduced at the end.
// * IQ4_NL (reference: matmul32<iq4_nl> in ref_dot_repack.cpp): Q8_0 activations; a matrix the
//   reference repacks (rows a multiple of 8) takes one exact block sum and one fma per block
//   and output. Other matrices keep the reference's code.
// * MXFP4 (reference: matmul32<mxfp4>): IQ4_NL's vector dot product with E2M1 values and an E8M0
//   scale, for every matrix (below).
#include "simd_x86.hpp"
#include "simd_x86_q4_0_layout.hpp"
#include "simd_x86_x16.hpp"

#if defined(__x86_64__)
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "../../gguf/src/quants/iq_tables.hpp"

namespace spite::dispatch::cpu::x86 {
namespace {


// The 32 table values of 16 index bytes (element order: low nibbles, then high).
SPITE_AVX2 inline __m256i iq4_values(const std::uint8_t* qs) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(gguf::quants::iq::kvalues_iq4nl));
  return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), nibbles32(qs));
}

// ---- IQ4_XS
//
// Sub-blocks are taken in pairs: one 32-byte load holds both one's 32 index bytes, its low
// nibbles (elements 0-15 of each) and high nibbles (elements 16-31) then come out as two vectors
// without moving bytes across lanes, [elements 0-15 of sub-block 2p | of 2p + 1] and [16-31 |
// 16-31]. Their int32 lanes hold the right products for the reference's lanes 0-3 and 4-7 of
// each sub-block, in the wrong half for the second one; the halves are added together once per
// super-block (integer sums, so exactly the reference's lanes). The activations are permuted to
// match once per matmul (iq4_xs_pair_order).

// Element order of the permuted activations within a super-block: for each pair p, elements
// 64p + 0..15, 64p + 32..47, then 64p + 16..31, 64p + 48..63.
void iq4_xs_pair_order(gguf::block_q8_K& x) {
  std::int8_t q[qkk];
  for (int p = 0; p < 4; ++p) {
    std::memcpy(q + 64 * p, x.qs + 64 * p, 16);
    std::memcpy(q + 64 * p + 16, x.qs + 64 * p + 32, 16);
    std::memcpy(q + 64 * p + 32, x.qs + 64 * p + 16, 16);
    std::memcpy(q + 64 * p + 48, x.qs + 64 * p + 48, 16);
  }
  std::memcpy(x.qs, q, sizeof q);
}

// The 8 sub-block scales (6 bits, minus 32) as bytes 0-7.
SPITE_AVX2 inline __m128i iq4_xs_scales(const gguf::block_iq4_xs& b) {
  std::uint32_t low;
  std::memcpy(&low, b.scales_l, 4);
  const __m128i l = _mm_cvtsi32_si128(static_cast<int>(low));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  // Sub-block ib's low 4 bits: byte ib / 2, low nibble for even ib.
  const __m128i lo = _mm_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_and_si128(l, m4), _mm_and_si128(_mm_srli_epi16(l, 4), m4)));
  std::uint16_t high;
  std::memcpy(&high, &b.scales_h, 2);
  // Its top 2 bits: bits 2ib..2ib+1 of scales_h, moved to the top of lane ib by a multiply, then
  // down to bits 4-5.
  const __m128i h = _mm_mullo_epi16(_mm_set1_epi16(static_cast<std::int16_t>(high)),
                                    _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1));
  const __m128i hi = _mm_slli_epi16(_mm_srli_epi16(h, 14), 4);
  const __m128i s = _mm_sub_epi16(_mm_or_si128(lo, hi), _mm_set1_epi16(32));
  return _mm_packs_epi16(s, s);  // -32..31: no saturation
}

template <int R, int K>
SPITE_AVX2 void iq4_xs_tile(const weight& w, std::int64_t o, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0,
                            float* y) {
  const gguf::block_iq4_xs* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const gguf::block_iq4_xs*>(w.row(o + r));
  __m256 acc[R][K];
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < K; ++k) acc[r][k] = _mm256_setzero_ps();
  }
  const __m128i table128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(gguf::quants::iq::kvalues_iq4nl));
  const __m256i table = _mm256_broadcastsi128_si256(table128);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const next_group_prefetch ahead(w.row(o + R), R * w.row_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t0 == 0) ahead.step(b);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const gguf::block_iq4_xs& blk = rows[r][b];
      const scale_pairs16 scales(iq4_xs_scales(blk));
      __m256i first[K], second[K];  // the int32 lanes of elements 0-15 / 16-31, two sub-blocks per vector
      #pragma GCC unroll 8
      for (int k = 0; k < K; ++k) first[k] = second[k] = _mm256_setzero_si256();
      for (int p = 0; p < 4; ++p) {
        const __m256i scale = scales.of(2 * p, 2 * p + 1);  // sub-block 2p's in the low half
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * p));
        const __m256i qa = _mm256_shuffle_epi8(table, _mm256_and_si256(v, m4));
        const __m256i qb = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
        const __m256i qa_abs = _mm256_sign_epi8(qa, qa), qb_abs = _mm256_sign_epi8(qb, qb);
        #pragma GCC unroll 8
        for (int k = 0; k < K; ++k) {
          const std::int8_t* xs = xq[(t0 + k) * nb + b].qs + 64 * p;
          const __m256i xa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs));
          const __m256i xb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs + 32));
          first[k] = _mm256_add_epi32(first[k], dot_lanes_scaled(qa_abs, _mm256_sign_epi8(xa, qa), scale));
          second[k] = _mm256_add_epi32(second[k], dot_lanes_scaled(qb_abs, _mm256_sign_epi8(xb, qb), scale));
          // Keeps GCC from re-associating the 4 pairs' sums into a tree whose products it spills.
          if constexpr (K > 1) __asm__("" : "+x"(first[k]), "+x"(second[k]));
        }
      }
      const float dw = _cvtsh_ss(blk.d);
      #pragma GCC unroll 8
      for (int k = 0; k < K; ++k) {
        // Lanes 0-3: elements 0-15 of every sub-block; lanes 4-7: elements 16-31.
        const __m256i lanes = _mm256_add_epi32(_mm256_permute2x128_si256(first[k], second[k], 0x20),
                                               _mm256_permute2x128_si256(first[k], second[k], 0x31));
        acc[r][k] = _mm256_fmadd_ps(_mm256_set1_ps(dw * xq[(t0 + k) * nb + b].d), _mm256_cvtepi32_ps(lanes), acc[r][k]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) y[(t0 + k) * w.out + o + r] = reduce8_vec(acc[r][k]);
  }
}

template <int R>
void iq4_xs_rows(const weight& w, std::int64_t o, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t n_tokens, float* y) {
  constexpr int tile_rows = R > 2 ? 2 : R;  // 4 x 4 accumulators would spill AVX2's 16 registers
  by_token_tiles(
      n_tokens,
      [&](std::int64_t t) {
        for (int h = 0; h < R; h += tile_rows) iq4_xs_tile<tile_rows, 4>(w, o + h, xq, nb, t, y);
      },
      [&](std::int64_t t) { iq4_xs_tile<R, 1>(w, o, xq, nb, t, y); });
}

// ---- IQ4_NL, repacked matrices: one exact block sum and one fma per block and output. R rows x
// K activation rows = 8 outputs at a time: their 8 block sums side by side (transpose_sum8), then
// one vector fma per block, each lane the reference's scalar fma for its output.

template <int R, int K>
SPITE_AVX2 void iq4_nl_tile8(const weight& w, std::int64_t o, const q8_0_batch& xb, std::int64_t nb, std::int64_t t0, float* y) {
  static_assert(R * K == 8);
  const gguf::block_iq4_nl* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const gguf::block_iq4_nl*>(w.row(o + r));
  __m256 acc = _mm256_setzero_ps();
  const next_group_prefetch ahead(w.row(o + R), R * w.row_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t0 == 0) ahead.step(b);
    __m256i lanes[8];
    __m128i dw = _mm_setzero_si128();
    for (int r = 0; r < R; ++r) {
      const __m256i q = iq4_values(rows[r][b].qs);
      const __m256i qabs = _mm256_sign_epi8(q, q);
      dw = insert_half(dw, rows[r][b].d, r);
      for (int k = 0; k < K; ++k) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs(static_cast<std::size_t>((t0 + k) * nb + b))));
        lanes[r * K + k] = dot_lanes(qabs, _mm256_sign_epi8(x, q));
      }
    }
    // Lane r * K + k: d_w(r) * d_x(k), the reference's scalar product.
    __m256 d;
    if constexpr (K == 1) {
      d = _mm256_mul_ps(_mm256_cvtph_ps(dw), _mm256_set1_ps(xb.d[static_cast<std::size_t>(t0 * nb + b)]));
    } else {
      const __m128 dw4 = _mm_cvtph_ps(dw);
      const __m256 dws = _mm256_set_m128(_mm_shuffle_ps(dw4, dw4, 0x55), _mm_shuffle_ps(dw4, dw4, 0x00));
      const __m128 dx = _mm_setr_ps(xb.d[static_cast<std::size_t>(t0 * nb + b)], xb.d[static_cast<std::size_t>((t0 + 1) * nb + b)],
                                    xb.d[static_cast<std::size_t>((t0 + 2) * nb + b)], xb.d[static_cast<std::size_t>((t0 + 3) * nb + b)]);
      d = _mm256_mul_ps(dws, _mm256_set_m128(dx, dx));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sum8(lanes)), d, acc);
  }
  alignas(32) float out8[8];
  _mm256_store_ps(out8, acc);
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < K; ++k) y[(t0 + k) * w.out + o + r] = out8[r * K + k];
  }
}

// ---- MXFP4 (reference: matmul32<mxfp4> in ref_dot_repack.cpp, ggml_vec_dot_mxfp4_q8_0): per
// row and activation row, the blocks alternate between two 8-lane accumulators (lanes of 4
// products, each block's d_x * 2^(e - 128)), which are added before the horizontal sum; an odd
// last block comes after in scalar order. R rows x K activation rows at a time, each row's
// block values made once for the K. The values (at most 12 in magnitude) go in as magnitudes
// against the sign-moved activations, as IQ4_NL's do.

template <int R, int K>
SPITE_AVX2 void mxfp4_tile(const weight& w, std::int64_t o, const q8_0_batch& xb, std::int64_t nb, std::int64_t t0, float* y) {
  const __m128i table128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(gguf::quants::iq::kvalues_mxfp4));
  const __m256i table = _mm256_set_m128i(table128, table128);
  const gguf::block_mxfp4* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const gguf::block_mxfp4*>(w.row(o + r));
  const float* e8m0 = e8m0_halves();
  // Block b of row r against activation row t0 + k: its 8 lanes and its d_x * d_w.
  const auto block = [&](int r, std::int64_t b, const __m256i& q, const __m256i& magnitude, int k, __m256i& lanes) SPITE_AVX2 {
    const std::size_t i = static_cast<std::size_t>((t0 + k) * nb + b);
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs(i)));
    lanes = dot_lanes(magnitude, _mm256_sign_epi8(x, q));
    return xb.d[i] * e8m0[rows[r][b].e];
  };
  __m256 acc[R][K][2];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) acc[r][k][0] = acc[r][k][1] = _mm256_setzero_ps();
  }
  const next_group_prefetch ahead(w.row(o + R), R * w.row_bytes, nb);  // rows of a few KB
  for (std::int64_t b = 0; b + 1 < nb; b += 2) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      if (t0 == 0) ahead.step(b + h);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i q = _mm256_shuffle_epi8(table, nibbles32(rows[r][b + h].qs));
        const __m256i magnitude = _mm256_sign_epi8(q, q);
#pragma GCC unroll 4
        for (int k = 0; k < K; ++k) {
          __m256i lanes;
          const float d = block(r, b + h, q, magnitude, k, lanes);
          acc[r][k][h] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), acc[r][k][h]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < K; ++k) {
      float v = reduce8_vec(_mm256_add_ps(acc[r][k][0], acc[r][k][1]));
      if (nb % 2 != 0) v = mxfp4_last_block(rows[r] + nb - 1, xb, static_cast<std::size_t>((t0 + k) * nb + nb - 1), v);
      y[(t0 + k) * w.out + o + r] = v;
    }
  }
}

}  // namespace

const float* e8m0_halves() {
  static const auto table = [] {
    std::array<float, 256> v{};
    for (int e = 0; e < 256; ++e) v[static_cast<std::size_t>(e)] = gguf::quants::iq::e8m0_to_fp32_half(static_cast<std::uint8_t>(e));
    return v;
  }();
  return table.data();
}

SPITE_AVX2 float mxfp4_last_block(const gguf::block_mxfp4* blk, const q8_0_batch& xb, std::size_t i, float sum) {
  const __m128i table128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(gguf::quants::iq::kvalues_mxfp4));
  const __m256i q = _mm256_shuffle_epi8(_mm256_set_m128i(table128, table128), nibbles32(blk->qs));
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs(i)));
  const int total = sum_epi32(dot_lanes(_mm256_sign_epi8(q, q), _mm256_sign_epi8(x, q)));
  return std::fma(xb.d[i] * e8m0_halves()[blk->e], static_cast<float>(total), sum);
}

void matmul_mxfp4(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qk0;
  const q8_0_batch xb(x, w.in, n_tokens, pool);
  // 16-row groups: their own kernels while the AVX-512 ones run, else the file's layout; 8-row
  // groups (made where the AVX-512 kernels do not run): theirs.
  if (w.packed != nullptr && w.packed_rows == 16 && matmul_mxfp4_x16(w, xb, n_tokens, y, pool)) return;
  if (w.packed != nullptr && w.packed_rows == 8) return matmul_mxfp4_x8(w, xb, n_tokens, y, pool);
  if (matmul_mxfp4_avx512(w, xb, n_tokens, y, pool)) return;
  by_row_groups_and_token_tiles<2>(
      w.out, n_tokens, pool,
      [&](std::int64_t o, std::int64_t t) {
        mxfp4_tile<2, 2>(w, o, xb, nb, t, y);
        mxfp4_tile<2, 2>(w, o + 2, xb, nb, t, y);
      },
      [&](std::int64_t o, std::int64_t t) { mxfp4_tile<4, 1>(w, o, xb, nb, t, y); },
      [&](std::int64_t o, std::int64_t t) { mxfp4_tile<1, 1>(w, o, xb, nb, t, y); });
}

void matmul_iq4_xs(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qkk;
  std::vector<gguf::block_q8_K> xq;
  quantize_tokens_q8_K(x, w.in, n_tokens, xq, pool);
  // 8-row groups: the 256-bit kernels; 16-row groups: their own while the AVX-512 ones run, else the file's layout.
  if (w.packed != nullptr && w.packed_rows == 8) return matmul_iq4_xs_x8(w, xq.data(), n_tokens, y, pool);
  if (w.packed != nullptr && matmul_iq4_xs_x16(w, xq.data(), n_tokens, y, pool)) return;
  for (auto& block : xq) iq4_xs_pair_order(block);
  by_row_groups(
      w.out, pool, [&](std::int64_t o) { iq4_xs_rows<4>(w, o, xq.data(), nb, n_tokens, y); },
      [&](std::int64_t o) { iq4_xs_rows<1>(w, o, xq.data(), nb, n_tokens, y); });
}

// ---- IQ4_NL packed at load time: Q4_0's packed layout (the blocks are alike), rows as lanes.
// Each chunk's values are signed, and a pair of products can reach 2 * 127 * 127, so every
// VPMADDUBSW is widened at once (no int16 sums across chunks as for Q4_0); the gain over the
// tiles above is that no transposes are needed.

struct iq4_nl_sums {
  // Half h of a block: chunks 4h..4h + 3 (h = 0: the low nibbles of the 4 vectors, elements
  // 4j..4j + 3; h = 1: the high ones, 16 + ...).
  template <int K>
  SPITE_AVX2 static void half(const std::byte* blk, const q8_0_batch& xb, std::int64_t nb, std::int64_t t0, std::int64_t b, int h,
                              __m256i* sum) {
    const __m256i m = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m128i table128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(gguf::quants::iq::kvalues_iq4nl));
    const __m256i table = _mm256_set_m128i(table128, table128);
    if (h == 0) {
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) sum[k] = _mm256_setzero_si256();
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * j));
      const __m256i q = _mm256_shuffle_epi8(table, h == 0 ? _mm256_and_si256(v, m) : _mm256_and_si256(_mm256_srli_epi16(v, 4), m));
      const __m256i magnitude = _mm256_sign_epi8(q, q);
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) {
        const std::int8_t* xq = xb.qs(static_cast<std::size_t>((t0 + k) * nb + b));
        const __m256i xs = _mm256_sign_epi8(_mm256_set1_epi32(load_u32(xq + 16 * h + 4 * j)), q);
        sum[k] = _mm256_add_epi32(sum[k], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, xs), ones));
        if constexpr (K > 1) __asm__("" : "+x"(sum[k]));  // the sums in order, not a spilled tree
      }
    }
  }
};

void matmul_iq4_nl(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (w.out % 8 != 0) {  // the reference does not repack these: its lane-split kernels
    find_reference_matmul(gguf::tensor_type::iq4_nl)(w, x, n_tokens, y, pool);
    return;
  }
  const std::int64_t nb = w.in / qk0;
  const q8_0_batch xb(x, w.in, n_tokens, pool);
  // 16-row groups: their own kernels while the AVX-512 ones run, else the file's layout; 8-row
  // groups (made where the AVX-512 kernels do not run): theirs.
  if (w.packed != nullptr && w.packed_rows == 16) {
    if (matmul_q4_0_x16(w, xb, n_tokens, true, y, pool)) return;
  } else if (w.packed != nullptr) {
    const q4_0_tiles* avx512 = avx512_iq4_nl_tiles();
    const q4_0_tiles* vnni = avx_vnni_iq4_nl_tiles();
    matmul_q4_0_layout(w, xb, n_tokens, y, pool, avx512 != nullptr ? *avx512 : vnni != nullptr ? *vnni : q4_0_layout_tiles<iq4_nl_sums>());
    return;
  }
  by_groups_and_token_blocks(w.out / 8, n_tokens, token_block(q8_0_batch::row_bytes(nb)), pool,
                             [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
                               std::int64_t t = t0;
                               for (; t + 4 <= t1; t += 4) {
                                 for (int h = 0; h < 8; h += 2) iq4_nl_tile8<2, 4>(w, 8 * g + h, xb, nb, t, y);
                               }
                               for (; t < t1; ++t) iq4_nl_tile8<8, 1>(w, 8 * g, xb, nb, t, y);
                             });
}

}  // namespace spite::dispatch::cpu::x86

#endif
