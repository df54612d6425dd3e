// Exact matmuls for the types the reference repacks (see ref_quant.hpp): Q4_0, IQ4_NL, Q4_K, Q2_K
// (and MXFP4, below).
//
// On x86 the reference's CPU_REPACK buffer type converts weights with a row count that is a
// multiple of 8 into interleaved 8-row blocks at load time and multiplies them with its own
// kernels (ggml-cpu/repack.cpp forward_mul_mat and arch/x86/repack.cpp):
//
// * The batch of n activation rows is split: if n > 3, the first n - n % 4 rows go through the
//   GEMM kernel (activations quantized four rows at a time by quantize_mat_q8_0_4x8 /
//   quantize_mat_q8_K_4x8), the remaining n % 4 (all rows when n <= 3) through the GEMV kernel
//   (activations quantized per row by quantize_row_q8_0 / the scalar quantize_row_q8_K_ref).
// * Every output element is one SIMD lane of its own: there is no horizontal reduction. The
//   integer block sums are exact; the float work is acc = fma(float(isum), d_w * d_x, acc).
// * Q4_0 / IQ4_NL (32-element blocks, Q8_0 activations): one fma per block in both kernels.
// * Q4_K (Q8_K activations): GEMV does one fma per super-block for the scaled quants
//   (sum of scale * isum over the 8 sub-blocks) and one for the mins (sum of min * bsum, with
//   dmin_w * d_x), result acc - acc_min. GEMM does the same per pair of sub-blocks (64
//   elements): four fmas per super-block into each accumulator.
// * Q2_K (repacked only on AVX-512 machines, Q8_K activations): as Q4_K with 16-element
//   sub-blocks; GEMV one fma per super-block, GEMM one per 128-element half.
//
// Weights whose row count is not a multiple of 8 stay unpacked and go through the normal paths:
// Q4_0 / IQ4_NL through llamafile's tinyBLAS_Q0_AVX for n >= 2 and ggml_vec_dot_*_q8_0 for
// n == 1; Q4_K / Q2_K through ggml_vec_dot_*_q8_K.
//
// MXFP4 (gpt-oss's experts), IQ4_NL's block with E2M1 values and an E8M0 scale, is here for that
// block: the reference neither repacks it nor has a GEMM for it, so every product is
// ggml_vec_dot_mxfp4_q8_0, IQ4_NL's x86 vector dot product with d_x * 2^(e - 128).
//
// The Q8_0 4-row quantizer gives the same values as the per-row one. The Q8_K 4-row quantizer
// (AVX2) differs from the scalar one only in the sign of the scale when +amax and -amax both
// occur in a super-block: it picks -127/amax whenever +amax occurs (quantize_act_q8_K_4x8_scalar below).
#include <cmath>
#include <cstring>
#include <vector>

#include "../../gguf/src/quants/iq_tables.hpp"
#include "ref_q2k.hpp"
#include "ref_q4k.hpp"
#include "ref_quant.hpp"
#include "spite/core/half.hpp"

namespace spite::dispatch::cpu {
namespace {

constexpr int qk0 = gguf::qk_legacy;
constexpr int qkk = gguf::qk_k;

using gguf::tensor_type;

}  // namespace

// ---- activation quantizers

// quantize_mat_q8_K_4x8 (AVX2), one row of the four: scale from amax with the sign rule above,
// round to nearest even, bsums per 16 elements.
void quantize_act_q8_K_4x8_scalar(const float* x, gguf::block_q8_K* out, std::int64_t n) {
  for (std::int64_t b = 0; b < n / qkk; ++b) {
    const float* xb = x + b * qkk;
    float amax = 0.0f;
    for (int j = 0; j < qkk; ++j) amax = std::max(amax, std::fabs(xb[j]));
    bool positive = false;
    for (int j = 0; j < qkk; ++j) positive = positive || xb[j] == amax;
    float iscale = 0.0f;
    if (amax != 0.0f) iscale = positive ? -127.f / amax : 127.f / amax;
    out[b].d = amax != 0.0f ? 1.0f / iscale : 0.0f;
    for (int j = 0; j < qkk; ++j) {
      float v = std::nearbyint(xb[j] * iscale);
      v = std::min(127.0f, std::max(-128.0f, v));
      out[b].qs[j] = static_cast<std::int8_t>(v);
    }
    for (int j = 0; j < qkk / 16; ++j) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += out[b].qs[16 * j + i];
      out[b].bsums[j] = static_cast<std::int16_t>(s);
    }
  }
}

std::int64_t gemm_rows(std::int64_t n_tokens) { return n_tokens > 3 ? n_tokens - n_tokens % 4 : 0; }

void quantize_rows_q8_K(const weight& w, const float* x, std::int64_t n_tokens, bool repacked,
                        std::vector<gguf::block_q8_K>& xq, thread_pool& pool) {
  const std::int64_t nb = w.in / qkk;
  xq.resize(static_cast<std::size_t>(nb * n_tokens));
  const std::int64_t ng = repacked ? gemm_rows(n_tokens) : 0;
  for_each_token(n_tokens, pool, [&](std::int64_t t) {
    if (t < ng) {
      quantize_act_q8_K_4x8(x + t * w.in, xq.data() + t * nb, w.in);
    } else {
      quantize_act_q8_K(x + t * w.in, xq.data() + t * nb, w.in);
    }
  });
}

void quantize_tokens_q8_K(const float* x, std::int64_t in, std::int64_t n_tokens, std::vector<gguf::block_q8_K>& xq,
                          thread_pool& pool) {
  const std::int64_t nb = in / qkk;
  xq.resize(static_cast<std::size_t>(nb * n_tokens));
  for_each_token(n_tokens, pool, [&](std::int64_t t) { quantize_act_q8_K(x + t * in, xq.data() + t * nb, in); });
}


namespace {

// ---- 32-element block types: Q4_0, IQ4_NL

// Signed quants of one block in natural element order.
void unpack_q4_0(const gguf::block_q4_0& b, std::int8_t* q) {
  for (int l = 0; l < 16; ++l) {
    q[l] = static_cast<std::int8_t>((b.qs[l] & 0xF) - 8);
    q[l + 16] = static_cast<std::int8_t>((b.qs[l] >> 4) - 8);
  }
}

void unpack_iq4_nl(const gguf::block_iq4_nl& b, std::int8_t* q) {
  for (int l = 0; l < 16; ++l) {
    q[l] = gguf::quants::iq::kvalues_iq4nl[b.qs[l] & 0xF];
    q[l + 16] = gguf::quants::iq::kvalues_iq4nl[b.qs[l] >> 4];
  }
}

void unpack_mxfp4(const gguf::block_mxfp4& b, std::int8_t* q) {
  for (int l = 0; l < 16; ++l) {
    q[l] = gguf::quants::iq::kvalues_mxfp4[b.qs[l] & 0xF];
    q[l + 16] = gguf::quants::iq::kvalues_mxfp4[b.qs[l] >> 4];
  }
}

struct row32 {
  std::vector<std::int8_t> q;
  std::vector<float> d;
  explicit row32(std::int64_t in) : q(static_cast<std::size_t>(in)), d(static_cast<std::size_t>(in / qk0)) {}
};

template <tensor_type Type>
void unpack_row32(const std::byte* src, std::int64_t nb, row32& r) {
  for (std::int64_t b = 0; b < nb; ++b) {
    if constexpr (Type == tensor_type::q4_0) {
      const auto& blk = reinterpret_cast<const gguf::block_q4_0*>(src)[b];
      unpack_q4_0(blk, r.q.data() + b * qk0);
      r.d[b] = fp16_to_fp32(blk.d);
    } else if constexpr (Type == tensor_type::iq4_nl) {
      const auto& blk = reinterpret_cast<const gguf::block_iq4_nl*>(src)[b];
      unpack_iq4_nl(blk, r.q.data() + b * qk0);
      r.d[b] = fp16_to_fp32(blk.d);
    } else {
      const auto& blk = reinterpret_cast<const gguf::block_mxfp4*>(src)[b];
      unpack_mxfp4(blk, r.q.data() + b * qk0);
      r.d[b] = gguf::quants::iq::e8m0_to_fp32_half(blk.e);
    }
  }
}

// Repacked GEMM and GEMV: one lane per output, one fma per block.
float dot32_repacked(const row32& r, const gguf::block_q8_0* x, std::int64_t nb) {
  float acc = 0.0f;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::int8_t* q = r.q.data() + b * qk0;
    int isum = 0;
    for (int i = 0; i < qk0; ++i) isum += q[i] * x[b].qs[i];
    acc = std::fma(static_cast<float>(isum), r.d[b] * fp16_to_fp32(x[b].d), acc);
  }
  return acc;
}

// tinyBLAS_Q0_AVX (n >= 2) and ggml_vec_dot_q4_0_q8_0 (n == 1): 8 lanes of 4 products.
float dot32_lanes8(const row32& r, const gguf::block_q8_0* x, std::int64_t nb) {
  float acc[8] = {};
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::int8_t* q = r.q.data() + b * qk0;
    const float d = r.d[b] * fp16_to_fp32(x[b].d);
    for (int L = 0; L < 8; ++L) {
      int s = 0;
      for (int k = 0; k < 4; ++k) s += q[4 * L + k] * x[b].qs[4 * L + k];
      acc[L] = std::fma(d, static_cast<float>(s), acc[L]);
    }
  }
  return reduce8(acc);
}

// ggml_vec_dot_iq4_nl_q8_0 and ggml_vec_dot_mxfp4_q8_0 (x86): blocks alternate between two
// 8-lane accumulators (lanes of 4 products, d = d_x * d_w), summed before the horizontal
// reduction; an odd last block is added in scalar code.
float dot_nl_vec(const row32& r, const gguf::block_q8_0* x, std::int64_t nb) {
  float acc1[8] = {}, acc2[8] = {};
  std::int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    for (int h = 0; h < 2; ++h) {
      const std::int8_t* q = r.q.data() + (b + h) * qk0;
      const float d = fp16_to_fp32(x[b + h].d) * r.d[b + h];
      float* acc = h == 0 ? acc1 : acc2;
      for (int L = 0; L < 8; ++L) {
        int s = 0;
        for (int k = 0; k < 4; ++k) s += q[4 * L + k] * x[b + h].qs[4 * L + k];
        acc[L] = std::fma(d, static_cast<float>(s), acc[L]);
      }
    }
  }
  float sum8[8];
  for (int L = 0; L < 8; ++L) sum8[L] = acc1[L] + acc2[L];
  float sumf = reduce8(sum8);
  for (; b < nb; ++b) {
    const std::int8_t* q = r.q.data() + b * qk0;
    int s1 = 0, s2 = 0;
    for (int j = 0; j < 16; ++j) {
      s1 += q[j] * x[b].qs[j];
      s2 += q[j + 16] * x[b].qs[j + 16];
    }
    sumf = std::fma(fp16_to_fp32(x[b].d) * r.d[b], static_cast<float>(s1 + s2), sumf);
  }
  return sumf;
}

template <tensor_type Type>
void matmul32(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qk0;
  std::vector<gguf::block_q8_0> xq(static_cast<std::size_t>(nb * n_tokens));
  for (std::int64_t t = 0; t < n_tokens; ++t) quantize_act_q8_0(x + t * w.in, xq.data() + t * nb, w.in);
  const bool repacked = w.out % 8 == 0;
  const std::int64_t out = w.out;
  pool.parallel_for(out, [&](std::int64_t begin, std::int64_t end, int) {
    row32 r(w.in);
    for (std::int64_t o = begin; o < end; ++o) {
      unpack_row32<Type>(w.row(o), nb, r);
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        const gguf::block_q8_0* xt = xq.data() + t * nb;
        float v;
        if (Type == tensor_type::mxfp4) {  // never repacked, no GEMM: the vector dot product
          v = dot_nl_vec(r, xt, nb);
        } else if (repacked) {
          v = dot32_repacked(r, xt, nb);
        } else if (Type == tensor_type::iq4_nl && n_tokens == 1) {
          v = dot_nl_vec(r, xt, nb);
        } else {
          v = dot32_lanes8(r, xt, nb);
        }
        y[t * out + o] = v;
      }
    }
  });
}

constexpr exact_matmul k_table[] = {
    {tensor_type::q4_0, matmul32<tensor_type::q4_0>},
    {tensor_type::iq4_nl, matmul32<tensor_type::iq4_nl>},
    {tensor_type::mxfp4, matmul32<tensor_type::mxfp4>},
    {tensor_type::q4_K, q4k::matmul_q4_K<>},
    {tensor_type::q2_K, q2k::matmul_q2_K<>},
};

}  // namespace

std::span<const exact_matmul> exact_matmuls_repack() { return k_table; }

}  // namespace spite::dispatch::cpu
