// NEON versions of the attention pieces in simd_math.hpp (the contract of simd_x86_math.cpp:
// per lane exactly what the scalar reference does per element, the same products, additions
// and fused multiply-adds in the same order, f16 conversions rounding to nearest even, ldexp as
// two exact power-of-two scalings). The build keeps -ffp-contract=off, so a multiply and an add
// written apart stay apart.
#include "simd_math.hpp"

#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "ref_math.hpp"
#include "simd_arm_neon.hpp"
#include "spite/core/half.hpp"

namespace spite::dispatch::cpu {
namespace {

using neon::reduce16;
using neon::widen4;

inline float32x4_t round4(float32x4_t x) { return vcvt_f32_f16(vcvt_f16_f32(x)); }

// 16 lane sums of products, `a` as floats or as f16.
template <class A>
float dot16_of(const A* a, const float* b, std::int64_t n) {
  float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  for (std::int64_t i = 0; i < n; i += 16) {
    for (int q = 0; q < 4; ++q) acc[q] = vaddq_f32(acc[q], vmulq_f32(widen4(a + i + 4 * q), vld1q_f32(b + i + 4 * q)));
  }
  return reduce16(acc);
}

float dot16(const float* a, const float* b, std::int64_t n) { return dot16_of(a, b, n); }
float dot16_h(const std::uint16_t* a, const float* b, std::int64_t n) { return dot16_of(a, b, n); }

void axpy_h(float* acc, const std::uint16_t* v, float p, std::int64_t n) {
  const float32x4_t pv = vdupq_n_f32(p);
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(acc + i, vaddq_f32(vld1q_f32(acc + i), vmulq_f32(pv, widen4(v + i))));
  for (; i < n; ++i) acc[i] += p * fp16_to_fp32(v[i]);
}

void widen(const std::uint16_t* h, float* out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(out + i, widen4(h + i));
  for (; i < n; ++i) out[i] = fp16_to_fp32(h[i]);
}

void round_f16(const float* in, float* out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(out + i, round4(vld1q_f32(in + i)));
  for (; i < n; ++i) out[i] = fp16_to_fp32(fp32_to_fp16(in[i]));
}

// 2^e for e in [-126, 127], exact.
inline float32x4_t pow2(int32x4_t e) { return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(e, vdupq_n_s32(127)), 23)); }

// ref_expf on 4 lanes.
inline float32x4_t expf4(float32x4_t x) {
  const float32x4_t r = vdupq_n_f32(0x1.8p23f);
  const float32x4_t z = vfmaq_f32(r, x, vdupq_n_f32(0x1.715476p+0f));
  const float32x4_t n = vsubq_f32(z, r);
  const float32x4_t neg_n = vnegq_f32(n);
  const float32x4_t b = vfmaq_f32(vfmaq_f32(x, neg_n, vdupq_n_f32(0x1.62e4p-1f)), neg_n, vdupq_n_f32(0x1.7f7d1cp-20f));
  const float32x4_t u = vmulq_f32(b, b);
  const float32x4_t inner = vfmaq_f32(vdupq_n_f32(0x1.fffdb6p-2f), vdupq_n_f32(0x1.555e66p-3f), b);
  const float32x4_t outer = vfmaq_f32(vdupq_n_f32(0x1.573e2ep-5f), vdupq_n_f32(0x1.0e4020p-7f), b);
  const float32x4_t j = vfmaq_f32(vfmaq_f32(vdupq_n_f32(1.0f), vdupq_n_f32(0x1.ffffecp-1f), b), vfmaq_f32(inner, outer, u), u);
  // ldexp(j, n) for |n| <= 192: two exact scalings, only the second can round, once.
  const int32x4_t ni = vcvtnq_s32_f32(n);  // n is an integer already
  const int32x4_t half = vshrq_n_s32(ni, 1);
  float32x4_t result = vmulq_f32(vmulq_f32(j, pow2(half)), pow2(vsubq_s32(ni, half)));
  // |n| > 192: infinity or zero; x == -inf: zero.
  const uint32x4_t big = vcgtq_f32(vabsq_f32(n), vdupq_n_f32(192.0f));
  const uint32x4_t positive = vcgtq_f32(n, vdupq_n_f32(0.0f));
  const float32x4_t saturated = vbslq_f32(positive, vdupq_n_f32(__builtin_inff()), vdupq_n_f32(0.0f));
  result = vbslq_f32(big, saturated, result);
  const uint32x4_t minus_inf = vceqq_f32(x, vdupq_n_f32(-__builtin_inff()));
  return vbslq_f32(minus_inf, vdupq_n_f32(0.0f), result);
}

float exp16(float* chunk, float max) {
  const float32x4_t m = vdupq_n_f32(max);
  float32x4_t e[4];
  for (int q = 0; q < 4; ++q) {
    e[q] = expf4(vsubq_f32(vld1q_f32(chunk + 4 * q), m));
    vst1q_f32(chunk + 4 * q, e[q]);
  }
  return reduce16(e);
}

void swiglu16(const float* g, const float* u, float* h) {
  const float32x4_t one = vdupq_n_f32(1.0f);
  for (int i = 0; i < 16; i += 4) {
    const float32x4_t x = vld1q_f32(g + i);
    const float32x4_t e = expf4(vnegq_f32(x));
    vst1q_f32(h + i, vmulq_f32(vdivq_f32(x, vaddq_f32(one, e)), vld1q_f32(u + i)));
  }
}

float dot_f16_blocks(const std::uint16_t* a, const float* b, std::int64_t n) { return neon::vec_dot_f16(a, b, n); }

void dot_f16_rows(const std::uint16_t* rows, std::int64_t stride, const std::int32_t* keys, std::int64_t count, const float* b,
                  std::int64_t n, float* out) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = neon::vec_dot_f16(rows + keys[i] * stride, b, n);
}

// The C library's expf as AArch64 glibc builds it: x / ln2 * 32 in double rounded to an
// integer k (ties away from zero, its TOINT_INTRINSICS) and a remainder r, 2^(k/32) from the
// table (the integer part of k/32 added to its exponent), 2^(r/32) as a cubic with fused
// multiply-adds, rounded once to float. Below -0x1.9fe368p6 the result underflows to 0.
struct exp2_table {
  std::uint64_t bits[32];
  exp2_table() {
    for (int i = 0; i < 32; ++i) {
      const double d = std::exp2(i / 32.0);
      std::uint64_t u;
      std::memcpy(&u, &d, sizeof u);
      bits[i] = u - (static_cast<std::uint64_t>(i) << 47);
    }
  }
};
const exp2_table k_exp2;

inline float64x2_t libm_exp2d(float64x2_t xd) {
  const float64x2_t z = vmulq_f64(vdupq_n_f64(0x1.71547652b82fep0 * 32), xd);
  const float64x2_t kd = vrndaq_f64(z);
  const int64x2_t ki = vcvtaq_s64_f64(z);
  const float64x2_t r = vsubq_f64(z, kd);
  const std::uint64_t k0 = static_cast<std::uint64_t>(vgetq_lane_s64(ki, 0)), k1 = static_cast<std::uint64_t>(vgetq_lane_s64(ki, 1));
  const std::uint64_t t[2] = {k_exp2.bits[k0 % 32] + (k0 << 47), k_exp2.bits[k1 % 32] + (k1 << 47)};
  const float64x2_t c0 = vdupq_n_f64(0x1.c6af84b912394p-5 / 32 / 32 / 32), c1 = vdupq_n_f64(0x1.ebfce50fac4f3p-3 / 32 / 32),
                    c2 = vdupq_n_f64(0x1.62e42ff0c52d6p-1 / 32);
  const float64x2_t p = vfmaq_f64(vfmaq_f64(vdupq_n_f64(1.0), c2, r), vfmaq_f64(c1, c0, r), vmulq_f64(r, r));
  return vmulq_f64(p, vreinterpretq_f64_u64(vld1q_u64(t)));
}

inline float32x4_t libm_expf4(float32x4_t x) {
  const float32x2_t lo = vcvt_f32_f64(libm_exp2d(vcvt_f64_f32(vget_low_f32(x))));
  const float32x4_t y = vcvt_high_f32_f64(lo, libm_exp2d(vcvt_high_f64_f32(x)));
  return vbslq_f32(vcltq_f32(x, vdupq_n_f32(-0x1.9fe368p6f)), vdupq_n_f32(0.0f), y);
}

void exp_nonpositive(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, libm_expf4(vld1q_f32(x + i)));
  for (; i < n; ++i) y[i] = std::exp(x[i]);
}

// W vectors of 4 dimensions kept in registers (as f16-rounded floats) over all the keys,
// starting from out.
template <int W>
void accumulate_block(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                      const float* weight, const float* rescale, std::int64_t n) {
  float32x4_t acc[W];
  for (int w = 0; w < W; ++w) acc[w] = vld1q_f32(out + 4 * w);
  for (std::int64_t i = 0; i < n; ++i) {
    if (rescale[i] != 1.0f) {
      const float32x4_t s = vdupq_n_f32(rescale[i]);
      for (auto& a : acc) a = round4(vmulq_f32(a, s));
    }
    const std::uint16_t* v = values + keys[i] * stride;
    const float32x4_t p = vdupq_n_f32(weight[i]);
    for (int w = 0; w < W; ++w) acc[w] = round4(vfmaq_f32(acc[w], widen4(v + 4 * w), p));
  }
  for (int w = 0; w < W; ++w) vst1q_f32(out + 4 * w, acc[w]);
}

float accumulate_f16(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                     const float* weight, const float* rescale, std::int64_t n, std::int64_t dv, float sum) {
  std::int64_t d = 0;
  for (; d + 64 <= dv; d += 64) accumulate_block<16>(out + d, values + d, stride, keys, weight, rescale, n);
  for (; d + 4 <= dv; d += 4) accumulate_block<1>(out + d, values + d, stride, keys, weight, rescale, n);
  return accumulate_f16_scalar(out, values, stride, keys, weight, rescale, n, d, dv, sum);
}

// A block of R rows x 4*W columns of c kept in registers over the whole k loop.
template <int R, int W>
inline void gemm_block(float* c, const float* a, const float* b, std::int64_t k, std::int64_t n) {
  float32x4_t acc[R][W];
  for (int r = 0; r < R; ++r) {
    for (int w = 0; w < W; ++w) acc[r][w] = vld1q_f32(c + r * n + 4 * w);
  }
  for (std::int64_t kk = 0; kk < k; ++kk) {
    float32x4_t bv[W];
    for (int w = 0; w < W; ++w) bv[w] = vld1q_f32(b + kk * n + 4 * w);
    for (int r = 0; r < R; ++r) {
      const float32x4_t av = vdupq_n_f32(a[r * k + kk]);
      for (int w = 0; w < W; ++w) acc[r][w] = vfmaq_f32(acc[r][w], av, bv[w]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int w = 0; w < W; ++w) vst1q_f32(c + r * n + 4 * w, acc[r][w]);
  }
}

template <int R>
void gemm_rows(float* c, const float* a, const float* b, std::int64_t k, std::int64_t n) {
  std::int64_t j = 0;
  for (; j + 16 <= n; j += 16) gemm_block<R, 4>(c + j, a, b + j, k, n);
  for (; j + 4 <= n; j += 4) gemm_block<R, 1>(c + j, a, b + j, k, n);
  for (; j < n; ++j) {
    for (int r = 0; r < R; ++r) {
      float s = c[r * n + j];
      for (std::int64_t kk = 0; kk < k; ++kk) s = std::fma(a[r * k + kk], b[kk * n + j], s);
      c[r * n + j] = s;
    }
  }
}

void gemm_acc(float* c, const float* a, const float* b, std::int64_t m, std::int64_t k, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 4 <= m; i += 4) gemm_rows<4>(c + i * n, a + i * k, b, k, n);
  for (; i < m; ++i) gemm_rows<1>(c + i * n, a + i * k, b, k, n);
}

constexpr simd_math k_neon{dot16,   dot16_h, axpy_h,    widen,     round_f16, exp16,
                           swiglu16, dot_f16_blocks, dot_f16_rows, exp_nonpositive, accumulate_f16, gemm_acc};

}  // namespace

const simd_math* fast_math() { return &k_neon; }

}  // namespace spite::dispatch::cpu

#endif
