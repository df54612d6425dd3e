// Exact matmuls for the 32-element block types that the reference does not repack.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ref_quant.hpp"
#include "spite/core/half.hpp"

namespace spite::dispatch::cpu {
namespace {

struct half_bits_pair {
  gguf::half_bits d, m;
};

// Q8_0 x Q8_0 as the reference's GEMM computes it: 8 lanes, each summing 4 products of a block
// exactly in integers, scaled by d_w * d_x and accumulated with fused multiply-adds.
float dot_q8_0(const gguf::block_q8_0* w, const gguf::block_q8_0* x, std::int64_t nb) {
  float acc[8] = {};
  for (std::int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d);
    for (int j = 0; j < 8; ++j) {
      int sum = 0;
      for (int k = 0; k < 4; ++k) sum += w[b].qs[4 * j + k] * x[b].qs[4 * j + k];
      acc[j] = std::fma(d, static_cast<float>(sum), acc[j]);
    }
  }
  return reduce8(acc);
}

void matmul_q8_0(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / 32;
  std::vector<gguf::block_q8_0> xq(static_cast<std::size_t>(nb * n_tokens));
  for (std::int64_t t = 0; t < n_tokens; ++t) quantize_act_q8_0(x + t * w.in, xq.data() + t * nb, w.in);
  for_each_output(w.out, n_tokens, y, pool, [&](std::int64_t o, std::int64_t t) {
    return dot_q8_0(reinterpret_cast<const gguf::block_q8_0*>(w.row(o)), xq.data() + t * nb, nb);
  });
}

// ---- Q5_0: llamafile's tinyBLAS_Q0_AVX (n >= 2) and ggml_vec_dot_q5_0_q8_0 (n == 1) compute the
// same thing as Q8_0 above, on the signed quants (q5 - 16) in element order.
float dot_q5_0(const gguf::block_q5_0* w, const gguf::block_q8_0* x, std::int64_t nb) {
  float acc[8] = {};
  for (std::int64_t b = 0; b < nb; ++b) {
    std::uint32_t qh;
    std::memcpy(&qh, w[b].qh, 4);
    std::int8_t q[32];
    for (int j = 0; j < 16; ++j) {
      q[j] = static_cast<std::int8_t>(((w[b].qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16);
      q[j + 16] = static_cast<std::int8_t>(((w[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
    }
    const float d = fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d);
    for (int j = 0; j < 8; ++j) {
      int sum = 0;
      for (int k = 0; k < 4; ++k) sum += q[4 * j + k] * x[b].qs[4 * j + k];
      acc[j] = std::fma(d, static_cast<float>(sum), acc[j]);
    }
  }
  return reduce8(acc);
}

void matmul_q5_0(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / 32;
  std::vector<gguf::block_q8_0> xq(static_cast<std::size_t>(nb * n_tokens));
  for (std::int64_t t = 0; t < n_tokens; ++t) quantize_act_q8_0(x + t * w.in, xq.data() + t * nb, w.in);
  for_each_output(w.out, n_tokens, y, pool, [&](std::int64_t o, std::int64_t t) {
    return dot_q5_0(reinterpret_cast<const gguf::block_q5_0*>(w.row(o)), xq.data() + t * nb, nb);
  });
}

// ---- Q4_1 / Q5_1 with Q8_1 activations (ggml_vec_dot_q4_1_q8_1 / _q5_1_q8_1, x86 AVX2; no
// llamafile kernel, so every batch size takes this path).

// Unsigned quants (0..15 or 0..31) in element order; 8 lanes of 4 products scaled by
// d_w * d_x with fmas; the min term m_w * s_x is a scalar sum, contracted to fmas by the
// reference's compiler, added after the lane reduction.
template <bool Q5>
float dot_q4_1_q5_1(const std::byte* row, const gguf::block_q8_1* x, std::int64_t nb) {
  float acc[8] = {};
  float summs = 0.0f;
  for (std::int64_t b = 0; b < nb; ++b) {
    std::uint8_t q[32];
    half_bits_pair dm{};
    if constexpr (Q5) {
      const auto& w = reinterpret_cast<const gguf::block_q5_1*>(row)[b];
      std::uint32_t qh;
      std::memcpy(&qh, w.qh, 4);
      for (int j = 0; j < 16; ++j) {
        q[j] = static_cast<std::uint8_t>((w.qs[j] & 0xF) | (((qh >> j) & 1) << 4));
        q[j + 16] = static_cast<std::uint8_t>((w.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
      }
      dm = {w.d, w.m};
    } else {
      const auto& w = reinterpret_cast<const gguf::block_q4_1*>(row)[b];
      for (int j = 0; j < 16; ++j) {
        q[j] = static_cast<std::uint8_t>(w.qs[j] & 0xF);
        q[j + 16] = static_cast<std::uint8_t>(w.qs[j] >> 4);
      }
      dm = {w.d, w.m};
    }
    summs = std::fma(fp16_to_fp32(dm.m), fp16_to_fp32(x[b].s), summs);
    const float d = fp16_to_fp32(dm.d) * fp16_to_fp32(x[b].d);
    for (int j = 0; j < 8; ++j) {
      int sum = 0;
      for (int k = 0; k < 4; ++k) sum += q[4 * j + k] * x[b].qs[4 * j + k];
      acc[j] = std::fma(d, static_cast<float>(sum), acc[j]);
    }
  }
  return reduce8(acc) + summs;
}

template <bool Q5>
void matmul_q4_1_q5_1(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / 32;
  std::vector<gguf::block_q8_1> xq(static_cast<std::size_t>(nb * n_tokens));
  for (std::int64_t t = 0; t < n_tokens; ++t) quantize_act_q8_1(x + t * w.in, xq.data() + t * nb, w.in);
  for_each_output(w.out, n_tokens, y, pool, [&](std::int64_t o, std::int64_t t) {
    return dot_q4_1_q5_1<Q5>(w.row(o), xq.data() + t * nb, nb);
  });
}

constexpr exact_matmul k_table[] = {
    {gguf::tensor_type::q8_0, matmul_q8_0},
    {gguf::tensor_type::q5_0, matmul_q5_0},
    {gguf::tensor_type::q4_1, matmul_q4_1_q5_1<false>},
    {gguf::tensor_type::q5_1, matmul_q4_1_q5_1<true>},
};

}  // namespace

// quantize_row_q8_1 (AVX2): as Q8_0, plus s = fp16(d * sum(qs)) with the unrounded float d.
void quantize_act_q8_1(const float* x, gguf::block_q8_1* out, std::int64_t n) {
  for (std::int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    out[b].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int v = static_cast<int>(std::nearbyint(xb[j] * id));
      out[b].qs[j] = static_cast<std::int8_t>(v);
      sum += v;
    }
    out[b].s = fp32_to_fp16(d * static_cast<float>(sum));
  }
}

std::span<const exact_matmul> exact_matmuls_legacy() { return k_table; }

}  // namespace spite::dispatch::cpu
