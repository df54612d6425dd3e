// Pieces the NEON kernel files share (simd_arm_neon.cpp, simd_arm_neon_legacy.cpp,
// simd_arm_neon_float.cpp): 64-bit ARM with the dot-product extension only.
#pragma once

#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>

#include <span>

#include "ref_math.hpp"
#include "ref_quant.hpp"

namespace spite::dispatch::cpu::neon {

// The 32 signed quants of a block, as two vectors of 16 in element order.
struct quants32 {
  int8x16_t lo, hi;
};

// The four int32 lanes of 4 products each for 16 quants: SDOT forms exactly the reference's
// lanes (each sums 4 consecutive int8 products).
inline int32x4_t lanes4(int8x16_t w, const std::int8_t* x) { return vdotq_s32(vdupq_n_s32(0), w, vld1q_s8(x)); }

// Bit 4 of the 16 elements whose fifth bits sit in qh bytes (first, first + 1) of a Q5_0 /
// Q5_1 block's 32-bit qh: 0x10 where the bit is set.
inline uint8x16_t high_bits16(std::uint32_t qh, int first) {
  static constexpr std::uint8_t bit_of[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bytes = vcombine_u8(vdup_n_u8(static_cast<std::uint8_t>(qh >> (8 * first))),
                                       vdup_n_u8(static_cast<std::uint8_t>(qh >> (8 * first + 8))));
  return vandq_u8(vtstq_u8(bytes, vld1q_u8(bit_of)), vdupq_n_u8(0x10));
}

// The reference's reduce8 of two 4-lane halves (lanes 0-3, 4-7).
inline float reduce8(float32x4_t lo, float32x4_t hi) {
  float lanes[8];
  vst1q_f32(lanes, lo);
  vst1q_f32(lanes + 4, hi);
  return cpu::reduce8(lanes);
}

// A super-block's 8 lanes: lanes 0-3 take the first 16 elements of each group g of 32 times
// sc[2g], lanes 4-7 the other 16 times sc[2g + 1] (the x86 kernels' maddubs pairs).
template <class Scale>
void lanes_by_scale_pairs(const std::int8_t* q, const Scale* sc, const std::int8_t* x, std::int32_t* lanes) {
  int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
  for (int g = 0; g < 8; ++g) {
    lo = vmlaq_n_s32(lo, lanes4(vld1q_s8(q + 32 * g), x + 32 * g), sc[2 * g]);
    hi = vmlaq_n_s32(hi, lanes4(vld1q_s8(q + 32 * g + 16), x + 32 * g + 16), sc[2 * g + 1]);
  }
  vst1q_s32(lanes, lo);
  vst1q_s32(lanes + 4, hi);
}

// Four f16 values widened (exact), or four floats loaded.
inline float32x4_t widen4(const std::uint16_t* h) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h))); }
inline float32x4_t widen4(const float* f) { return vld1q_f32(f); }

// The reference's reduce16 of 16 lanes held as four vectors.
inline float reduce16(const float32x4_t* v) {
  float lanes[16];
  for (int q = 0; q < 4; ++q) vst1q_f32(lanes + 4 * q, v[q]);
  return cpu::reduce16(lanes);
}

// simd_arm_neon_legacy.cpp: Q5_0, Q4_1, Q5_1, IQ4_NL, Q2_K.
std::span<const exact_matmul> legacy_matmuls();
// simd_arm_neon_float.cpp: F16, F32, BF16; the reference's f16 vector dot product.
std::span<const exact_matmul> float_matmuls();
float vec_dot_f16(const std::uint16_t* a, const float* x, std::int64_t n);

}  // namespace spite::dispatch::cpu::neon

#endif
