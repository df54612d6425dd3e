// Scalar reference dequantizers of the ternary types TQ1_0 and TQ2_0 (BitNet b1.58 / TriLM
// weights: every value is -d, 0 or +d with one fp16 d per 256-element block).
//
// Values are (t - 1) * d with t in {0, 1, 2}: exact in float32 and identical to ggml, including
// the sign of zero ((float)0 * d takes the sign of d).

#include <cstdint>

#include "quants/quants.hpp"
#include "spite/core/half.hpp"
#include "spite/gguf/blocks.hpp"

namespace spite::gguf::quants {

namespace {

// A byte b packs ternary digits as a base-3 fixed-point fraction: b ~= ceil(256 * v / 243) for the
// 5-digit number v (first digit most significant). Multiplying by 3^k (mod 256) shifts digit k to
// the front, and the front digit is then floor(3 * b / 256).
inline int ternary_digit(std::uint8_t b, std::uint8_t pow3) {
  const auto shifted = static_cast<std::uint8_t>(b * pow3);  // wraps mod 256 on purpose
  return (shifted * 3) >> 8;
}

constexpr std::uint8_t k_pow3[5] = {1, 3, 9, 27, 81};

}  // namespace

// TQ1_0 (1.69 bpw), per 256 values:
//   qs[0..31]:  5 digits each; digit k of byte m is element 32k + m      -> elements   0..159
//   qs[32..47]: 5 digits each; digit k of byte m is element 160 + 16k + m -> elements 160..239
//   qh[0..3]:   4 digits each; digit k of byte m is element 240 + 4k + m  -> elements 240..255
void dequantize_row_tq1_0(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_tq1_0*>(src);
  const std::int64_t nb = n / qk_k;
  constexpr int n_qs = sizeof(block_tq1_0::qs);   // 48
  constexpr int n_qs32 = n_qs - n_qs % 32;        // 32: the part laid out in runs of 32
  constexpr int n_qh = sizeof(block_tq1_0::qh);   // 4
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i) {
    const block_tq1_0& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < n_qs32; j += 32) {
      for (int k = 0; k < 5; ++k) {
        for (int m = 0; m < 32; ++m) {
          *y++ = static_cast<float>(ternary_digit(b.qs[j + m], k_pow3[k]) - 1) * d;
        }
      }
    }
    for (int j = n_qs32; j < n_qs; j += 16) {
      for (int k = 0; k < 5; ++k) {
        for (int m = 0; m < 16; ++m) {
          *y++ = static_cast<float>(ternary_digit(b.qs[j + m], k_pow3[k]) - 1) * d;
        }
      }
    }
    for (int k = 0; k < 4; ++k) {
      for (int m = 0; m < n_qh; ++m) {
        *y++ = static_cast<float>(ternary_digit(b.qh[m], k_pow3[k]) - 1) * d;
      }
    }
  }
}

// TQ2_0 (2.06 bpw): 2-bit digits t in {0, 1, 2}; in each run of 32 bytes, bits 2k..2k+1 of byte m
// are element 32k + m of that 128-element half.
void dequantize_row_tq2_0(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_tq2_0*>(src);
  const std::int64_t nb = n / qk_k;
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i) {
    const block_tq2_0& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < qk_k / 4; j += 32) {
      for (int k = 0; k < 4; ++k) {
        for (int m = 0; m < 32; ++m) {
          const int t = (b.qs[j + m] >> (2 * k)) & 3;
          *y++ = static_cast<float>(t - 1) * d;
        }
      }
    }
  }
}

}  // namespace spite::gguf::quants
