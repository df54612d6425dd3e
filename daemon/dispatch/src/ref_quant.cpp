#include "ref_quant.hpp"

#include <algorithm>
#include <cmath>

#include "spite/core/half.hpp"
#include "spite/gguf/types.hpp"

namespace spite::dispatch::cpu {

matmul_fn find_exact_matmul(gguf::tensor_type type) {
  for (const exact_matmul& m : fast_matmuls()) {
    if (m.type == type) return m.fn;
  }
  return find_reference_matmul(type);
}

matmul_fn find_reference_matmul(gguf::tensor_type type) {
  for (auto group : {exact_matmuls_legacy(), exact_matmuls_kquants(), exact_matmuls_iquants(), exact_matmuls_repack()}) {
    for (const exact_matmul& m : group) {
      if (m.type == type) return m.fn;
    }
  }
  return nullptr;
}

void quantize_act_q8_0(const float* x, gguf::block_q8_0* out, std::int64_t n) {
  for (std::int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    out[b].d = fp32_to_fp16(amax / 127.f);
    for (int j = 0; j < 32; ++j) out[b].qs[j] = static_cast<std::int8_t>(std::nearbyint(xb[j] * id));
  }
}

void quantize_act_q8_K(const float* x, gguf::block_q8_K* out, std::int64_t n) {
  static const q8_K_quantizer simd = simd_q8_K_quantizer(false);
  if (simd != nullptr) return simd(x, out, n);
  (void)gguf::quantize(gguf::tensor_type::q8_K, x, out, n);
}

void quantize_act_q8_K_4x8(const float* x, gguf::block_q8_K* out, std::int64_t n) {
  static const q8_K_quantizer simd = simd_q8_K_quantizer(true);
  if (simd != nullptr) return simd(x, out, n);
  quantize_act_q8_K_4x8_scalar(x, out, n);
}

}  // namespace spite::dispatch::cpu
