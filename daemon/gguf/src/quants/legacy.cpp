// Plain types and the 32-element block family (Q4_0 .. Q8_1, MXFP4). The formulas follow the
// reference engine's exactly in float32, so dequantized values are bit-identical to it.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "iq_tables.hpp"
#include "quants.hpp"
#include "spite/core/half.hpp"
#include "spite/gguf/blocks.hpp"

namespace spite::gguf::quants {
namespace {

template <class T>
void widen(const void* src, float* dst, std::int64_t n) {
  const auto* p = static_cast<const unsigned char*>(src);
  for (std::int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));  // file data need not be aligned for T
    dst[i] = static_cast<float>(v);
  }
}

// Scale reciprocal that maps an all-zero block to zeros instead of NaN.
inline float inverse_or_zero(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

}  // namespace

void dequantize_row_f32(const void* src, float* dst, std::int64_t n) {
  if (n > 0) std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
}
void dequantize_row_f64(const void* src, float* dst, std::int64_t n) { widen<double>(src, dst, n); }
void dequantize_row_i8(const void* src, float* dst, std::int64_t n) { widen<std::int8_t>(src, dst, n); }
void dequantize_row_i16(const void* src, float* dst, std::int64_t n) { widen<std::int16_t>(src, dst, n); }
void dequantize_row_i32(const void* src, float* dst, std::int64_t n) { widen<std::int32_t>(src, dst, n); }
void dequantize_row_i64(const void* src, float* dst, std::int64_t n) { widen<std::int64_t>(src, dst, n); }

void dequantize_row_f16(const void* src, float* dst, std::int64_t n) {
  const auto* p = static_cast<const unsigned char*>(src);
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    dst[i] = fp16_to_fp32(h);
  }
}

void dequantize_row_bf16(const void* src, float* dst, std::int64_t n) {
  const auto* p = static_cast<const unsigned char*>(src);
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    dst[i] = bf16_to_fp32(h);
  }
}

void quantize_row_f32(const float* src, void* dst, std::int64_t n) {
  if (n > 0) std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
}

void quantize_row_f16(const float* src, void* dst, std::int64_t n) {
  auto* p = static_cast<unsigned char*>(dst);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t h = fp32_to_fp16(src[i]);
    std::memcpy(p + 2 * i, &h, 2);
  }
}

void quantize_row_bf16(const float* src, void* dst, std::int64_t n) {
  auto* p = static_cast<unsigned char*>(dst);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t h = fp32_to_bf16(src[i]);
    std::memcpy(p + 2 * i, &h, 2);
  }
}

// ---- Q4_0: 32 x 4-bit, symmetric: x = (q - 8) * d. Low nibbles hold elements 0..15.
void dequantize_row_q4_0(const void* src, float* dst, std::int64_t n) {
  const auto* b = static_cast<const block_q4_0*>(src);
  for (std::int64_t i = 0; i < n / qk_legacy; ++i, dst += qk_legacy) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < qk_legacy / 2; ++j) {
      dst[j] = static_cast<float>((b[i].qs[j] & 0x0f) - 8) * d;
      dst[j + qk_legacy / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void quantize_row_q4_0(const float* x, void* dst, std::int64_t n) {
  auto* b = static_cast<block_q4_0*>(dst);
  for (std::int64_t i = 0; i < n / qk_legacy; ++i, x += qk_legacy) {
    // The signed extreme maps to -8 so that the full 16-level range is used on its side.
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < qk_legacy; ++j) {
      if (std::fabs(x[j]) > amax) { amax = std::fabs(x[j]); max = x[j]; }
    }
    const float d = max / -8.0f;
    const float id = inverse_or_zero(d);
    b[i].d = fp32_to_fp16(d);
    for (int j = 0; j < qk_legacy / 2; ++j) {
      const auto q0 = std::min<std::uint8_t>(15, static_cast<std::int8_t>(x[j] * id + 8.5f));
      const auto q1 = std::min<std::uint8_t>(15, static_cast<std::int8_t>(x[j + 16] * id + 8.5f));
      b[i].qs[j] = static_cast<std::uint8_t>(q0 | (q1 << 4));
    }
  }
}

// ---- Q4_1: 32 x 4-bit, affine: x = q * d + m.
void dequantize_row_q4_1(const void* src, float* dst, std::int64_t n) {
  const auto* b = static_cast<const block_q4_1*>(src);
  for (std::int64_t i = 0; i < n / qk_legacy; ++i, dst += qk_legacy) {
    const float d = fp16_to_fp32(b[i].d);
    const float m = fp16_to_fp32(b[i].m);
    for (int j = 0; j < qk_legacy / 2; ++j) {
      dst[j] = static_cast<float>(b[i].qs[j] & 0x0f) * d + m;
      dst[j + qk_legacy / 2] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

void quantize_row_q4_1(const float* x, void* dst, std::int64_t n) {
  auto* b = static_cast<block_q4_1*>(dst);
  for (std::int64_t i = 0; i < n / qk_legacy; ++i, x += qk_legacy) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < qk_legacy; ++j) { lo = std::min(lo, x[j]); hi = std::max(hi, x[j]); }
    const float d = (hi - lo) / 15.0f;
    const float id = inverse_or_zero(d);
    b[i].d = fp32_to_fp16(d);
    b[i].m = fp32_to_fp16(lo);
    for (int j = 0; j < qk_legacy / 2; ++j) {
      const auto q0 = std::min<std::uint8_t>(15, static_cast<std::int8_t>((x[j] - lo) * id + 0.5f));
      const auto q1 = std::min<std::uint8_t>(15, static_cast<std::int8_t>((x[j + 16] - lo) * id + 0.5f));
      b[i].qs[j] = static_cast<std::uint8_t>(q0 | (q1 << 4));
    }
  }
}

// ---- Q5_0 / Q5_1: Q4 layout plus the fifth bit of element j in bit j of qh (little-endian u32).
namespace {
inline std::uint32_t load_qh(const std::uint8_t (&qh)[4]) {
  std::uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}
inline int fifth_bit(std::uint32_t qh, int j) { return static_cast<int>((qh >> j) & 1u) << 4; }
}  // namespace

void dequantize_row_q5_0(const void* src, float* dst, std::int64_t n) {
  const auto* b = static_cast<const block_q5_0*>(src);
  for (std::int64_t i = 0; i < n / qk_legacy; ++i, dst += qk_legacy) {
    const float d = fp16_to_fp32(b[i].d);
    const std::uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < qk_legacy / 2; ++j) {
      dst[j] = static_cast<float>(((b[i].qs[j] & 0x0f) | fifth_bit(qh, j)) - 16) * d;
      dst[j + 16] = static_cast<float>(((b[i].qs[j] >> 4) | fifth_bit(qh, j + 16)) - 16) * d;
    }
  }
}

void quantize_row_q5_0(const float* x, void* dst, std::int64_t n) {
  auto* b = static_cast<block_q5_0*>(dst);
  for (std::int64_t i = 0; i < n / qk_legacy; ++i, x += qk_legacy) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < qk_legacy; ++j) {
      if (std::fabs(x[j]) > amax) { amax = std::fabs(x[j]); max = x[j]; }
    }
    const float d = max / -16.0f;
    const float id = inverse_or_zero(d);
    b[i].d = fp32_to_fp16(d);
    std::uint32_t qh = 0;
    for (int j = 0; j < qk_legacy / 2; ++j) {
      const auto q0 = std::min<std::uint8_t>(31, static_cast<std::int8_t>(x[j] * id + 16.5f));
      const auto q1 = std::min<std::uint8_t>(31, static_cast<std::int8_t>(x[j + 16] * id + 16.5f));
      b[i].qs[j] = static_cast<std::uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<std::uint32_t>((q0 >> 4) & 1u) << j;
      qh |= static_cast<std::uint32_t>((q1 >> 4) & 1u) << (j + 16);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

void dequantize_row_q5_1(const void* src, float* dst, std::int64_t n) {
  const auto* b = static_cast<const block_q5_1*>(src);
  for (std::int64_t i = 0; i < n / qk_legacy; ++i, dst += qk_legacy) {
    const float d = fp16_to_fp32(b[i].d);
    const float m = fp16_to_fp32(b[i].m);
    const std::uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < qk_legacy / 2; ++j) {
      dst[j] = static_cast<float>((b[i].qs[j] & 0x0f) | fifth_bit(qh, j)) * d + m;
      dst[j + 16] = static_cast<float>((b[i].qs[j] >> 4) | fifth_bit(qh, j + 16)) * d + m;
    }
  }
}

void quantize_row_q5_1(const float* x, void* dst, std::int64_t n) {
  auto* b = static_cast<block_q5_1*>(dst);
  for (std::int64_t i = 0; i < n / qk_legacy; ++i, x += qk_legacy) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < qk_legacy; ++j) { lo = std::min(lo, x[j]); hi = std::max(hi, x[j]); }
    const float d = (hi - lo) / 31.0f;
    const float id = inverse_or_zero(d);
    b[i].d = fp32_to_fp16(d);
    b[i].m = fp32_to_fp16(lo);
    std::uint32_t qh = 0;
    for (int j = 0; j < qk_legacy / 2; ++j) {
      const auto q0 = static_cast<std::uint8_t>((x[j] - lo) * id + 0.5f);
      const auto q1 = static_cast<std::uint8_t>((x[j + 16] - lo) * id + 0.5f);
      b[i].qs[j] = static_cast<std::uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<std::uint32_t>((q0 >> 4) & 1u) << j;
      qh |= static_cast<std::uint32_t>((q1 >> 4) & 1u) << (j + 16);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

// ---- Q8_0 / Q8_1: 32 x int8 with one scale (Q8_1 adds d * sum(q), used by dot products).
void dequantize_row_q8_0(const void* src, float* dst, std::int64_t n) {
  const auto* b = static_cast<const block_q8_0*>(src);
  for (std::int64_t i = 0; i < n / qk_legacy; ++i, dst += qk_legacy) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < qk_legacy; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void dequantize_row_q8_1(const void* src, float* dst, std::int64_t n) {
  const auto* b = static_cast<const block_q8_1*>(src);
  for (std::int64_t i = 0; i < n / qk_legacy; ++i, dst += qk_legacy) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < qk_legacy; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

namespace {
// Shared by Q8_0 and Q8_1: returns the scale, fills q with round(x / d).
float quantize_block_q8(const float* x, std::int8_t* q) {
  float amax = 0.0f;
  for (int j = 0; j < qk_legacy; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = inverse_or_zero(d);
  for (int j = 0; j < qk_legacy; ++j) q[j] = static_cast<std::int8_t>(std::round(x[j] * id));
  return d;
}
}  // namespace

void quantize_row_q8_0(const float* x, void* dst, std::int64_t n) {
  auto* b = static_cast<block_q8_0*>(dst);
  for (std::int64_t i = 0; i < n / qk_legacy; ++i, x += qk_legacy) {
    b[i].d = fp32_to_fp16(quantize_block_q8(x, b[i].qs));
  }
}

void quantize_row_q8_1(const float* x, void* dst, std::int64_t n) {
  auto* b = static_cast<block_q8_1*>(dst);
  for (std::int64_t i = 0; i < n / qk_legacy; ++i, x += qk_legacy) {
    const float d = quantize_block_q8(x, b[i].qs);
    int sum = 0;
    for (int j = 0; j < qk_legacy; ++j) sum += b[i].qs[j];
    b[i].d = fp32_to_fp16(d);
    b[i].s = fp32_to_fp16(static_cast<float>(sum) * d);
  }
}

// ---- MXFP4: 32 x E2M1 with a shared E8M0 exponent (OCP microscaling format).
void dequantize_row_mxfp4(const void* src, float* dst, std::int64_t n) {
  const auto* b = static_cast<const block_mxfp4*>(src);
  for (std::int64_t i = 0; i < n / qk_legacy; ++i, dst += qk_legacy) {
    const float d = iq::e8m0_to_fp32_half(b[i].e);
    for (int j = 0; j < qk_legacy / 2; ++j) {
      dst[j] = static_cast<float>(iq::kvalues_mxfp4[b[i].qs[j] & 0x0f]) * d;
      dst[j + 16] = static_cast<float>(iq::kvalues_mxfp4[b[i].qs[j] >> 4]) * d;
    }
  }
}

namespace {
// The code of the E2M1 value nearest to v, v in the doubled units of kvalues_mxfp4; a tie goes to
// the smaller magnitude and anything past 12 (6.0) saturates, as OCP's conversion rules ask.
std::uint8_t nearest_e2m1(float v) {
  const float a = std::fabs(v);
  std::uint8_t best = 0;
  float best_error = a;
  for (std::uint8_t i = 1; i < 8; ++i) {
    const float error = std::fabs(a - static_cast<float>(iq::kvalues_mxfp4[i]));
    if (error < best_error) {
      best = i;
      best_error = error;
    }
  }
  return best != 0 && v < 0.0f ? static_cast<std::uint8_t>(best | 8) : best;
}
}  // namespace

// The shared exponent is OCP's floor(log2(amax)) - emax(E2M1) (emax = 2), written the way the
// reference engine computes it (floorf(log2f(amax))), so its files and ours agree; the largest
// element then lands in [4, 8) before rounding and may saturate to 6.
void quantize_row_mxfp4(const float* x, void* dst, std::int64_t n) {
  auto* b = static_cast<block_mxfp4*>(dst);
  for (std::int64_t i = 0; i < n / qk_legacy; ++i, x += qk_legacy) {
    float amax = 0.0f;
    for (int j = 0; j < qk_legacy; ++j) amax = std::max(amax, std::fabs(x[j]));
    const int e = amax > 0.0f && std::isfinite(amax) ? static_cast<int>(std::floor(std::log2(amax))) - 2 + 127
                                                     : (amax > 0.0f ? 254 : 0);
    b[i].e = static_cast<std::uint8_t>(std::clamp(e, 0, 254));  // 255 is E8M0's NaN
    // A division, not a reciprocal: 1 / 2^-128 (e = 0) is past float's range.
    const float d = iq::e8m0_to_fp32_half(b[i].e);
    for (int j = 0; j < qk_legacy / 2; ++j) {
      b[i].qs[j] = static_cast<std::uint8_t>(nearest_e2m1(x[j] / d) | (nearest_e2m1(x[j + 16] / d) << 4));
    }
  }
}

}  // namespace spite::gguf::quants
