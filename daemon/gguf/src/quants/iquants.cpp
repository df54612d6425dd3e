// Scalar reference dequantizers of the i-quant family (IQ1_S .. IQ4_XS) and the IQ4_NL quantizer.
//
// The i-quants store, per group of 8 (or 4) weights, an index into a fixed lattice codebook
// (iq_tables.hpp) plus sign bits, and per 32 (or 16) weights a small integer sub-scale multiplying
// one fp16 scale per 256-weight super-block. Every dequantized value is
//     fp16 scale * small integer sub-scale * codebook magnitude * (+-1)
// (IQ1: * (codebook value +- 1/8); IQ4: * non-linear level), which fits in 24 bits, so the float32
// result is exact whatever the multiplication order and equals ggml's bit for bit, including the
// sign of zero (a zero scale times a negative factor gives -0.0 there and here).
//
// Multi-byte metadata packed inside byte arrays is decoded from its little-endian bytes, so the
// unpacking does not depend on the host's byte order. Block layouts: spite/gguf/blocks.hpp.
//
// The quantizer must evaluate its float sums in ggml's order: no -ffast-math, no FMA contraction
// (the build sets -ffp-contract=off for this file).

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>

#include "quants/iq_tables.hpp"
#include "quants/quants.hpp"
#include "spite/core/half.hpp"
#include "spite/gguf/blocks.hpp"

#if defined(__FAST_MATH__)
#error "iquants.cpp must not be compiled with -ffast-math (results must match ggml bit for bit)"
#endif

namespace spite::gguf::quants {

namespace {

using iq::kmask_iq2xs;
using iq::ksigns_iq2xs;
using iq::kvalues_iq4nl;

// Element j (0-based) of a packed codebook entry.
inline std::uint8_t grid_byte(std::uint64_t entry, int j) {
  return static_cast<std::uint8_t>(entry >> (8 * j));
}

// +1 or -1 for element j of a group, from its 8-bit sign mask.
inline float sign_factor(std::uint8_t signs, int j) {
  return (signs & kmask_iq2xs[j]) ? -1.0f : 1.0f;
}

inline std::uint32_t load_le32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

inline std::uint16_t load_le16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}

template <typename T>
inline const std::uint8_t* bytes_of(const T* p) {
  return reinterpret_cast<const std::uint8_t*>(p);
}

// Writes 8 values: scale * magnitude_j * sign_j, the magnitudes taken from a 64-bit grid entry.
inline void emit_signed_group8(float scale, std::uint64_t entry, std::uint8_t signs, float* y) {
  for (int j = 0; j < 8; ++j) {
    y[j] = scale * static_cast<float>(grid_byte(entry, j)) * sign_factor(signs, j);
  }
}

// Writes 8 values from two 4-magnitude grid entries (elements 0..3 and 4..7 of the group).
inline void emit_signed_group4x2(float scale, std::uint32_t lo, std::uint32_t hi,
                                 std::uint8_t signs, float* y) {
  for (int j = 0; j < 4; ++j) {
    y[j] = scale * static_cast<float>(grid_byte(lo, j)) * sign_factor(signs, j);
    y[j + 4] = scale * static_cast<float>(grid_byte(hi, j)) * sign_factor(signs, j + 4);
  }
}

// Writes 8 values: scale * (int8 codebook value + delta), the IQ1 reconstruction.
inline void emit_iq1_group8(float scale, std::uint64_t entry, float delta, float* y) {
  for (int j = 0; j < 8; ++j) {
    const auto v = static_cast<std::int8_t>(grid_byte(entry, j));
    y[j] = scale * (static_cast<float>(v) + delta);
  }
}

}  // namespace

// IQ2_XXS (2.06 bpw): per 32 weights, 8 bytes = 4 grid indices (bytes 0..3) then a little-endian
// uint32 holding four 7-bit sign-pattern indices (bits 0..27) and a 4-bit sub-scale (bits 28..31).
// Sub-scale s gives d * (s + 1/2) / 4.
void dequantize_row_iq2_xxs(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_iq2_xxs*>(src);
  const std::int64_t nb = n / qk_k;
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i) {
    const block_iq2_xxs& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const std::uint8_t* q = bytes_of(b.qs);
    for (int ib32 = 0; ib32 < qk_k / 32; ++ib32, q += 8) {
      const std::uint32_t meta = load_le32(q + 4);
      const float db = d * (0.5f + static_cast<float>(meta >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l, y += 8) {
        const std::uint8_t signs = ksigns_iq2xs[(meta >> (7 * l)) & 127];
        emit_signed_group8(db, iq::iq2xxs_grid[q[l]], signs, y);
      }
    }
  }
}

// IQ2_XS (2.31 bpw): one uint16 per group of 8: 9-bit grid index | 7-bit sign index << 9.
// Per 32 weights one byte of two 4-bit sub-scales: low nibble for groups 0-1, high for 2-3.
void dequantize_row_iq2_xs(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_iq2_xs*>(src);
  const std::int64_t nb = n / qk_k;
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i) {
    const block_iq2_xs& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const std::uint8_t* q = bytes_of(b.qs);
    for (int ib32 = 0; ib32 < qk_k / 32; ++ib32) {
      const float db[2] = {d * (0.5f + static_cast<float>(b.scales[ib32] & 0xf)) * 0.25f,
                           d * (0.5f + static_cast<float>(b.scales[ib32] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l, y += 8) {
        const std::uint16_t code = load_le16(q + 2 * (4 * ib32 + l));
        emit_signed_group8(db[l / 2], iq::iq2xs_grid[code & 511], ksigns_iq2xs[code >> 9], y);
      }
    }
  }
}

// IQ2_S (2.56 bpw): qs[0..31] are the low 8 bits of the 10-bit grid indices, qs[32..63] are plain
// 8-bit sign masks (one per group); qh[ib32] holds the top 2 index bits of the 4 groups of a 32.
// Sub-scales as in IQ2_XS.
void dequantize_row_iq2_s(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_iq2_s*>(src);
  const std::int64_t nb = n / qk_k;
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i) {
    const block_iq2_s& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const std::uint8_t* idx_lo = b.qs;
    const std::uint8_t* signs = b.qs + qk_k / 8;
    for (int ib32 = 0; ib32 < qk_k / 32; ++ib32, idx_lo += 4, signs += 4) {
      const float db[2] = {d * (0.5f + static_cast<float>(b.scales[ib32] & 0xf)) * 0.25f,
                           d * (0.5f + static_cast<float>(b.scales[ib32] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l, y += 8) {
        const int hi = (b.qh[ib32] >> (2 * l)) & 3;
        emit_signed_group8(db[l / 2], iq::iq2s_grid[idx_lo[l] | (hi << 8)], signs[l], y);
      }
    }
  }
}

// IQ3_XXS (3.06 bpw): qs[0..63] = one 8-bit grid index per group of 4; then per 32 weights a
// little-endian uint32 with four 7-bit sign indices (one per 8) and a 4-bit sub-scale in the top
// bits, giving d * (s + 1/2) / 2.
void dequantize_row_iq3_xxs(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_iq3_xxs*>(src);
  const std::int64_t nb = n / qk_k;
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i) {
    const block_iq3_xxs& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const std::uint8_t* q = b.qs;
    const std::uint8_t* meta_bytes = b.qs + qk_k / 4;
    for (int ib32 = 0; ib32 < qk_k / 32; ++ib32, q += 8) {
      const std::uint32_t meta = load_le32(meta_bytes + 4 * ib32);
      const float db = d * (0.5f + static_cast<float>(meta >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l, y += 8) {
        const std::uint8_t signs = ksigns_iq2xs[(meta >> (7 * l)) & 127];
        emit_signed_group4x2(db, iq::iq3xxs_grid[q[2 * l]], iq::iq3xxs_grid[q[2 * l + 1]], signs,
                             y);
      }
    }
  }
}

// IQ3_S (3.44 bpw): 9-bit grid indices per group of 4: low 8 bits in qs (8 per 32 weights), the
// 9th bit in qh[ib32] (bit k for the k-th index of that 32); explicit 8-bit sign masks (4 per 32);
// 4-bit sub-scales, two per byte (low nibble = even 32, high = odd), giving d * (2s + 1).
void dequantize_row_iq3_s(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_iq3_s*>(src);
  const std::int64_t nb = n / qk_k;
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i) {
    const block_iq3_s& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    for (int ib32 = 0; ib32 < qk_k / 32; ++ib32) {
      const int s = (b.scales[ib32 / 2] >> (4 * (ib32 % 2))) & 0xf;
      const float db = d * static_cast<float>(1 + 2 * s);
      const std::uint8_t* q = b.qs + 8 * ib32;
      const std::uint8_t* signs = b.signs + 4 * ib32;
      const int qh = b.qh[ib32];
      for (int l = 0; l < 4; ++l, y += 8) {
        const int idx_lo = q[2 * l] | (((qh >> (2 * l)) & 1) << 8);
        const int idx_hi = q[2 * l + 1] | (((qh >> (2 * l + 1)) & 1) << 8);
        emit_signed_group4x2(db, iq::iq3s_grid[idx_lo], iq::iq3s_grid[idx_hi], signs[l], y);
      }
    }
  }
}

// IQ1_S (1.56 bpw): 11-bit grid indices per group of 8: low 8 bits in qs, top 3 bits in qh[ib]
// (bits 3l..3l+2 for group l of that 32). qh bits 12..14 hold the 3-bit sub-scale (d * (2s + 1))
// and bit 15 the sign of the delta shared by the 32 weights.
void dequantize_row_iq1_s(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_iq1_s*>(src);
  const std::int64_t nb = n / qk_k;
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i) {
    const block_iq1_s& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const std::uint8_t* qh_bytes = bytes_of(b.qh);
    for (int ib = 0; ib < qk_k / 32; ++ib) {
      const std::uint16_t qh = load_le16(qh_bytes + 2 * ib);
      const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
      const float delta = (qh & 0x8000) ? -iq::iq1s_delta : iq::iq1s_delta;
      for (int l = 0; l < 4; ++l, y += 8) {
        const int idx = b.qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8);
        emit_iq1_group8(dl, iq::iq1s_grid[idx], delta, y);
      }
    }
  }
}

// IQ1_M (1.75 bpw): no separate scale field. The 8 bytes of `scales` are read as 4 little-endian
// uint16: their 12 low bits carry 3-bit sub-scales (one per 16 weights: bits 0-2 / 3-5 for the
// first / second 16 of an even 32, bits 6-8 / 9-11 for an odd 32) and their top nibbles, joined,
// form the fp16 super-block scale. Per group of 8, an 11-bit grid index: low 8 bits in qs, top 3
// in a nibble of qh (low nibble = even group, high = odd), whose 4th bit is the delta sign.
void dequantize_row_iq1_m(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_iq1_m*>(src);
  const std::int64_t nb = n / qk_k;
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i) {
    const block_iq1_m& b = blocks[i];
    std::uint16_t sc[4];
    for (int k = 0; k < 4; ++k) sc[k] = load_le16(b.scales + 2 * k);
    const auto scale_bits = static_cast<std::uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                                       ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    const float d = fp16_to_fp32(scale_bits);
    for (int ib = 0; ib < qk_k / 32; ++ib) {
      const int shift = 6 * (ib % 2);
      const float dl[2] = {d * static_cast<float>(2 * ((sc[ib / 2] >> shift) & 7) + 1),
                           d * static_cast<float>(2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1)};
      for (int l = 0; l < 4; ++l, y += 8) {
        const int nibble = (b.qh[2 * ib + l / 2] >> (4 * (l % 2))) & 0xf;
        const int idx = b.qs[4 * ib + l] | ((nibble & 7) << 8);
        const float delta = (nibble & 8) ? -iq::iq1m_delta : iq::iq1m_delta;
        emit_iq1_group8(dl[l / 2], iq::iq1s_grid[idx], delta, y);
      }
    }
  }
}

// IQ4_NL (4.5 bpw): blocks of 32 with an fp16 scale; byte j holds the level indices of elements
// j (low nibble) and j + 16 (high nibble).
void dequantize_row_iq4_nl(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_iq4_nl*>(src);
  const std::int64_t nb = n / qk_legacy;
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i, y += qk_legacy) {
    const block_iq4_nl& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < qk_legacy / 2; ++j) {
      y[j] = d * static_cast<float>(kvalues_iq4nl[b.qs[j] & 0xf]);
      y[j + qk_legacy / 2] = d * static_cast<float>(kvalues_iq4nl[b.qs[j] >> 4]);
    }
  }
}

// IQ4_XS (4.25 bpw): IQ4_NL levels in 256-element super-blocks with one fp16 scale and a signed
// 6-bit sub-scale per 32 (stored + 32): low 4 bits in the nibbles of scales_l, top 2 bits in
// scales_h (bits 2*ib, 2*ib+1). Nibble layout per 32 as in IQ4_NL.
void dequantize_row_iq4_xs(const void* src, float* dst, std::int64_t n) {
  const auto* blocks = static_cast<const block_iq4_xs*>(src);
  const std::int64_t nb = n / qk_k;
  float* y = dst;
  for (std::int64_t i = 0; i < nb; ++i) {
    const block_iq4_xs& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const std::uint16_t scales_h = load_le16(bytes_of(&b.scales_h));
    for (int ib = 0; ib < qk_k / 32; ++ib, y += 32) {
      const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) |
                     (((scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      const std::uint8_t* q = b.qs + 16 * ib;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kvalues_iq4nl[q[j] & 0xf]);
        y[j + 16] = dl * static_cast<float>(kvalues_iq4nl[q[j] >> 4]);
      }
    }
  }
}

namespace {

// Below this magnitude a block is treated as all zero.
constexpr float group_max_eps = 1e-15f;

// Index of the level of kvalues_iq4nl nearest to x (a tie goes to the upper level).
int nearest_iq4nl_level(float x) {
  constexpr int n = 16;
  if (x <= kvalues_iq4nl[0]) return 0;
  if (x >= kvalues_iq4nl[n - 1]) return n - 1;
  int lo = 0;
  int hi = n - 1;  // invariant: level[lo] <= x < level[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < kvalues_iq4nl[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return x - kvalues_iq4nl[hi - 1] < kvalues_iq4nl[hi] - x ? hi - 1 : hi;
}

// Weighted least-squares fit of x ~= d * level[L(x * inv_scale)] for one candidate inverse scale:
// accumulates sum(w q x) and sum(w q^2) with w = x^2 (no importance matrix).
void iq4nl_fit(const float* x, float inv_scale, float& sumqx, float& sumq2) {
  sumqx = 0;
  sumq2 = 0;
  for (int j = 0; j < qk_legacy; ++j) {
    const float q = kvalues_iq4nl[nearest_iq4nl_level(inv_scale * x[j])];
    const float w = x[j] * x[j];
    sumqx += w * q * x[j];
    sumq2 += w * q * q;
  }
}

// The scale of one 32-element group: start from d = max / 127 (the largest-magnitude element
// maps onto the extreme level -127, with the sign of the scale chosen accordingly), take its
// least-squares optimum, then try inverse scales (k - 127) / max for k = -7..7 and keep the
// least-squares scale of whichever rounding explains the most weighted energy (sumqx^2 / sumq2).
// 0 for an all-zero group.
float iq4nl_group_scale(const float* x) {
  constexpr int ntry = 7;
  float amax = 0;
  float max = 0;  // the element of largest magnitude, with its sign
  for (int j = 0; j < qk_legacy; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < group_max_eps) return 0;
  const float level0 = kvalues_iq4nl[0];
  float d = -max / level0;
  float sumqx = 0;
  float sumq2 = 0;
  iq4nl_fit(x, 1 / d, sumqx, sumq2);
  d = sumqx / sumq2;
  float best = d * sumqx;
  for (int itry = -ntry; itry <= ntry; ++itry) {
    const float inv_scale = static_cast<float>(itry + kvalues_iq4nl[0]) / max;
    iq4nl_fit(x, inv_scale, sumqx, sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// The levels of 32 elements against scale d: byte j holds elements j (low nibble) and j + 16.
void iq4nl_levels(const float* x, float d, std::uint8_t* qs) {
  const float inv_scale = d != 0 ? 1 / d : 0.0f;
  std::uint8_t L[qk_legacy];
  for (int j = 0; j < qk_legacy; ++j) L[j] = static_cast<std::uint8_t>(nearest_iq4nl_level(inv_scale * x[j]));
  for (int j = 0; j < qk_legacy / 2; ++j) qs[j] = static_cast<std::uint8_t>(L[j] | (L[j + qk_legacy / 2] << 4));
}

// One 32-element IQ4_NL block: its group scale, stored as fp16; the levels re-picked against
// the chosen float scale.
void quantize_block_iq4_nl(const float* x, block_iq4_nl& out) {
  const float scale = iq4nl_group_scale(x);
  out.d = fp32_to_fp16(scale);
  iq4nl_levels(x, scale, out.qs);
}

// One 256-element IQ4_XS super-block, as the reference quantizes without an importance matrix:
// each 32-element group's scale found as IQ4_NL's, then the super-block scale d = -s / 32 for
// the group scale s of largest magnitude, each group's scale as the nearest l * d (l in
// -32..31, stored as l + 32 in 6 bits), and the levels picked against l * d.
void quantize_block_iq4_xs(const float* x, block_iq4_xs& out) {
  constexpr int groups = qk_k / qk_legacy;
  float scales[groups];
  float max_scale = 0, amax_scale = 0;
  for (int g = 0; g < groups; ++g) {
    scales[g] = iq4nl_group_scale(x + qk_legacy * g);
    if (std::fabs(scales[g]) > amax_scale) {
      amax_scale = std::fabs(scales[g]);
      max_scale = scales[g];
    }
  }
  const float d = -max_scale / 32;
  const float id = d != 0 ? 1 / d : 0.0f;
  out.d = fp32_to_fp16(d);
  std::uint16_t scales_h = 0;
  std::memset(out.scales_l, 0, sizeof out.scales_l);
  for (int g = 0; g < groups; ++g) {
    // To nearest, ties to even; clamped before the conversion (a NaN group, from NaN inputs, gets 0).
    const float v = id * scales[g];
    const int l = std::isnan(v) ? 0 : static_cast<int>(std::nearbyint(std::clamp(v, -32.0f, 31.0f)));
    const auto ls = static_cast<unsigned>(l + 32);
    out.scales_l[g / 2] = static_cast<std::uint8_t>(out.scales_l[g / 2] | ((ls & 0xf) << (4 * (g % 2))));
    scales_h = static_cast<std::uint16_t>(scales_h | ((ls >> 4) << (2 * g)));
    iq4nl_levels(x + qk_legacy * g, d * static_cast<float>(l), out.qs + 16 * g);
  }
  const std::uint8_t le[2] = {static_cast<std::uint8_t>(scales_h & 0xff), static_cast<std::uint8_t>(scales_h >> 8)};
  std::memcpy(&out.scales_h, le, sizeof le);  // little-endian, as dequantize reads it
}

}  // namespace

// IQ4_NL quantizer without importance weights (what llama-quantize does without an imatrix).
void quantize_row_iq4_nl(const float* src, void* dst, std::int64_t n) {
  auto* blocks = static_cast<block_iq4_nl*>(dst);
  const std::int64_t nb = n / qk_legacy;
  for (std::int64_t i = 0; i < nb; ++i) {
    quantize_block_iq4_nl(src + i * qk_legacy, blocks[i]);
  }
}

// IQ4_XS quantizer without importance weights.
void quantize_row_iq4_xs(const float* src, void* dst, std::int64_t n) {
  auto* blocks = static_cast<block_iq4_xs*>(dst);
  for (std::int64_t i = 0; i < n / qk_k; ++i) quantize_block_iq4_xs(src + i * qk_k, blocks[i]);
}

}  // namespace spite::gguf::quants
