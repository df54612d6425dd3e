// SIMD twins of the scalar pieces of the reference attention (cpu_attention.cpp) that give the
// same bits: the 16-lane f16 dot product, f16 widening and rounding, and the vector exp of a
// 16-key chunk. Null where the processor lacks AVX2 / FMA / F16C (simd_x86_attention.cpp).
#pragma once

#include <cstdint>

namespace spite::dispatch::cpu {

struct attention_simd {
  // 16 lane sums of products (no fused multiply-add), reduced as reduce16; n % 16 == 0.
  float (*dot16)(const float* a, const float* b, std::int64_t n);
  void (*widen)(const std::uint16_t* h, float* out, std::int64_t n);      // f16 -> f32
  void (*round_f16)(const float* in, float* out, std::int64_t n);          // f32 -> f16 -> f32
  void (*exp16)(float* chunk, float max);  // chunk[l] = ref_expf(chunk[l] - max), l < 16
};

const attention_simd* fast_attention();

}  // namespace spite::dispatch::cpu
