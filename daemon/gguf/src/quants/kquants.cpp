// Scalar reference dequantizers of the K-quant family (Q2_K .. Q6_K and Q8_K).
//
// Every formula below is evaluated in float32 in the same order as ggml's reference code, so the
// output is bit-identical to it (the golden data checks sha256 of the floats):
//   * Q3_K, Q6_K, Q8_K: products of an fp16 (or f32) scale and small integers: exact.
//   * Q2_K, Q4_K, Q5_K: (sub-scale * q) - (sub-min), where sub-scale = d * sc and sub-min =
//     dmin * m are first rounded to float (they are exact: 11-bit * 6-bit), and the final
//     "exact product minus exact offset" is rounded once (the same with or without FMA).
// Block layouts are documented in spite/gguf/blocks.hpp.

#include <cstdint>
#include <cstring>

#include "quants/kquants_common.hpp"
#include "quants/quants.hpp"
#include "spite/core/half.hpp"
#include "spite/gguf/blocks.hpp"

namespace spite::gguf::quants {

// Q2_K: 16 sub-blocks of 16, each with a 4-bit scale (low nibble) and 4-bit min (high nibble).
// The 2-bit quants of a 128-element half are spread over 32 bytes, 4 planes of 2 bits each.
void dequantize_row_q2_K(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_q2_K*>(src);
  const std::int64_t nb = n / qk_k;
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i) {
    const block_q2_K& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    const std::uint8_t* q = b.qs;
    int is = 0;
    for (int half = 0; half < qk_k; half += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        // Two sub-blocks per bit plane: bytes 0..15 then bytes 16..31.
        for (int part = 0; part < 2; ++part) {
          const std::uint8_t sc = b.scales[is++];
          const float dl = d * static_cast<float>(sc & 0xF);
          const float ml = dmin * static_cast<float>(sc >> 4);
          const std::uint8_t* qq = q + 16 * part;
          for (int l = 0; l < 16; ++l) {
            *y++ = dl * static_cast<float>((qq[l] >> shift) & 3) - ml;
          }
        }
      }
      q += 32;
    }
  }
}

// Q3_K: 16 sub-blocks of 16 with signed 6-bit scales (stored +32), 2 low bits per quant in qs and
// the third bit in hmask; a clear hmask bit means the quant is offset by -4.
void dequantize_row_q3_K(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_q3_K*>(src);
  const std::int64_t nb = n / qk_k;
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i) {
    const block_q3_K& b = blocks[i];
    const float d_all = fp16_to_fp32(b.d);

    // Unpack the 16 scales: low 4 bits from the nibbles of bytes 0..7 (sub-blocks 0..7 in the low
    // nibbles, 8..15 in the high ones), high 2 bits from bytes 8..11 (byte 8 + j%4, pair j/4).
    int scales[16];
    for (int j = 0; j < 16; ++j) {
      const int lo = j < 8 ? (b.scales[j] & 0xF) : (b.scales[j - 8] >> 4);
      const int hi = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
      scales[j] = (lo | (hi << 4)) - 32;
    }

    const std::uint8_t* q = b.qs;
    const std::uint8_t* hm = b.hmask;
    std::uint8_t m = 1;
    int is = 0;
    for (int half = 0; half < qk_k; half += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part) {
          const float dl = d_all * static_cast<float>(scales[is++]);
          const std::uint8_t* qq = q + 16 * part;
          const std::uint8_t* hh = hm + 16 * part;
          for (int l = 0; l < 16; ++l) {
            const int v = ((qq[l] >> shift) & 3) - ((hh[l] & m) ? 0 : 4);
            *y++ = dl * static_cast<float>(v);
          }
        }
        m = static_cast<std::uint8_t>(m << 1);
      }
      q += 32;
    }
  }
}

// Q4_K: 8 sub-blocks of 32 with 6-bit scale and min; each 64-element chunk uses 32 bytes, low
// nibbles for the first 32 elements and high nibbles for the next 32.
void dequantize_row_q4_K(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_q4_K*>(src);
  const std::int64_t nb = n / qk_k;
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i) {
    const block_q4_K& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    const std::uint8_t* q = b.qs;
    for (int is = 0; is < 8; is += 2) {
      std::uint8_t sc, m;
      unpack_scale_min_k4(is, b.scales, sc, m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = dmin * static_cast<float>(m);
      unpack_scale_min_k4(is + 1, b.scales, sc, m);
      const float d2 = d * static_cast<float>(sc);
      const float m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
      q += 32;
    }
  }
}

// Q5_K: Q4_K plus a fifth bit per quant in qh; chunk c (64 elements) uses bits 2c and 2c+1.
void dequantize_row_q5_K(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_q5_K*>(src);
  const std::int64_t nb = n / qk_k;
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i) {
    const block_q5_K& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    const std::uint8_t* ql = b.qs;
    const std::uint8_t* qh = b.qh;
    std::uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2) {
      std::uint8_t sc, m;
      unpack_scale_min_k4(is, b.scales, sc, m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = dmin * static_cast<float>(m);
      unpack_scale_min_k4(is + 1, b.scales, sc, m);
      const float d2 = d * static_cast<float>(sc);
      const float m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        const int v = (ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0);
        *y++ = d1 * static_cast<float>(v) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        const int v = (ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0);
        *y++ = d2 * static_cast<float>(v) - m2;
      }
      ql += 32;
      u1 = static_cast<std::uint8_t>(u1 << 2);
      u2 = static_cast<std::uint8_t>(u2 << 2);
    }
  }
}

// Q6_K: 16 sub-blocks of 16 with signed 8-bit scales; 4 low bits per quant in ql, 2 high bits in
// qh, stored +32. Each 128-element half uses 64 ql bytes and 32 qh bytes, laid out as 4 rows of 32.
void dequantize_row_q6_K(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_q6_K*>(src);
  const std::int64_t nb = n / qk_k;
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i) {
    const block_q6_K& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const std::uint8_t* ql = b.ql;
    const std::uint8_t* qh = b.qh;
    const std::int8_t* sc = b.scales;
    for (int half = 0; half < qk_k; half += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

// Q8_K: one f32 scale and 256 int8 quants (the bsums are only used by dot products).
void dequantize_row_q8_K(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_q8_K*>(src);
  const std::int64_t nb = n / qk_k;
  for (std::int64_t i = 0; i < nb; ++i) {
    const float d = blocks[i].d;
    for (int j = 0; j < qk_k; ++j) dst[i * qk_k + j] = d * static_cast<float>(blocks[i].qs[j]);
  }
}

}  // namespace spite::gguf::quants
