// AVX-512 rms_norm, swiglu and f32/f16 matmul. Each matches the built-in reference within the
// verify tolerances: f16 matmuls round the activations to f16 first, as the reference does.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels.hpp"

namespace spite_llama3_v4 {
namespace {

// exp(x) for x in [-87, 88]: 2^n * p(r), r = x - n ln 2, |r| <= ln 2 / 2, degree-6 polynomial
// (relative error ~2e-7).
inline __m512 exp512(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.0f)), _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

inline __mmask16 tail_mask(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << remaining) - 1u);
}

}  // namespace

spite_status rms_norm(const void* args, void*, void*) {
  const auto* a = static_cast<const spite_rms_norm_args*>(args);
  if (a == nullptr || a->struct_size < sizeof(spite_rms_norm_args) || a->n <= 0 || a->rows < 0) return SPITE_ERR_INVALID;
  for (int64_t r = 0; r < a->rows; ++r) {
    const float* x = a->x + r * a->n;
    float* y = a->y + r * a->n;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < a->n; i += 16) {
      const __m512 v = _mm512_maskz_loadu_ps(tail_mask(a->n - i), x + i);
      acc = _mm512_fmadd_ps(v, v, acc);
    }
    const float mean = _mm512_reduce_add_ps(acc) / static_cast<float>(a->n);
    const __m512 scale = _mm512_set1_ps(1.0f / std::sqrt(mean + a->eps));
    for (int64_t i = 0; i < a->n; i += 16) {
      const __mmask16 m = tail_mask(a->n - i);
      __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), scale);
      if (a->weight != nullptr) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, a->weight + i));
      _mm512_mask_storeu_ps(y + i, m, v);
    }
  }
  return SPITE_OK;
}

spite_status swiglu(const void* args, void*, void*) {
  const auto* a = static_cast<const spite_swiglu_args*>(args);
  if (a == nullptr || a->struct_size < sizeof(spite_swiglu_args) || a->n <= 0 || a->rows < 0) return SPITE_ERR_INVALID;
  const int64_t total = a->n * a->rows;
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < total; i += 16) {
    const __mmask16 m = tail_mask(total - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, a->gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, a->up + i);
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(a->out + i, m, _mm512_mul_ps(silu, u));
  }
  return SPITE_OK;
}

spite_status matmul(const void* args, void*, void*) {
  const auto* a = static_cast<const spite_matmul_args*>(args);
  if (a == nullptr || a->struct_size < sizeof(spite_matmul_args) || a->in <= 0 || a->out < 0 || a->rows < 0) {
    return SPITE_ERR_INVALID;
  }
  const bool f16 = a->weight_dtype == SPITE_DTYPE_F16;
  if (!f16 && a->weight_dtype != SPITE_DTYPE_F32) return SPITE_ERR_UNSUPPORTED;
  const auto* base = static_cast<const unsigned char*>(a->weight);
  for (int64_t t = 0; t < a->rows; ++t) {
    const float* x = a->x + t * a->in;
    float* y = a->y + t * a->out;
    for (int64_t o = 0; o < a->out; ++o) {
      const unsigned char* row = base + static_cast<size_t>(o) * a->row_bytes;
      __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
      int64_t i = 0;
      if (f16) {
        const auto* w = reinterpret_cast<const uint16_t*>(row);
        // The reference rounds activations to f16 before an f16 dot product.
        auto x16 = [](__m512 v) { return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); };
        for (; i + 32 <= a->in; i += 32) {
          acc0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i))),
                                 x16(_mm512_loadu_ps(x + i)), acc0);
          acc1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i + 16))),
                                 x16(_mm512_loadu_ps(x + i + 16)), acc1);
        }
        for (; i < a->in; i += 16) {
          const __mmask16 m = tail_mask(a->in - i);
          const __m512 wv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + i));
          acc0 = _mm512_fmadd_ps(wv, x16(_mm512_maskz_loadu_ps(m, x + i)), acc0);
        }
      } else {
        const auto* w = reinterpret_cast<const float*>(row);
        for (; i + 32 <= a->in; i += 32) {
          acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), acc0);
          acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(x + i + 16), acc1);
        }
        for (; i < a->in; i += 16) {
          const __mmask16 m = tail_mask(a->in - i);
          acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, x + i), acc0);
        }
      }
      y[o] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    }
  }
  return SPITE_OK;
}

}  // namespace spite_llama3_v4
