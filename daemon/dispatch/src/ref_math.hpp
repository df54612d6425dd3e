// Scalar twins of the reference engine's vector math, so that results round the same way:
// its exp (a polynomial from Arm's optimized routines, used in softmax and SiLU on AVX-512
// machines) and the order in which it reduces 16 lanes.
#pragma once

#include <cmath>
#include <limits>

namespace spite::dispatch::cpu {

inline float ref_expf(float x) {
  if (x == -std::numeric_limits<float>::infinity()) return 0.0f;
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  if (std::fabs(n) > 192.0f) return n > 0 ? std::numeric_limits<float>::infinity() : 0.0f;
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, std::fma(0x1.ffffecp-1f, b, 1.0f));
  return std::ldexp(j, static_cast<int>(n));
}

// silu as the reference evaluates element i of a row of n: whole 16-element chunks use the
// vector exp, the tail the C library's.
inline float ref_silu(float x, bool vector_lane) {
  const float e = vector_lane ? ref_expf(-x) : std::exp(-x);
  return x / (1.0f + e);
}

// Horizontal sum of 16 lanes in the order of the AVX-512 reduction: halves, then quarters, ...
inline float reduce16(const float* v) {
  float s8[8], s4[4];
  for (int i = 0; i < 8; ++i) s8[i] = v[i] + v[i + 8];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  const float s2a = s4[0] + s4[2], s2b = s4[1] + s4[3];
  return s2a + s2b;
}

}  // namespace spite::dispatch::cpu
