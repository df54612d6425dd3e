// The reference's Q4_K dot products (see ref_dot_repack.cpp for which the reference uses when):
// rows unpacked to quants 0..15 with their 6-bit scales and mins, the exact integers of each
// super-block from `Ints` (scalar here, SIMD twins elsewhere), then the float steps.
#pragma once

#include <cmath>
#include <vector>

#include "ref_quant.hpp"
#include "spite/core/half.hpp"

namespace spite::dispatch::cpu::q4k {

// The 8 six-bit (scale, min) pairs of a Q4_K super-block.
inline void unpack_scales_mins_k4(const std::uint8_t* scales, std::uint8_t* sc, std::uint8_t* mn) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      sc[j] = scales[j] & 63;
      mn[j] = scales[j + 4] & 63;
    } else {
      sc[j] = static_cast<std::uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
      mn[j] = static_cast<std::uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
    }
  }
}

// ---- Q4_K

struct row_q4_K {
  std::vector<std::int8_t> q;      // in: quants 0..15
  std::vector<std::uint8_t> sc;    // in / 32
  std::vector<std::uint8_t> mn;    // in / 32
  std::vector<float> d, dmin;      // in / 256
  explicit row_q4_K(std::int64_t in)
      : q(static_cast<std::size_t>(in)),
        sc(static_cast<std::size_t>(in / 32)),
        mn(static_cast<std::size_t>(in / 32)),
        d(static_cast<std::size_t>(in / gguf::qk_k)),
        dmin(static_cast<std::size_t>(in / gguf::qk_k)) {}
};


inline void unpack_row_q4_K(const std::byte* src, std::int64_t nb, row_q4_K& r) {
  for (std::int64_t b = 0; b < nb; ++b) {
    const auto& blk = reinterpret_cast<const gguf::block_q4_K*>(src)[b];
    unpack_scales_mins_k4(blk.scales, r.sc.data() + b * 8, r.mn.data() + b * 8);
    std::int8_t* q = r.q.data() + b * gguf::qk_k;
    // Element 64j + l: low nibble of qs[32j + l]; element 64j + 32 + l: high nibble.
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        q[64 * j + l] = static_cast<std::int8_t>(blk.qs[32 * j + l] & 0xF);
        q[64 * j + 32 + l] = static_cast<std::int8_t>(blk.qs[32 * j + l] >> 4);
      }
    }
    r.d[b] = fp16_to_fp32(blk.d);
    r.dmin[b] = fp16_to_fp32(blk.dmin);
  }
}

// The exact integers of one super-block, as the reference forms them: sub-block sums (the
// repacked kernels) or the 8 lanes of 4 products times the sub-block scales (the vector dot).
// `Ints` may be a SIMD twin giving the same integers.
// The exact sums of the `len`-element sub-blocks of a super-block.
inline void scalar_sub_block_sums(const std::int8_t* q, const std::int8_t* x, int len, int* sums) {
  for (int j = 0; j < gguf::qk_k / len; ++j) {
    int s = 0;
    for (int i = 0; i < len; ++i) s += q[len * j + i] * x[len * j + i];
    sums[j] = s;
  }
}

// 8 lanes: lane L sums elements 4L..4L+3 of every 32-element group g times scale(g, L).
template <class Scale>
void scalar_scaled_lanes(const std::int8_t* q, const std::int8_t* x, const Scale& scale, std::int32_t* lanes) {
  for (int L = 0; L < 8; ++L) lanes[L] = 0;
  for (int g = 0; g < 8; ++g) {
    for (int L = 0; L < 8; ++L) {
      const int e = 32 * g + 4 * L;
      int s = 0;
      for (int i = 0; i < 4; ++i) s += q[e + i] * x[e + i];
      lanes[L] += scale(g, L) * s;
    }
  }
}

struct scalar_ints {
  static void sub_block_sums(const std::int8_t* q, const std::int8_t* x, int* sums) { scalar_sub_block_sums(q, x, 32, sums); }
  static void lanes(const std::int8_t* q, const std::uint8_t* sc, const std::int8_t* x, std::int32_t* lanes) {
    scalar_scaled_lanes(q, x, [sc](int g, int) { return static_cast<int>(sc[g]); }, lanes);
  }
};

// Repacked Q4_K. `pairs`: GEMM granularity (one fma per 64 elements), else GEMV (per block).
template <class Ints>
float dot_q4_K_repacked(const row_q4_K& r, const gguf::block_q8_K* x, std::int64_t nb, bool pairs) {
  float acc = 0.0f, acc_min = 0.0f;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::int8_t* q = r.q.data() + b * gguf::qk_k;
    const std::uint8_t* sc = r.sc.data() + b * 8;
    const std::uint8_t* mn = r.mn.data() + b * 8;
    const float ds = r.d[b] * x[b].d;
    const float dm = r.dmin[b] * x[b].d;
    int isum[8], msum[8];
    Ints::sub_block_sums(q, x[b].qs, isum);
    for (int g = 0; g < 8; ++g) {
      isum[g] *= sc[g];
      msum[g] = mn[g] * (x[b].bsums[2 * g] + x[b].bsums[2 * g + 1]);
    }
    if (pairs) {
      for (int p = 0; p < 4; ++p) {
        acc = std::fma(static_cast<float>(isum[2 * p] + isum[2 * p + 1]), ds, acc);
        acc_min = std::fma(static_cast<float>(msum[2 * p] + msum[2 * p + 1]), dm, acc_min);
      }
    } else {
      int is = 0, ms = 0;
      for (int g = 0; g < 8; ++g) {
        is += isum[g];
        ms += msum[g];
      }
      acc = std::fma(static_cast<float>(is), ds, acc);
      acc_min = std::fma(static_cast<float>(ms), dm, acc_min);
    }
  }
  return acc - acc_min;
}

// ggml_vec_dot_q4_K_q8_K (AVX2): lane L sums elements 4L..4L+3 of every sub-block times its
// scale; acc[L] = fma(d_x * d_w, lane, acc[L]); the mins go to 4 lanes (sub-block pairs) with
// fma(-d_x * dmin_w, m0 * bsum0 + m1 * bsum1, acc_m[k]).
template <class Ints>
float dot_q4_K_vec(const row_q4_K& r, const gguf::block_q8_K* x, std::int64_t nb) {
  float acc[8] = {};
  float acc_m[4] = {};
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::int8_t* q = r.q.data() + b * gguf::qk_k;
    const std::uint8_t* sc = r.sc.data() + b * 8;
    const std::uint8_t* mn = r.mn.data() + b * 8;
    const float d = x[b].d * r.d[b];
    const float dmin = -x[b].d * r.dmin[b];
    for (int k = 0; k < 4; ++k) {
      const int prod = mn[2 * k] * (x[b].bsums[4 * k] + x[b].bsums[4 * k + 1]) +
                       mn[2 * k + 1] * (x[b].bsums[4 * k + 2] + x[b].bsums[4 * k + 3]);
      acc_m[k] = std::fma(dmin, static_cast<float>(prod), acc_m[k]);
    }
    std::int32_t lanes[8];
    Ints::lanes(q, sc, x[b].qs, lanes);
    for (int L = 0; L < 8; ++L) acc[L] = std::fma(d, static_cast<float>(lanes[L]), acc[L]);
  }
  const float m = (acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]);
  return reduce8(acc) + m;
}


// The driver the reference's Q4_K and Q2_K matmuls share: activations quantized as the
// repacked path does (matrices of a multiple of 8 rows) or the vector dot product does, each
// weight row unpacked once into a `Row` and dotted with every activation row:
// dot(row, x, nb, repacked, gemm) with `gemm` true for the rows the repacked GEMM takes.
template <class Row, class Unpack, class Dot>
void matmul_unpacked_rows(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool,
                          const Unpack& unpack, const Dot& dot) {
  const std::int64_t nb = w.in / gguf::qk_k;
  const bool repacked = w.out % 8 == 0;
  std::vector<gguf::block_q8_K> xq;
  quantize_rows_q8_K(w, x, n_tokens, repacked, xq, pool);
  const std::int64_t ng = gemm_rows(n_tokens);
  const std::int64_t out = w.out;
  pool.parallel_for(out, [&](std::int64_t begin, std::int64_t end, int) {
    Row r(w.in);
    for (std::int64_t o = begin; o < end; ++o) {
      unpack(w.row(o), nb, r);
      for (std::int64_t t = 0; t < n_tokens; ++t) y[t * out + o] = dot(r, xq.data() + t * nb, nb, repacked, t < ng);
    }
  });
}

template <class Ints = scalar_ints>
void matmul_q4_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  matmul_unpacked_rows<row_q4_K>(w, x, n_tokens, y, pool, unpack_row_q4_K,
                                 [](const row_q4_K& r, const gguf::block_q8_K* xt, std::int64_t nb, bool repacked, bool gemm) {
                                   return repacked ? dot_q4_K_repacked<Ints>(r, xt, nb, gemm) : dot_q4_K_vec<Ints>(r, xt, nb);
                                 });
}

}  // namespace spite::dispatch::cpu::q4k
