// Pieces shared by the K-quant dequantizers and quantizers.
#pragma once

#include <cmath>
#include <cstdint>

namespace spite::gguf::quants {

// The 12-byte packed (scale, min) table of Q4_K / Q5_K: 8 pairs of 6-bit values. Pairs 0..3 keep
// their low 6 bits in bytes 0..3 (scale) and 4..7 (min); pairs 4..7 keep their low 4 bits in the
// nibbles of bytes 8..11 and their top 2 bits in the spare top bits of bytes 0..7.
inline void unpack_scale_min_k4(int j, const std::uint8_t* q, std::uint8_t& sc, std::uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = static_cast<std::uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The element of largest magnitude, with its sign (the first one on ties); 0 for an empty range.
inline float signed_absmax(const float* x, int n, float* amax_out = nullptr) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax_out != nullptr) *amax_out = amax;
  return max;
}

}  // namespace spite::gguf::quants
