// Block layouts of the quantized GGUF tensor types, byte for byte as they are stored in files.
// Every struct is standard-layout with no padding; the static_asserts pin the on-disk size.
#pragma once

#include <cstdint>

namespace spite::gguf {

// IEEE-754 binary16 bits as stored in the file (see spite/core/half.hpp for conversion).
using half_bits = std::uint16_t;

inline constexpr int qk_legacy = 32;  // elements per block of the Q4_0 .. Q8_1 family
inline constexpr int qk_k = 256;      // elements per super-block of the K / IQ / TQ families
inline constexpr int k_scale_size = 12;

struct block_q4_0 { half_bits d; std::uint8_t qs[qk_legacy / 2]; };
struct block_q4_1 { half_bits d, m; std::uint8_t qs[qk_legacy / 2]; };
struct block_q5_0 { half_bits d; std::uint8_t qh[4]; std::uint8_t qs[qk_legacy / 2]; };
struct block_q5_1 { half_bits d, m; std::uint8_t qh[4]; std::uint8_t qs[qk_legacy / 2]; };
struct block_q8_0 { half_bits d; std::int8_t qs[qk_legacy]; };
struct block_q8_1 { half_bits d, s; std::int8_t qs[qk_legacy]; };  // s = d * sum(qs)

struct block_q2_K {
  std::uint8_t scales[qk_k / 16];  // 4-bit scale | 4-bit min per 16 elements
  std::uint8_t qs[qk_k / 4];
  half_bits d, dmin;
};
struct block_q3_K {
  std::uint8_t hmask[qk_k / 8];
  std::uint8_t qs[qk_k / 4];
  std::uint8_t scales[12];  // 16 signed 6-bit scales, packed
  half_bits d;
};
struct block_q4_K {
  half_bits d, dmin;
  std::uint8_t scales[k_scale_size];  // 8 (scale, min) pairs of 6 bits
  std::uint8_t qs[qk_k / 2];
};
struct block_q5_K {
  half_bits d, dmin;
  std::uint8_t scales[k_scale_size];
  std::uint8_t qh[qk_k / 8];
  std::uint8_t qs[qk_k / 2];
};
struct block_q6_K {
  std::uint8_t ql[qk_k / 2];
  std::uint8_t qh[qk_k / 4];
  std::int8_t scales[qk_k / 16];
  half_bits d;
};
struct block_q8_K {
  float d;
  std::int8_t qs[qk_k];
  std::int16_t bsums[qk_k / 16];
};

struct block_iq2_xxs { half_bits d; std::uint16_t qs[qk_k / 8]; };
struct block_iq2_xs { half_bits d; std::uint16_t qs[qk_k / 8]; std::uint8_t scales[qk_k / 32]; };
struct block_iq2_s {
  half_bits d;
  std::uint8_t qs[qk_k / 4];
  std::uint8_t qh[qk_k / 32];
  std::uint8_t scales[qk_k / 32];
};
struct block_iq3_xxs { half_bits d; std::uint8_t qs[3 * qk_k / 8]; };
struct block_iq3_s {
  half_bits d;
  std::uint8_t qs[qk_k / 4];
  std::uint8_t qh[qk_k / 32];
  std::uint8_t signs[qk_k / 8];
  std::uint8_t scales[qk_k / 64];
};
struct block_iq1_s { half_bits d; std::uint8_t qs[qk_k / 8]; std::uint16_t qh[qk_k / 32]; };
struct block_iq1_m {
  std::uint8_t qs[qk_k / 8];
  std::uint8_t qh[qk_k / 16];
  std::uint8_t scales[qk_k / 32];  // also carries the fp16 super-block scale in its top nibbles
};
struct block_iq4_nl { half_bits d; std::uint8_t qs[qk_legacy / 2]; };
struct block_iq4_xs {
  half_bits d;
  std::uint16_t scales_h;
  std::uint8_t scales_l[qk_k / 64];
  std::uint8_t qs[qk_k / 2];
};
struct block_tq1_0 {
  std::uint8_t qs[(qk_k - 4 * qk_k / 64) / 5];  // 5 ternary digits per byte
  std::uint8_t qh[qk_k / 64];                   // 4 ternary digits per byte
  half_bits d;
};
struct block_tq2_0 { std::uint8_t qs[qk_k / 4]; half_bits d; };
struct block_mxfp4 { std::uint8_t e; std::uint8_t qs[qk_legacy / 2]; };  // e = E8M0 shared exponent

static_assert(sizeof(block_q4_0) == 18);
static_assert(sizeof(block_q4_1) == 20);
static_assert(sizeof(block_q5_0) == 22);
static_assert(sizeof(block_q5_1) == 24);
static_assert(sizeof(block_q8_0) == 34);
static_assert(sizeof(block_q8_1) == 36);
static_assert(sizeof(block_q2_K) == 84);
static_assert(sizeof(block_q3_K) == 110);
static_assert(sizeof(block_q4_K) == 144);
static_assert(sizeof(block_q5_K) == 176);
static_assert(sizeof(block_q6_K) == 210);
static_assert(sizeof(block_q8_K) == 292);
static_assert(sizeof(block_iq2_xxs) == 66);
static_assert(sizeof(block_iq2_xs) == 74);
static_assert(sizeof(block_iq2_s) == 82);
static_assert(sizeof(block_iq3_xxs) == 98);
static_assert(sizeof(block_iq3_s) == 110);
static_assert(sizeof(block_iq1_s) == 50);
static_assert(sizeof(block_iq1_m) == 56);
static_assert(sizeof(block_iq4_nl) == 18);
static_assert(sizeof(block_iq4_xs) == 136);
static_assert(sizeof(block_tq1_0) == 54);
static_assert(sizeof(block_tq2_0) == 66);
static_assert(sizeof(block_mxfp4) == 17);

}  // namespace spite::gguf
