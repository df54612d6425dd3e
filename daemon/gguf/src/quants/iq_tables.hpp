// Codebooks defined by the GGUF i-quant formats (ggml, MIT): format constants, reformatted.
//
// The lattice tables pack one group of quant magnitudes per entry, element j in byte j (least
// significant byte first), so `(entry >> 8 * j) & 0xff` is element j on any host. Their bodies are
// in iq_tables.cpp (IQ2 / IQ3 grids) and iq1s_grid.cpp (the 2048-entry IQ1 grid).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

namespace spite::gguf::quants::iq {

// IQ2_XXS / IQ2_XS / IQ2_S: groups of 8 magnitudes from {8, 25, 43}, indexed by 8 / 9 / 10 bits.
extern const std::uint64_t iq2xxs_grid[256];
extern const std::uint64_t iq2xs_grid[512];
extern const std::uint64_t iq2s_grid[1024];

// IQ3_XXS: groups of 4 magnitudes from {4, 12, 20, 28, 36, 44, 52, 62}, indexed by 8 bits.
extern const std::uint32_t iq3xxs_grid[256];
// IQ3_S: groups of 4 odd magnitudes 1..15, indexed by 9 bits.
extern const std::uint32_t iq3s_grid[512];

// IQ1_S / IQ1_M: groups of 8 int8 values from {-1, 0, +1} (0xff = -1), indexed by 11 bits.
extern const std::uint64_t iq1s_grid[2048];

// Bit j of a sign byte negates element j of a group of 8.
inline constexpr std::uint8_t kmask_iq2xs[8] = {1, 2, 4, 8, 16, 32, 64, 128};

// Sign patterns of a group of 8: the format stores 7 sign bits; the 8th is implied so that the
// number of negated elements is even. Entry i = i | (0x80 if i has an odd number of set bits).
inline constexpr std::array<std::uint8_t, 128> ksigns_iq2xs = [] {
  std::array<std::uint8_t, 128> t{};
  for (unsigned i = 0; i < 128; ++i) {
    unsigned ones = 0;
    for (unsigned b = i; b != 0; b >>= 1) ones += b & 1u;
    t[i] = static_cast<std::uint8_t>(i | ((ones & 1u) << 7));
  }
  return t;
}();
static_assert(ksigns_iq2xs[1] == 129 && ksigns_iq2xs[3] == 3 && ksigns_iq2xs[127] == 255);

// IQ4_NL / IQ4_XS: the 16 non-linear 4-bit levels (roughly uniform in the quantile of a normal).
inline constexpr std::int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                  1,    13,   25,  38,  53,  69,  89,  113};
// Their magnitudes (the SIMD kernels multiply |value| by the activations with the value's sign).
alignas(16) inline constexpr std::int8_t kvalues_iq4nl_magnitudes[16] = {127, 104, 83, 65, 49, 35, 22, 10,
                                                                         1,   13,  25, 38, 53, 69, 89, 113};
static_assert(kvalues_iq4nl_magnitudes[0] == -kvalues_iq4nl[0] && kvalues_iq4nl_magnitudes[7] == -kvalues_iq4nl[7] &&
              kvalues_iq4nl_magnitudes[15] == kvalues_iq4nl[15]);

// MXFP4: the E2M1 codes' values, doubled so that every entry is an integer.
inline constexpr std::int8_t kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// MXFP4's E8M0 shared exponent as a float, halved for the doubled values above (2^(e - 128);
// e < 2 gives the subnormals 2^-127 and 2^-126).
inline float e8m0_to_fp32_half(std::uint8_t e) {
  const std::uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<std::uint32_t>(e - 1) << 23);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// IQ1_S / IQ1_M: every group is shifted by +-delta (sign stored per group) before scaling.
inline constexpr float iq1s_delta = 0.125f;
inline constexpr float iq1m_delta = 0.125f;

}  // namespace spite::gguf::quants::iq
