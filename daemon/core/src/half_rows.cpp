// Rows of binary16 conversions (half.hpp): with F16C where the processor has it (the KV cache
// stores every key and value of every layer this way: per element, the portable rounding's
// branches cost a decode step of four sequences more than its RoPE did), else one by one.
// VCVTPS2PH rounds to nearest even as fp32_to_fp16 does; it keeps a NaN's payload where
// fp32_to_fp16 gives the one quiet NaN, so chunks holding a NaN take the portable way.
#include "spite/core/half.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace spite {
namespace {

#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) void fp32_to_fp16_f16c(const float* x, std::uint16_t* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {
      for (int l = 0; l < 8; ++l) y[i + l] = fp32_to_fp16(x[i + l]);
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

// CPUID leaf 1 and XGETBV (the OS saves the YMM registers): some compilers' __builtin_cpu_supports
// do not know "f16c".
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  constexpr unsigned osxsave = 1u << 27, avx = 1u << 28, f16c = 1u << 29;
  if ((c & (osxsave | avx | f16c)) != (osxsave | avx | f16c)) return false;
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 6u) == 6u;
}
#endif

}  // namespace

void fp32_to_fp16_row(const float* x, std::uint16_t* y, std::int64_t n) noexcept {
#if defined(__x86_64__)
  static const bool f16c = has_f16c();
  if (f16c) {
    fp32_to_fp16_f16c(x, y, n);
    return;
  }
#endif
  for (std::int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

}  // namespace spite
