// NEON versions of exact matmuls (Q8_0, Q4_0, Q3_K, Q4_K, Q5_K, Q6_K, and the dot products of
// the grid i-quants, IQ4_XS and the ternary types; the other types' in simd_arm_neon_legacy.cpp
// and simd_arm_neon_float.cpp) for 64-bit ARM with the dot-product extension
// (ARMv8.2 SDOT; built with -march=armv8.2-a+dotprod or newer, see
// cmake/toolchain-aarch64-linux-gnu.cmake).
// Like the x86 kernels they compute the reference's exact integer block sums and then its float
// operations in its order, so they give the bits of ref_dot_*.cpp (tests/unit/dispatch/
// cpu_kernels_test.cpp, run under qemu-aarch64 in CI). SDOT forms exactly the reference's
// lanes: each of 4 int32 lanes sums 4 consecutive int8 products.
#include "ref_quant.hpp"

#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "iquant_dots.hpp"
#include "ref_kquants.hpp"
#include "ref_q4k.hpp"
#include "simd_arm_neon.hpp"
#include "spite/core/half.hpp"
#include "spite/gguf/blocks.hpp"

namespace spite::dispatch::cpu {
namespace {

using gguf::tensor_type;

using neon::lanes4;
using neon::quants32;

inline quants32 load_quants(const gguf::block_q8_0& b) { return {vld1q_s8(b.qs), vld1q_s8(b.qs + 16)}; }

inline quants32 load_quants(const gguf::block_q4_0& b) {
  const uint8x16_t v = vld1q_u8(b.qs);
  const int8x16_t eight = vdupq_n_s8(8);
  return {vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), eight), vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight)};
}

// Q5_0: the 5-bit quants minus 16; bit j of qh is bit 4 of element j.
inline quants32 load_quants(const gguf::block_q5_0& b) {
  std::uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  const uint8x16_t v = vld1q_u8(b.qs);
  const int8x16_t sixteen = vdupq_n_s8(16);
  return {vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0F)), neon::high_bits16(qh, 0))), sixteen),
          vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), neon::high_bits16(qh, 2))), sixteen)};
}

// IQ4_NL: each nibble indexes the non-linear table.
inline quants32 load_quants(const gguf::block_iq4_nl& b) {
  const int8x16_t table = vld1q_s8(gguf::quants::iq::kvalues_iq4nl);
  const uint8x16_t v = vld1q_u8(b.qs);
  return {vqtbl1q_s8(table, vandq_u8(v, vdupq_n_u8(0x0F))), vqtbl1q_s8(table, vshrq_n_u8(v, 4))};
}

// Q8_0, Q5_0, and Q4_0 / IQ4_NL matrices the reference does not repack (references: dot_q8_0 /
// dot_q5_0 in ref_dot_legacy.cpp, dot32_lanes8 in ref_dot_repack.cpp): 8 lanes of 4 products per block,
// scaled by d_w * d_x with a fused multiply-add, reduced as reduce8. R weight rows times K
// activation rows, each weight block unpacked once for the K rows.
template <class Block, int R, int K>
void lanes8_tile(const weight& w, std::int64_t o, const gguf::block_q8_0* xq, std::int64_t nb, std::int64_t t0, float* y) {
  const Block* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const Block*>(w.row(o + r));
  float32x4_t acc[R][K][2];
  for (auto& row : acc) {
    for (auto& a : row) a[0] = a[1] = vdupq_n_f32(0.0f);
  }
  for (std::int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < R; ++r) {
      const quants32 q = load_quants(rows[r][b]);
      const float dw = fp16_to_fp32(rows[r][b].d);
      for (int k = 0; k < K; ++k) {
        const gguf::block_q8_0& xb = xq[(t0 + k) * nb + b];
        const float32x4_t d = vdupq_n_f32(dw * fp16_to_fp32(xb.d));
        acc[r][k][0] = vfmaq_f32(acc[r][k][0], d, vcvtq_f32_s32(lanes4(q.lo, xb.qs)));
        acc[r][k][1] = vfmaq_f32(acc[r][k][1], d, vcvtq_f32_s32(lanes4(q.hi, xb.qs + 16)));
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < K; ++k) y[(t0 + k) * w.out + o + r] = neon::reduce8(acc[r][k][0], acc[r][k][1]);
  }
}

// Q4_0 and IQ4_NL matrices of a multiple of 8 rows, which the reference repacks (dot32_repacked):
// per output one float lane, acc = fma(block sum, d_w * d_x, acc). Four rows share a vector:
// their exact block sums folded by pairwise additions, their scales multiplied by the activation's.
template <class Block, int K>
void repacked_tile(const weight& w, std::int64_t o, const gguf::block_q8_0* xq, std::int64_t nb, std::int64_t t0,
                   float* y) {
  const Block* rows[4];
  for (int r = 0; r < 4; ++r) rows[r] = reinterpret_cast<const Block*>(w.row(o + r));
  float32x4_t acc[K];
  for (auto& a : acc) a = vdupq_n_f32(0.0f);
  for (std::int64_t b = 0; b < nb; ++b) {
    quants32 q[4];
    float dw[4];
    for (int r = 0; r < 4; ++r) {
      q[r] = load_quants(rows[r][b]);
      dw[r] = fp16_to_fp32(rows[r][b].d);
    }
    const float32x4_t dw4 = vld1q_f32(dw);
    for (int k = 0; k < K; ++k) {
      const gguf::block_q8_0& xb = xq[(t0 + k) * nb + b];
      int32x4_t sums[4];
      for (int r = 0; r < 4; ++r) sums[r] = vaddq_s32(lanes4(q[r].lo, xb.qs), lanes4(q[r].hi, xb.qs + 16));
      const int32x4_t isum = vpaddq_s32(vpaddq_s32(sums[0], sums[1]), vpaddq_s32(sums[2], sums[3]));
      acc[k] = vfmaq_f32(acc[k], vcvtq_f32_s32(isum), vmulq_f32(dw4, vdupq_n_f32(fp16_to_fp32(xb.d))));
    }
  }
  for (int k = 0; k < K; ++k) vst1q_f32(y + (t0 + k) * w.out + o, acc[k]);
}

// ggml_vec_dot_iq4_nl_q8_0 (reference: dot_iq4_nl_vec in ref_dot_repack.cpp), an IQ4_NL matrix
// the reference does not repack times one activation row: blocks alternate between two 8-lane
// accumulators, summed before the reduction; an odd last block is added in scalar code.
float iq4_nl_vec(const gguf::block_iq4_nl* row, const gguf::block_q8_0* x, std::int64_t nb) {
  float32x4_t acc[2][2] = {{vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}};
  std::int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    for (int h = 0; h < 2; ++h) {
      const quants32 q = load_quants(row[b + h]);
      const float32x4_t d = vdupq_n_f32(fp16_to_fp32(x[b + h].d) * fp16_to_fp32(row[b + h].d));
      acc[h][0] = vfmaq_f32(acc[h][0], d, vcvtq_f32_s32(lanes4(q.lo, x[b + h].qs)));
      acc[h][1] = vfmaq_f32(acc[h][1], d, vcvtq_f32_s32(lanes4(q.hi, x[b + h].qs + 16)));
    }
  }
  float sum = neon::reduce8(vaddq_f32(acc[0][0], acc[1][0]), vaddq_f32(acc[0][1], acc[1][1]));
  if (b < nb) {
    const quants32 q = load_quants(row[b]);
    const int s = vaddvq_s32(lanes4(q.lo, x[b].qs)) + vaddvq_s32(lanes4(q.hi, x[b].qs + 16));
    sum = std::fma(fp16_to_fp32(x[b].d) * fp16_to_fp32(row[b].d), static_cast<float>(s), sum);
  }
  return sum;
}

template <class Block, int R>
void rows_of(const weight& w, std::int64_t o, const gguf::block_q8_0* xq, std::int64_t nb, std::int64_t n_tokens, float* y) {
  constexpr bool repackable = std::is_same_v<Block, gguf::block_q4_0> || std::is_same_v<Block, gguf::block_iq4_nl>;
  std::int64_t t = 0;
  if (repackable && w.out % 8 == 0) {
    static_assert(R == 4 || R == 1);
    if constexpr (R == 4) {
      for (; t + 4 <= n_tokens; t += 4) repacked_tile<Block, 4>(w, o, xq, nb, t, y);
      for (; t < n_tokens; ++t) repacked_tile<Block, 1>(w, o, xq, nb, t, y);
    }
    return;  // 8 divides the row count, so groups of 4 rows cover it
  }
  if (std::is_same_v<Block, gguf::block_iq4_nl> && n_tokens == 1) {
    for (int r = 0; r < R; ++r) {
      y[o + r] = iq4_nl_vec(reinterpret_cast<const gguf::block_iq4_nl*>(w.row(o + r)), xq, nb);
    }
    return;
  }
  for (; t + 4 <= n_tokens; t += 4) lanes8_tile<Block, R, 4>(w, o, xq, nb, t, y);
  for (; t < n_tokens; ++t) lanes8_tile<Block, R, 1>(w, o, xq, nb, t, y);
}

template <class Block>
void matmul32(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / 32;
  std::vector<gguf::block_q8_0> xq(static_cast<std::size_t>(nb * n_tokens));
  for (std::int64_t t = 0; t < n_tokens; ++t) quantize_act_q8_0(x + t * w.in, xq.data() + t * nb, w.in);
  pool.parallel_for((w.out + 3) / 4, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t g = begin; g < end; ++g) {
      if (4 * g + 4 <= w.out) {
        rows_of<Block, 4>(w, 4 * g, xq.data(), nb, n_tokens, y);
      } else {
        for (std::int64_t o = 4 * g; o < w.out; ++o) rows_of<Block, 1>(w, o, xq.data(), nb, n_tokens, y);
      }
    }
  });
}

// Q3_K / Q5_K / Q6_K (reference: ref_kquants.hpp): the same unpacked rows and float steps, the
// super-block's integer lanes from SDOT: lanes 0-3 take the first 16 elements of each group of
// 32 times the group's first scale, lanes 4-7 the other 16 times its second.
void block_lanes_sdot(const std::int8_t* q, const std::int8_t* sc, const std::int8_t* x, std::int32_t* lanes) {
  neon::lanes_by_scale_pairs(q, sc, x, lanes);
}

// Q4_K (reference: ref_q4k.hpp): the sub-block sums and lanes of a super-block from SDOT.
struct sdot_ints {
  static void sub_block_sums(const std::int8_t* q, const std::int8_t* x, int* sums) {
    for (int g = 0; g < 8; ++g) {
      sums[g] = vaddvq_s32(vaddq_s32(lanes4(vld1q_s8(q + 32 * g), x + 32 * g), lanes4(vld1q_s8(q + 32 * g + 16), x + 32 * g + 16)));
    }
  }
  static void lanes(const std::int8_t* q, const std::uint8_t* sc, const std::int8_t* x, std::int32_t* lanes) {
    int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
    for (int g = 0; g < 8; ++g) {
      lo = vmlaq_n_s32(lo, lanes4(vld1q_s8(q + 32 * g), x + 32 * g), sc[g]);
      hi = vmlaq_n_s32(hi, lanes4(vld1q_s8(q + 32 * g + 16), x + 32 * g + 16), sc[g]);
    }
    vst1q_s32(lanes, lo);
    vst1q_s32(lanes + 4, hi);
  }
};

// The grid i-quants and ternary types (reference: iquant_dots.hpp with its scalar lanes): the
// reference's block decoders, the super-block's 8 lanes from SDOT (elements 0-15 of each 32 in
// lanes 0-3, 16-31 in lanes 4-7, as the x86 kernels' maddubs pairs), its float steps.
struct sdot_iquant_lanes {
  static void lanes(const iquant::decoded& b, const std::int8_t* q, int* lane) { neon::lanes_by_scale_pairs(b.w, b.scale16, q, lane); }

  static void accumulate(float* acc, float d, const int* lane) {
    const float32x4_t dv = vdupq_n_f32(d);
    vst1q_f32(acc, vfmaq_f32(vld1q_f32(acc), dv, vcvtq_f32_s32(vld1q_s32(lane))));
    vst1q_f32(acc + 4, vfmaq_f32(vld1q_f32(acc + 4), dv, vcvtq_f32_s32(vld1q_s32(lane + 4))));
  }

  // Digits 0..2 times activations, lane k over elements 4k..4k+3 of every 32, minus the
  // activation sums bsums[2k] + bsums[2k + 1].
  static void ternary(const std::uint8_t* t, const gguf::block_q8_K& y, int* lane) {
    int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
    for (int c = 0; c < 8; ++c) {
      lo = vaddq_s32(lo, lanes4(vreinterpretq_s8_u8(vld1q_u8(t + 32 * c)), y.qs + 32 * c));
      hi = vaddq_s32(hi, lanes4(vreinterpretq_s8_u8(vld1q_u8(t + 32 * c + 16)), y.qs + 32 * c + 16));
    }
    const int16x8_t bs_lo = vld1q_s16(y.bsums), bs_hi = vld1q_s16(y.bsums + 8);
    vst1q_s32(lane, vsubq_s32(lo, vpaddlq_s16(bs_lo)));
    vst1q_s32(lane + 4, vsubq_s32(hi, vpaddlq_s16(bs_hi)));
  }
};

constexpr exact_matmul k_table[] = {
    {tensor_type::q8_0, matmul32<gguf::block_q8_0>},
    {tensor_type::q4_0, matmul32<gguf::block_q4_0>},
    {tensor_type::q5_0, matmul32<gguf::block_q5_0>},
    {tensor_type::iq4_nl, matmul32<gguf::block_iq4_nl>},
    {tensor_type::q3_K, kquants::matmul_k<tensor_type::q3_K, block_lanes_sdot>},
    {tensor_type::q4_K, q4k::matmul_q4_K<sdot_ints>},
    {tensor_type::q5_K, kquants::matmul_k<tensor_type::q5_K, block_lanes_sdot>},
    {tensor_type::q6_K, kquants::matmul_k<tensor_type::q6_K, block_lanes_sdot>},
};

}  // namespace

std::span<const exact_matmul> fast_matmuls() {
  static const auto table = [] {
    std::vector<exact_matmul> t(std::begin(k_table), std::end(k_table));
    for (const exact_matmul& m : iquant::record_matmuls<sdot_iquant_lanes>) t.push_back(m);
    for (const exact_matmul& m : neon::legacy_matmuls()) t.push_back(m);
    for (const exact_matmul& m : neon::float_matmuls()) t.push_back(m);
    return t;
  }();
  return table;
}
std::size_t pack_weight(weight&) { return 0; }

}  // namespace spite::dispatch::cpu

#endif
