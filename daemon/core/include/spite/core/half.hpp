// IEEE-754 binary16 and bfloat16 conversions, bit exact and independent of the host FPU mode.
#pragma once

#include <bit>
#include <cstdint>

namespace spite {

// Exact widening: every binary16 value (including subnormals, inf, NaN) maps to one float.
constexpr float fp16_to_fp32(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);  // inf / NaN, payload kept
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal: normalise the mantissa.
    int shift = 0;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      ++shift;
    }
    man &= 0x3ffu;
    bits = sign | (static_cast<std::uint32_t>(113 - shift) << 23) | (man << 13);
  }
  return std::bit_cast<float>(bits);
}

// Round to nearest, ties to even; overflow gives inf, NaN stays NaN.
constexpr std::uint16_t fp32_to_fp16(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past max
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u) return sign;  // below half of the smallest subnormal
    const std::uint32_t exp = abs >> 23;
    const std::uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exp;  // 14 + (113 - exp - 1)
    std::uint32_t q = man >> shift;
    const std::uint32_t rem = man & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
    return static_cast<std::uint16_t>(sign | q);
  }
  std::uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15
  const std::uint32_t rem = r & 0x1fffu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<std::uint16_t>(sign | r);
}

// y[i] = fp32_to_fp16(x[i]) for i < n, with the processor's conversion where it has one.
void fp32_to_fp16_row(const float* x, std::uint16_t* y, std::int64_t n) noexcept;

constexpr float bf16_to_fp32(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

// Round to nearest even; NaN is kept quiet (as the reference converter does).
constexpr std::uint16_t fp32_to_bf16(float f) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 64u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

}  // namespace spite
