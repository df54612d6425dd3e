// The reference's Q3_K / Q5_K / Q6_K dot products (ref_dot_kquants.cpp explains the lanes):
// rows unpacked to integer quants and per-16-element scales, the exact integer lanes of each
// super-block (block_lanes, or a SIMD twin with the same integers), then the float steps.
#pragma once

#include <cmath>
#include <vector>

#include "ref_quant.hpp"
#include "spite/core/half.hpp"

namespace spite::dispatch::cpu::kquants {

constexpr int qk = gguf::qk_k;

// One weight row unpacked: quants as integers (Q6_K: unsigned, without the -32), one scale per
// 16 elements, the Q5_K mins (one per 32 elements) and the per-block float factors.
struct unpacked_row {
  std::vector<std::int8_t> q;      // in
  std::vector<std::int8_t> scale;  // in / 16
  std::vector<std::int8_t> min;    // in / 32 (Q5_K only)
  std::vector<float> d, dmin;      // in / 256

  explicit unpacked_row(std::int64_t in)
      : q(static_cast<std::size_t>(in)),
        scale(static_cast<std::size_t>(in / 16)),
        min(static_cast<std::size_t>(in / 32)),
        d(static_cast<std::size_t>(in / qk)),
        dmin(static_cast<std::size_t>(in / qk)) {}
};

// ---- unpacking

inline void unpack_q3_K(const gguf::block_q3_K& b, std::int8_t* q, std::int8_t* sc) {
  q3_K_scales(b.scales, sc);
  // Element 128c + 32k + l: bits 2k..2k+1 of qs[32c + l], minus 4 unless bit 4c + k of hmask[l].
  for (int c = 0; c < 2; ++c) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const int lo = (b.qs[32 * c + l] >> (2 * k)) & 3;
        const int hi = (b.hmask[l] >> (4 * c + k)) & 1;
        q[128 * c + 32 * k + l] = static_cast<std::int8_t>(lo - (hi ? 0 : 4));
      }
    }
  }
}

inline void unpack_q5_K(const gguf::block_q5_K& b, std::int8_t* q, std::int8_t* sc16, std::int8_t* mins) {
  // 8 six-bit scales and 8 six-bit mins: j < 4 in the low 6 bits of bytes j / j + 4; j >= 4 low
  // nibble / high nibble of byte j + 4 with the top bits of bytes j - 4 / j.
  for (int j = 0; j < 8; ++j) {
    int s, m;
    if (j < 4) {
      s = b.scales[j] & 63;
      m = b.scales[j + 4] & 63;
    } else {
      s = (b.scales[j + 4] & 0xF) | ((b.scales[j - 4] >> 6) << 4);
      m = (b.scales[j + 4] >> 4) | ((b.scales[j] >> 6) << 4);
    }
    sc16[2 * j] = sc16[2 * j + 1] = static_cast<std::int8_t>(s);
    mins[j] = static_cast<std::int8_t>(m);
  }
  // Element 64j + l: low nibble of qs[32j + l] + 16 * bit 2j of qh[l];
  // element 64j + 32 + l: high nibble + 16 * bit 2j + 1.
  for (int j = 0; j < 4; ++j) {
    for (int l = 0; l < 32; ++l) {
      const int lo = b.qs[32 * j + l] & 0xF;
      const int hi = b.qs[32 * j + l] >> 4;
      q[64 * j + l] = static_cast<std::int8_t>(lo + (((b.qh[l] >> (2 * j)) & 1) << 4));
      q[64 * j + 32 + l] = static_cast<std::int8_t>(hi + (((b.qh[l] >> (2 * j + 1)) & 1) << 4));
    }
  }
}

inline void unpack_q6_K(const gguf::block_q6_K& b, std::int8_t* q, std::int8_t* sc) {
  for (int j = 0; j < 16; ++j) sc[j] = b.scales[j];
  // Element 128c + 32k + l: nibble of ql[64c + l] (k = 0, 2) or ql[64c + 32 + l] (k = 1, 3),
  // low for k < 2, with bits 2k..2k+1 of qh[32c + l] on top. Kept unsigned (the kernel
  // applies the -32 through the activation block sums).
  for (int c = 0; c < 2; ++c) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const std::uint8_t byte = b.ql[64 * c + 32 * (k & 1) + l];
        const int lo = k < 2 ? (byte & 0xF) : (byte >> 4);
        const int hi = (b.qh[32 * c + l] >> (2 * k)) & 3;
        q[128 * c + 32 * k + l] = static_cast<std::int8_t>(lo | (hi << 4));
      }
    }
  }
}

template <gguf::tensor_type Type>
void unpack_row(const std::byte* src, std::int64_t nb, unpacked_row& r) {
  for (std::int64_t b = 0; b < nb; ++b) {
    std::int8_t* q = r.q.data() + b * qk;
    std::int8_t* sc = r.scale.data() + b * 16;
    if constexpr (Type == gguf::tensor_type::q3_K) {
      const auto& blk = reinterpret_cast<const gguf::block_q3_K*>(src)[b];
      unpack_q3_K(blk, q, sc);
      r.d[b] = fp16_to_fp32(blk.d);
    } else if constexpr (Type == gguf::tensor_type::q5_K) {
      const auto& blk = reinterpret_cast<const gguf::block_q5_K*>(src)[b];
      unpack_q5_K(blk, q, sc, r.min.data() + b * 8);
      r.d[b] = fp16_to_fp32(blk.d);
      r.dmin[b] = fp16_to_fp32(blk.dmin);
    } else {
      const auto& blk = reinterpret_cast<const gguf::block_q6_K*>(src)[b];
      unpack_q6_K(blk, q, sc);
      r.d[b] = fp16_to_fp32(blk.d);
    }
  }
}

// ---- the dot product

// The 8 int32 lanes of one super-block: lane L sums, over the 8 groups of 32 elements, the
// group's elements 4L..4L+3 times their 16-element scale.
inline void block_lanes(const std::int8_t* q, const std::int8_t* sc, const std::int8_t* x, std::int32_t* lanes) {
  for (int L = 0; L < 8; ++L) lanes[L] = 0;
  for (int g = 0; g < 8; ++g) {
    for (int L = 0; L < 8; ++L) {
      const int e = 32 * g + 4 * L;
      const int s = q[e] * x[e] + q[e + 1] * x[e + 1] + q[e + 2] * x[e + 2] + q[e + 3] * x[e + 3];
      lanes[L] += sc[2 * g + L / 4] * s;
    }
  }
}

using block_lanes_fn = void (*)(const std::int8_t* q, const std::int8_t* sc, const std::int8_t* x, std::int32_t* lanes);

template <gguf::tensor_type Type, block_lanes_fn Lanes = block_lanes>
float dot_row(const unpacked_row& r, const gguf::block_q8_K* x, std::int64_t nb) {
  float acc[8] = {};
  float summs = 0.0f;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::int8_t* sc = r.scale.data() + b * 16;
    std::int32_t lanes[8];
    Lanes(r.q.data() + b * qk, sc, x[b].qs, lanes);
    if constexpr (Type == gguf::tensor_type::q6_K) {
      for (int L = 0; L < 8; ++L) {
        lanes[L] -= 32 * (sc[2 * L] * x[b].bsums[2 * L] + sc[2 * L + 1] * x[b].bsums[2 * L + 1]);
      }
    }
    const float d = x[b].d * r.d[b];
    for (int L = 0; L < 8; ++L) acc[L] = std::fma(d, static_cast<float>(lanes[L]), acc[L]);
    if constexpr (Type == gguf::tensor_type::q5_K) {
      const std::int8_t* mn = r.min.data() + b * 8;
      std::int32_t isum = 0;
      for (int j = 0; j < 8; ++j) isum += mn[j] * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
      const float dmin = -x[b].d * r.dmin[b];
      summs = std::fma(dmin, static_cast<float>(isum), summs);
    }
  }
  if constexpr (Type == gguf::tensor_type::q5_K) {
    return reduce8(acc) + summs;
  } else {
    return reduce8(acc);
  }
}

// Each row unpacked once, then dotted with every token's activations.
template <gguf::tensor_type Type, block_lanes_fn Lanes = block_lanes>
void matmul_k(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qk;
  std::vector<gguf::block_q8_K> xq(static_cast<std::size_t>(nb * n_tokens));
  for (std::int64_t t = 0; t < n_tokens; ++t) quantize_act_q8_K(x + t * w.in, xq.data() + t * nb, w.in);
  const std::int64_t out = w.out;
  pool.parallel_for(out, [&](std::int64_t begin, std::int64_t end, int) {
    unpacked_row r(w.in);
    for (std::int64_t o = begin; o < end; ++o) {
      unpack_row<Type>(w.row(o), nb, r);
      for (std::int64_t t = 0; t < n_tokens; ++t) y[t * out + o] = dot_row<Type, Lanes>(r, xq.data() + t * nb, nb);
    }
  });
}

}  // namespace spite::dispatch::cpu::kquants
