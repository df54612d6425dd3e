// The reference's Q2_K dot products (see ref_dot_repack.cpp for which the reference uses when):
// rows unpacked to quants 0..3 with their 4-bit scales and mins, the exact integers of each
// super-block from `Ints` (scalar here, SIMD twins elsewhere), then the float steps.
#pragma once

#include <cmath>
#include <vector>

#include "ref_q4k.hpp"
#include "ref_quant.hpp"
#include "spite/core/half.hpp"

namespace spite::dispatch::cpu::q2k {

struct row_q2_K {
  std::vector<std::int8_t> q;      // in: quants 0..3
  std::vector<std::uint8_t> sc;    // in / 16
  std::vector<std::uint8_t> mn;    // in / 16
  std::vector<float> d, dmin;      // in / 256
  explicit row_q2_K(std::int64_t in)
      : q(static_cast<std::size_t>(in)),
        sc(static_cast<std::size_t>(in / 16)),
        mn(static_cast<std::size_t>(in / 16)),
        d(static_cast<std::size_t>(in / gguf::qk_k)),
        dmin(static_cast<std::size_t>(in / gguf::qk_k)) {}
};

inline void unpack_row_q2_K(const std::byte* src, std::int64_t nb, row_q2_K& r) {
  for (std::int64_t b = 0; b < nb; ++b) {
    const auto& blk = reinterpret_cast<const gguf::block_q2_K*>(src)[b];
    for (int j = 0; j < 16; ++j) {
      r.sc[b * 16 + j] = blk.scales[j] & 0xF;
      r.mn[b * 16 + j] = blk.scales[j] >> 4;
    }
    std::int8_t* q = r.q.data() + b * gguf::qk_k;
    // Element 128h + 32k + l: bits 2k..2k+1 of qs[32h + l].
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        for (int l = 0; l < 32; ++l) {
          q[128 * h + 32 * k + l] = static_cast<std::int8_t>((blk.qs[32 * h + l] >> (2 * k)) & 3);
        }
      }
    }
    r.d[b] = fp16_to_fp32(blk.d);
    r.dmin[b] = fp16_to_fp32(blk.dmin);
  }
}

// The exact integers of one super-block: the 16 sub-block sums (the repacked kernels) or the 8
// lanes of 4 products, lane L over elements 4L..4L+3 of every 32-element group g times
// scale[2g + L/4] (the vector dot). `Ints` may be a SIMD twin giving the same integers.
struct scalar_ints {
  static void sub_block_sums(const std::int8_t* q, const std::int8_t* x, int* sums) { q4k::scalar_sub_block_sums(q, x, 16, sums); }
  static void lanes(const std::int8_t* q, const std::uint8_t* sc, const std::int8_t* x, std::int32_t* lanes) {
    q4k::scalar_scaled_lanes(q, x, [sc](int g, int L) { return static_cast<int>(sc[2 * g + L / 4]); }, lanes);
  }
};

// Repacked Q2_K (ggml_gemv_q2_K_8x8_q8_K / ggml_gemm_q2_K_8x8_q8_K): the exact sums of
// scale * isum and min * bsum over the 16-element sub-blocks go into one fma per super-block
// (GEMV) or per 128-element half (GEMM), result acc - acc_min.
template <class Ints>
float dot_q2_K_repacked(const row_q2_K& r, const gguf::block_q8_K* x, std::int64_t nb, bool halves) {
  float acc = 0.0f, acc_min = 0.0f;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::uint8_t* sc = r.sc.data() + b * 16;
    const std::uint8_t* mn = r.mn.data() + b * 16;
    const float ds = r.d[b] * x[b].d;
    const float dm = r.dmin[b] * x[b].d;
    int sums[16];
    Ints::sub_block_sums(r.q.data() + b * gguf::qk_k, x[b].qs, sums);
    int is[2] = {0, 0}, ms[2] = {0, 0};
    for (int j = 0; j < 16; ++j) {
      is[j / 8] += sc[j] * sums[j];
      ms[j / 8] += mn[j] * x[b].bsums[j];
    }
    if (halves) {
      for (int h = 0; h < 2; ++h) {
        acc = std::fma(static_cast<float>(is[h]), ds, acc);
        acc_min = std::fma(static_cast<float>(ms[h]), dm, acc_min);
      }
    } else {
      acc = std::fma(static_cast<float>(is[0] + is[1]), ds, acc);
      acc_min = std::fma(static_cast<float>(ms[0] + ms[1]), dm, acc_min);
    }
  }
  return acc - acc_min;
}

// ggml_vec_dot_q2_K_q8_K (AVX2): one 8-lane accumulator. Per block, first the mins:
// lane L += (-d_x * dmin_w) * (m[2L] * bsum[2L] + m[2L+1] * bsum[2L+1]); then the quants'
// lanes, scaled by d_x * d_w.
template <class Ints>
float dot_q2_K_vec(const row_q2_K& r, const gguf::block_q8_K* x, std::int64_t nb) {
  float acc[8] = {};
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::uint8_t* sc = r.sc.data() + b * 16;
    const std::uint8_t* mn = r.mn.data() + b * 16;
    const float d = x[b].d * r.d[b];
    const float dmin = -x[b].d * r.dmin[b];
    for (int L = 0; L < 8; ++L) {
      const int prod = mn[2 * L] * x[b].bsums[2 * L] + mn[2 * L + 1] * x[b].bsums[2 * L + 1];
      acc[L] = std::fma(dmin, static_cast<float>(prod), acc[L]);
    }
    std::int32_t lanes[8];
    Ints::lanes(r.q.data() + b * gguf::qk_k, sc, x[b].qs, lanes);
    for (int L = 0; L < 8; ++L) acc[L] = std::fma(d, static_cast<float>(lanes[L]), acc[L]);
  }
  return reduce8(acc);
}

template <class Ints = scalar_ints>
void matmul_q2_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  q4k::matmul_unpacked_rows<row_q2_K>(w, x, n_tokens, y, pool, unpack_row_q2_K,
                                      [](const row_q2_K& r, const gguf::block_q8_K* xt, std::int64_t nb, bool repacked, bool gemm) {
                                        return repacked ? dot_q2_K_repacked<Ints>(r, xt, nb, gemm) : dot_q2_K_vec<Ints>(r, xt, nb);
                                      });
}

}  // namespace spite::dispatch::cpu::q2k
