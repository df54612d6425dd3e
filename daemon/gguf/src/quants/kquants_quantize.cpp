// Scalar reference quantizers of the K-quant family (Q2_K .. Q6_K and Q8_K).
//
// These reproduce the algorithms llama-quantize uses when it has no importance matrix (ggml's
// "_ref" row quantizers), including their float32 evaluation order, so that quantizing the same
// data gives the same bytes as the reference tool:
//   * Q2_K, Q4_K, Q5_K: per sub-block, an affine (scale, min) fit found by trying a small grid of
//     inverse scales and solving the weighted least-squares problem for each candidate rounding;
//     the sub-block scales and mins are then quantized against the block maximum (4 or 6 bits).
//   * Q3_K: symmetric 3-bit sub-block fit refined by coordinate descent on a x^2-weighted error.
//   * Q6_K: symmetric 6-bit fit with a scan of 18 nearby inverse scales, x^2-weighted.
//   * Q8_K: amax / 127 scaling, plus the per-16 sums of the quants.
// After the sub-block scales are rounded to their stored precision, every quant is recomputed
// against the scale the dequantizer will actually see.
//
// Nothing here may be algebraically rewritten or reordered: the float results depend on the exact
// sequence of roundings: build this file without -ffast-math and without FMA contraction
// (-ffp-contract=off; ISO -std=c++20 implies it in GCC, -std=gnu++20 with -march=native does not).

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quants/kquants_common.hpp"
#include "quants/quants.hpp"
#include "spite/core/half.hpp"
#include "spite/gguf/blocks.hpp"

#if defined(__FAST_MATH__)
#error "kquants_quantize.cpp must not be compiled with -ffast-math (results must match ggml bit for bit)"
#endif

namespace spite::gguf::quants {

namespace {

// Below this magnitude a group is treated as all zero.
constexpr float group_max_eps = 1e-15f;

// Round to nearest, ties to even, by adding 1.5 * 2^23: the sum's mantissa then holds the integer.
// Valid for |v| < 2^22; outside that range it wraps exactly like the reference does (callers clamp).
inline int nearest_int(float v) {
  const float biased = v + 12582912.f;
  const auto bits = std::bit_cast<std::int32_t>(biased);
  return (bits & 0x007fffff) - 0x00400000;
}

// Affine fit x ~= scale * L + min with L in [0, nmax] and min <= 0, minimising the weighted
// squared (or absolute, if use_mad) error. Starts from the plain (max - min) / nmax rounding, then
// for each of nstep+1 candidate inverse scales (rmin + rdelta*k + nmax) / (max - min) it rounds,
// solves the 2x2 weighted least-squares system for (scale, min) given that rounding, and keeps the
// candidate with the lowest error. Returns the scale; *neg_min receives -min (>= 0).
float fit_scale_min(int n, int nmax, const float* x, const float* w, std::uint8_t* L,
                    float* neg_min, std::uint8_t* Laux, float rmin, float rdelta, int nstep,
                    bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;  // the offset only ever shifts down
  if (max == min) {
    std::memset(L, 0, static_cast<std::size_t>(n));
    *neg_min = -min;
    return 0.f;
  }

  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<std::uint8_t>(std::clamp(l, 0, nmax));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += w[i] * diff;
  }
  if (nstep < 1) {
    *neg_min = -min;
    return scale;
  }

  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<std::uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    // Normal equations of the weighted fit x ~= s*l + m.
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {  // a positive offset is not representable: refit through zero
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += w[i] * diff;
      }
      if (cur_error < best_error) {
        std::memcpy(L, Laux, static_cast<std::size_t>(n));
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

// Symmetric fit x ~= scale * (L - nmax), L - nmax in [-nmax, nmax-1], weighted by x^2 (Q6_K).
// The element of largest magnitude pins the first guess (it maps to -nmax); then 18 neighbouring
// inverse scales -(nmax + 0.1k) / max are tried, keeping the one whose least-squares scale
// explains most of the weighted energy (largest sumlx^2 / suml2).
float fit_symmetric_x2(int n, int nmax, const float* x, std::int8_t* L) {
  float amax = 0;
  const float max = signed_absmax(x, n, &amax);
  if (amax < group_max_eps) {
    std::memset(L, 0, static_cast<std::size_t>(n));
    return 0.f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<std::int8_t>(l + nmax);
    const float w = x[i] * x[i];
    const float fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const float fl = static_cast<float>(std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * fl;
      suml2 += w * fl * fl;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = static_cast<std::int8_t>(l + nmax);
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Symmetric 3-bit fit for Q3_K: round against -nmax / max, then up to 5 sweeps of coordinate
// descent, each moving one quant to its best level given the others (x^2-weighted), accepted only
// when it raises sumlx^2 / suml2 (i.e. lowers the least-squares error). Returns the scale;
// L receives quant + nmax.
float fit_q3(int n, int nmax, const float* x, std::int8_t* L) {
  float amax = 0;
  const float max = signed_absmax(x, n, &amax);
  if (amax < group_max_eps) {
    std::memset(L, 0, static_cast<std::size_t>(n));
    return 0.f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<std::int8_t>(l);
    const float w = x[i] * x[i];
    const float fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;  // sums without element i
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        const int new_l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          const float fl = static_cast<float>(new_l);
          slx += w * x[i] * fl;
          sl2 += w * fl * fl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<std::int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Pack 2-bit values of a 256-element block: byte l of each 32-byte group holds elements
// l, l+32, l+64, l+96 of its 128-element half in bit pairs 0, 2, 4, 6.
template <typename T>
void pack_2bit(const T* L, std::uint8_t* qs) {
  for (int j = 0; j < qk_k; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 2) |
                                                (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
  }
}

// Store the 8 (scale, min) 6-bit pairs of Q4_K / Q5_K (inverse of the dequantizer's unpacking).
void pack_scale_min_k4(const std::uint8_t* ls, const std::uint8_t* lm, std::uint8_t* scales) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] = ls[j];
      scales[j + 4] = lm[j];
    } else {
      scales[j + 4] = static_cast<std::uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      scales[j - 4] = static_cast<std::uint8_t>(scales[j - 4] | ((ls[j] >> 4) << 6));
      scales[j] = static_cast<std::uint8_t>(scales[j] | ((lm[j] >> 4) << 6));
    }
  }
}

// Shared part of Q4_K and Q5_K: fit the 8 sub-blocks of 32, quantize their scales and mins to
// 6 bits against the block maxima, store d/dmin/scales, and recompute the quants (0..nmax)
// against the stored scales. rmin/rdelta/nstep are the per-type search grid of the reference.
void quantize_block_k4(const float* x, int nmax, float rmin, float rdelta, int nstep,
                       std::uint16_t& d_out, std::uint16_t& dmin_out, std::uint8_t* scales_out,
                       std::uint8_t* L) {
  std::uint8_t Laux[32];
  float weights[32];
  float mins[8];
  float scales[8];
  float max_scale = 0;  // scales are positive since the min is subtracted
  float max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xb = x + 32 * j;
    // Weight each element by the sub-block RMS plus its own magnitude: large values matter more,
    // but small ones are not ignored.
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xb[l] * xb[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xb[l]);
    scales[j] = fit_scale_min(32, nmax, xb, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta,
                              nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }

  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    // The reference narrows to uint8 before capping at 63; keep that for identical bytes.
    ls[j] = std::min<std::uint8_t>(63, static_cast<std::uint8_t>(nearest_int(inv_scale * scales[j])));
    lm[j] = std::min<std::uint8_t>(63, static_cast<std::uint8_t>(nearest_int(inv_min * mins[j])));
  }
  std::memset(scales_out, 0, k_scale_size);
  pack_scale_min_k4(ls, lm, scales_out);
  d_out = fp32_to_fp16(max_scale / 63.f);
  dmin_out = fp32_to_fp16(max_min / 63.f);

  const float d_all = fp16_to_fp32(d_out);
  const float dmin_all = fp16_to_fp32(dmin_out);
  for (int j = 0; j < 8; ++j) {
    std::uint8_t sc, m;
    unpack_scale_min_k4(j, scales_out, sc, m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0) continue;  // keep the fit's quants; they dequantize to -min anyway
    const float dm = dmin_all * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<std::uint8_t>(std::clamp(l, 0, nmax));
    }
  }
}

}  // namespace

void quantize_row_q2_K(const float* src, void* dst, std::int64_t n) {
  auto* y = static_cast<block_q2_K*>(dst);
  const std::int64_t nb = n / qk_k;
  const float* x = src;
  constexpr float q4scale = 15.f;

  for (std::int64_t i = 0; i < nb; ++i, x += qk_k) {
    std::uint8_t L[qk_k];
    std::uint8_t Laux[16];
    float weights[16];
    float mins[16];
    float scales[16];
    float max_scale = 0;
    float max_min = 0;
    for (int j = 0; j < 16; ++j) {
      // Weighted by |x| with absolute (not squared) error: the reference's choice for 2 bits.
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = fit_scale_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f,
                                0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }

    // 4-bit sub-block scales (low nibble) and mins (high nibble) against the block maxima.
    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < 16; ++j) {
        y[i].scales[j] = static_cast<std::uint8_t>(nearest_int(iscale * scales[j]));
      }
      y[i].d = fp32_to_fp16(max_scale / q4scale);
    } else {
      std::memset(y[i].scales, 0, sizeof(y[i].scales));
      y[i].d = fp32_to_fp16(0.f);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < 16; ++j) {
        const int l = nearest_int(iscale * mins[j]);
        y[i].scales[j] = static_cast<std::uint8_t>(y[i].scales[j] | (l << 4));
      }
      y[i].dmin = fp32_to_fp16(max_min / q4scale);
    } else {
      y[i].dmin = fp32_to_fp16(0.f);
    }

    const float d_all = fp16_to_fp32(y[i].d);
    const float dmin_all = fp16_to_fp32(y[i].dmin);
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * static_cast<float>(y[i].scales[j] & 0xF);
      if (d == 0) continue;
      const float dm = dmin_all * static_cast<float>(y[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int((x[16 * j + ii] + dm) / d);
        L[16 * j + ii] = static_cast<std::uint8_t>(std::clamp(l, 0, 3));
      }
    }
    pack_2bit(L, y[i].qs);
  }
}

void quantize_row_q3_K(const float* src, void* dst, std::int64_t n) {
  auto* y = static_cast<block_q3_K*>(dst);
  const std::int64_t nb = n / qk_k;
  const float* x = src;

  for (std::int64_t i = 0; i < nb; ++i, x += qk_k) {
    std::int8_t L[qk_k];
    float scales[16];
    float max_scale = 0;  // signed scale of largest magnitude
    float amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_q3(16, 4, x + 16 * j, L + 16 * j);
      const float a = std::fabs(scales[j]);
      if (a > amax) {
        amax = a;
        max_scale = scales[j];
      }
    }

    // Signed 6-bit sub-block scales: the largest maps to -32, stored +32 in 4+2 bit pieces.
    std::memset(y[i].scales, 0, sizeof(y[i].scales));
    if (max_scale != 0) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        const auto q = static_cast<std::int8_t>(nearest_int(iscale * scales[j]));
        const int l = std::clamp<int>(q, -32, 31) + 32;
        if (j < 8) {
          y[i].scales[j] = static_cast<std::uint8_t>(l & 0xF);
        } else {
          y[i].scales[j - 8] = static_cast<std::uint8_t>(y[i].scales[j - 8] | ((l & 0xF) << 4));
        }
        y[i].scales[8 + j % 4] =
            static_cast<std::uint8_t>(y[i].scales[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
      }
      y[i].d = fp32_to_fp16(1 / iscale);
    } else {
      y[i].d = fp32_to_fp16(0.f);
    }

    const float d_all = fp16_to_fp32(y[i].d);
    for (int j = 0; j < 16; ++j) {
      const int lo = j < 8 ? (y[i].scales[j] & 0xF) : (y[i].scales[j - 8] >> 4);
      const int hi = (y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3;
      const int sc = (lo | (hi << 4)) - 32;
      const float d = d_all * static_cast<float>(sc);
      if (d == 0) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<std::int8_t>(std::clamp(l, -4, 3) + 4);
      }
    }

    // Third bit into hmask: element j goes to byte j % 32, bit j / 32.
    std::memset(y[i].hmask, 0, sizeof(y[i].hmask));
    for (int j = 0; j < qk_k; ++j) {
      if (L[j] > 3) {
        y[i].hmask[j % 32] = static_cast<std::uint8_t>(y[i].hmask[j % 32] | (1 << (j / 32)));
        L[j] = static_cast<std::int8_t>(L[j] - 4);
      }
    }
    pack_2bit(L, y[i].qs);
  }
}

void quantize_row_q4_K(const float* src, void* dst, std::int64_t n) {
  auto* y = static_cast<block_q4_K*>(dst);
  const std::int64_t nb = n / qk_k;
  for (std::int64_t i = 0; i < nb; ++i) {
    std::uint8_t L[qk_k];
    quantize_block_k4(src + i * qk_k, 15, -1.f, 0.1f, 20, y[i].d, y[i].dmin, y[i].scales, L);
    // Each 64-element chunk: first 32 in the low nibbles, next 32 in the high nibbles.
    std::uint8_t* q = y[i].qs;
    for (int j = 0; j < qk_k; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

void quantize_row_q5_K(const float* src, void* dst, std::int64_t n) {
  auto* y = static_cast<block_q5_K*>(dst);
  const std::int64_t nb = n / qk_k;
  for (std::int64_t i = 0; i < nb; ++i) {
    std::uint8_t L[qk_k];
    quantize_block_k4(src + i * qk_k, 31, -0.5f, 0.1f, 15, y[i].d, y[i].dmin, y[i].scales, L);
    // Low 4 bits as in Q4_K; the fifth bit of chunk c goes to qh bits 2c (first 32) and 2c+1.
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    std::uint8_t* ql = y[i].qs;
    int c = 0;
    for (int j = 0; j < qk_k; j += 64, ql += 32, ++c) {
      for (int l = 0; l < 32; ++l) {
        int l1 = L[j + l];
        int l2 = L[j + l + 32];
        if (l1 > 15) {
          l1 -= 16;
          y[i].qh[l] = static_cast<std::uint8_t>(y[i].qh[l] | (1 << (2 * c)));
        }
        if (l2 > 15) {
          l2 -= 16;
          y[i].qh[l] = static_cast<std::uint8_t>(y[i].qh[l] | (2 << (2 * c)));
        }
        ql[l] = static_cast<std::uint8_t>(l1 | (l2 << 4));
      }
    }
  }
}

void quantize_row_q6_K(const float* src, void* dst, std::int64_t n) {
  auto* y = static_cast<block_q6_K*>(dst);
  const std::int64_t nb = n / qk_k;
  const float* x = src;

  for (std::int64_t i = 0; i < nb; ++i, x += qk_k) {
    std::int8_t L[qk_k];
    float scales[16];
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      scales[ib] = fit_symmetric_x2(16, 32, x + 16 * ib, L + 16 * ib);
      const float a = std::fabs(scales[ib]);
      if (a > max_abs_scale) {
        max_abs_scale = a;
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < group_max_eps) {
      std::memset(&y[i], 0, sizeof(block_q6_K));
      continue;
    }

    // Signed 8-bit sub-block scales; the largest maps to -128 (capped at 127 on the other side).
    const float iscale = -128.f / max_scale;
    y[i].d = fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < 16; ++ib) {
      y[i].scales[ib] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    }

    const float d_all = fp16_to_fp32(y[i].d);
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * static_cast<float>(y[i].scales[j]);
      if (d == 0) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<std::int8_t>(std::clamp(l, -32, 31) + 32);
      }
    }

    // Per 128-element half: ql bytes 0..31 hold elements l (low nibble) and l+64 (high),
    // bytes 32..63 hold l+32 and l+96; qh byte l holds the top 2 bits of l, l+32, l+64, l+96.
    std::uint8_t* ql = y[i].ql;
    std::uint8_t* qh = y[i].qh;
    for (int j = 0; j < qk_k; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int a = L[j + l], b = L[j + l + 32], c = L[j + l + 64], e = L[j + l + 96];
        ql[l] = static_cast<std::uint8_t>((a & 0xF) | ((c & 0xF) << 4));
        ql[l + 32] = static_cast<std::uint8_t>((b & 0xF) | ((e & 0xF) << 4));
        qh[l] = static_cast<std::uint8_t>((a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6));
      }
    }
  }
}

void quantize_row_q8_K(const float* src, void* dst, std::int64_t n) {
  auto* y = static_cast<block_q8_K*>(dst);
  const std::int64_t nb = n / qk_k;
  const float* x = src;

  for (std::int64_t i = 0; i < nb; ++i, x += qk_k) {
    float max = 0;
    float amax = 0;
    for (int j = 0; j < qk_k; ++j) {
      const float a = std::fabs(x[j]);
      if (a > amax) {
        amax = a;
        max = x[j];
      }
    }
    if (amax == 0) {
      std::memset(&y[i], 0, sizeof(block_q8_K));
      continue;
    }
    // -127 (not -128) keeps every quant in [-127, 127], which the SIMD dot products rely on.
    const float iscale = -127.f / max;
    for (int j = 0; j < qk_k; ++j) {
      y[i].qs[j] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * x[j])));
    }
    for (int j = 0; j < qk_k / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[16 * j + ii];
      y[i].bsums[j] = static_cast<std::int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

}  // namespace spite::gguf::quants
