// NEON versions of the Q4_1, Q5_1 and Q2_K matmuls (the contract of simd_arm_neon.cpp: the
// reference's exact integer sums, then its float operations in its order, so its bits).
// References: dot_q4_1_q5_1 in ref_dot_legacy.cpp, ref_q2k.hpp.
#include "simd_arm_neon.hpp"

#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <cmath>
#include <cstring>
#include <vector>

#include "ref_q2k.hpp"
#include "spite/core/half.hpp"
#include "spite/gguf/blocks.hpp"

namespace spite::dispatch::cpu::neon {
namespace {

using gguf::tensor_type;

// ---- Q4_1 / Q5_1: Q8_1 activations, the unsigned quants (at most 31, so SDOT's signed bytes
// hold them), 8 lanes of 4 products with one fma each (d_w * d_x), the min term m_w * s_x as a
// scalar chain of fmas added after the lane reduction.

inline quants32 unsigned_quants(const gguf::block_q4_1& b) {
  const uint8x16_t v = vld1q_u8(b.qs);
  return {vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), vreinterpretq_s8_u8(vshrq_n_u8(v, 4))};
}

inline quants32 unsigned_quants(const gguf::block_q5_1& b) {
  std::uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  const uint8x16_t v = vld1q_u8(b.qs);
  return {vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0F)), high_bits16(qh, 0))),
          vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), high_bits16(qh, 2)))};
}

// R weight rows x K activation rows, each block unpacked once for the K rows.
template <class Block, int R, int K>
void q_1_tile(const weight& w, std::int64_t o, const gguf::block_q8_1* xq, std::int64_t nb, std::int64_t t0, float* y) {
  const Block* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const Block*>(w.row(o + r));
  float32x4_t acc[R][K][2];
  float summs[R][K] = {};
  for (auto& row : acc) {
    for (auto& a : row) a[0] = a[1] = vdupq_n_f32(0.0f);
  }
  for (std::int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < R; ++r) {
      const quants32 q = unsigned_quants(rows[r][b]);
      const float dw = fp16_to_fp32(rows[r][b].d), mw = fp16_to_fp32(rows[r][b].m);
      for (int k = 0; k < K; ++k) {
        const gguf::block_q8_1& xb = xq[(t0 + k) * nb + b];
        summs[r][k] = std::fma(mw, fp16_to_fp32(xb.s), summs[r][k]);
        const float32x4_t d = vdupq_n_f32(dw * fp16_to_fp32(xb.d));
        acc[r][k][0] = vfmaq_f32(acc[r][k][0], d, vcvtq_f32_s32(lanes4(q.lo, xb.qs)));
        acc[r][k][1] = vfmaq_f32(acc[r][k][1], d, vcvtq_f32_s32(lanes4(q.hi, xb.qs + 16)));
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < K; ++k) y[(t0 + k) * w.out + o + r] = reduce8(acc[r][k][0], acc[r][k][1]) + summs[r][k];
  }
}

template <class Block>
void matmul_q_1(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / gguf::qk_legacy;
  std::vector<gguf::block_q8_1> xq(static_cast<std::size_t>(nb * n_tokens));
  for (std::int64_t t = 0; t < n_tokens; ++t) quantize_act_q8_1(x + t * w.in, xq.data() + t * nb, w.in);
  pool.parallel_for((w.out + 3) / 4, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t g = begin; g < end; ++g) {
      std::int64_t t = 0;
      if (4 * g + 4 <= w.out) {
        for (; t + 4 <= n_tokens; t += 4) {
          q_1_tile<Block, 2, 4>(w, 4 * g, xq.data(), nb, t, y);
          q_1_tile<Block, 2, 4>(w, 4 * g + 2, xq.data(), nb, t, y);
        }
        for (; t < n_tokens; ++t) q_1_tile<Block, 4, 1>(w, 4 * g, xq.data(), nb, t, y);
      } else {
        for (std::int64_t o = 4 * g; o < w.out; ++o) {
          for (t = 0; t < n_tokens; ++t) q_1_tile<Block, 1, 1>(w, o, xq.data(), nb, t, y);
        }
      }
    }
  });
}

// ---- Q2_K (reference: ref_q2k.hpp): the rows it unpacks and its float steps, the exact
// integers of each super-block from SDOT.
struct sdot_q2_K_ints {
  static void sub_block_sums(const std::int8_t* q, const std::int8_t* x, int* sums) {
    for (int j = 0; j < 16; ++j) sums[j] = vaddvq_s32(lanes4(vld1q_s8(q + 16 * j), x + 16 * j));
  }
  static void lanes(const std::int8_t* q, const std::uint8_t* sc, const std::int8_t* x, std::int32_t* lanes) {
    lanes_by_scale_pairs(q, sc, x, lanes);
  }
};

constexpr exact_matmul k_table[] = {
    {tensor_type::q4_1, matmul_q_1<gguf::block_q4_1>},
    {tensor_type::q5_1, matmul_q_1<gguf::block_q5_1>},
    {tensor_type::q2_K, q2k::matmul_q2_K<sdot_q2_K_ints>},
};

}  // namespace

std::span<const exact_matmul> legacy_matmuls() { return k_table; }

}  // namespace spite::dispatch::cpu::neon

#endif
