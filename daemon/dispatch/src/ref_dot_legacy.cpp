// Exact matmuls for the 32-element block types that the reference does not repack.
#include <cmath>
#include <vector>

#include "ref_quant.hpp"
#include "spite/core/half.hpp"

namespace spite::dispatch::cpu {
namespace {

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

constexpr exact_matmul k_table[] = {
    {gguf::tensor_type::q8_0, matmul_q8_0},
};

}  // namespace

std::span<const exact_matmul> exact_matmuls_legacy() { return k_table; }

}  // namespace spite::dispatch::cpu
