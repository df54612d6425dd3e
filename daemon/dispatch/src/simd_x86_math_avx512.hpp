// The attention pieces with AVX-512 (simd_x86_math_avx512.cpp), as simd_x86_math.cpp takes them.
// Internal to spite::dispatch; x86-64 only.
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <xmmintrin.h>

#include "simd_math.hpp"

namespace spite::dispatch::cpu::x86 {

// Keys ahead whose rows the scores and the value sums fetch, with AVX2 and AVX-512 alike (the
// rows of a kv head lie a whole cache row of all kv heads apart, a stride the hardware fetches
// too late at long contexts); the key lists hold key_lookahead readable entries past their end.
constexpr std::int64_t key_ahead = 12, value_ahead = 20;
static_assert(key_ahead + 3 < key_lookahead && value_ahead < key_lookahead);

// The cache lines of `bytes` bytes of a row from a.
inline void fetch_row(const std::uint16_t* a, int bytes) {
  for (int o = 0; o < bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(a) + o, _MM_HINT_T0);
}

// simd_x86_math_avx512.cpp: simd_math::accumulate_f16's dimensions [0, d) in 16-wide registers,
// d the largest multiple of 16 up to dv (returned); the caller takes the rest and the sum.
std::int64_t accumulate_f16_avx512(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                                   const float* weight, const float* rescale, std::int64_t n, std::int64_t dv);
// simd_math::dot_f16_rows_heads for rows of n = 64 or 128 elements, groups of 4 heads (then 2)
// and 4 keys: heads [0, heads / 2 * 2), keys [0, returned); the caller takes the rest (all of
// it for another n: returns 0).
std::int64_t dot_f16_rows_heads_avx512(const std::uint16_t* rows, std::int64_t stride, const std::int32_t* keys, std::int64_t count,
                                       const float* q, std::int64_t n, float* out, std::int64_t out_stride, std::int64_t heads);
// simd_math::accumulate_f16_heads for heads of dv = 64 or 128 dimensions.
void accumulate_f16_heads_avx512(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                                 const float* weight, const float* rescale, std::int64_t w_stride, std::int64_t n,
                                 float* sums, std::int64_t heads, std::int64_t dv);

// simd_math::gemm_acc for n a multiple of 16: the same chains (each element from its value in
// c, k in order), 16 columns per register.
void gemm_acc_avx512(float* c, const float* a, const float* b, std::int64_t m, std::int64_t k, std::int64_t n);
// simd_math::exp16 in one 16-wide register (the same operations per lane, the same reduce16).
float exp16_avx512(float* chunk, float max);
// simd_math::exp_row with exp16_avx512 inlined.
double exp_row_avx512(float* s, std::int64_t n, float max);
// simd_math::exp_nonpositive's libm_expf (simd_x86_math.cpp) on 8 lanes of doubles, its table
// of 2^(i/32) (adjusted bits) from `table`: x[0, done) into y, done (returned) a multiple of 8.
std::int64_t exp_nonpositive_avx512(const float* x, float* y, std::int64_t n, const std::int64_t* table);
// simd_math::online_max over the whole 16-key chunks of n: keys [0, returned), `max` carried
// through them; the caller takes the rest.
std::int64_t online_max_avx512(float* weight, float* rescale, std::int64_t n, float scale, float& max);
// simd_math::swiglu_row with swiglu16's operations on 16 lanes at once.
void swiglu_row_avx512(const float* g, const float* u, float* h, std::int64_t n);
// simd_math::scale_mask_max in 16-wide registers.
float scale_mask_max_avx512(float* s, std::int64_t n, float scale, const std::uint8_t* visible);

}  // namespace spite::dispatch::cpu::x86
#endif
