// NEON versions of the F16-, F32- and BF16-weight matmuls of cpu_matmul.cpp, with its bits
// (the contract of simd_arm_neon.cpp): the reference's GEMM path, 16 lanes of fused
// multiply-adds reduced as reduce16; its vector dot product for the matrices it does not take
// through the GEMM (64-element blocks into four 16-lane groups, folded, the tail added in double
// for f16's exact products or fused into the float sum for f32); BF16 as the AVX-512 BF16 dot
// instruction adds its pairs. Each 16-lane accumulator is four NEON vectors; F16 weights are
// widened four at a time (exact), activations rounded as the reference rounds them.
#include "simd_arm_neon.hpp"

#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cpu_kernels.hpp"
#include "simd_math.hpp"
#include "spite/core/half.hpp"

namespace spite::dispatch::cpu::neon {
namespace {

using gguf::tensor_type;

// GEMM path (n % 16 == 0): R rows x K activation rows from (o, t0), every output's 16 lanes a
// chain of fmas in element order.
template <class T, int R, int K>
void gemm_tile(const weight& w, std::int64_t o, const float* xs, std::int64_t t0, float* y) {
  const std::int64_t n = w.in;
  const T* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const T*>(w.row(o + r));
  float32x4_t acc[R][K][4];
  for (auto& row : acc) {
    for (auto& a : row) a[0] = a[1] = a[2] = a[3] = vdupq_n_f32(0.0f);
  }
  for (std::int64_t i = 0; i < n; i += 16) {
    for (int r = 0; r < R; ++r) {
      float32x4_t wv[4];
      for (int q = 0; q < 4; ++q) wv[q] = widen4(rows[r] + i + 4 * q);
      for (int k = 0; k < K; ++k) {
        const float* x = xs + (t0 + k) * n + i;
        for (int q = 0; q < 4; ++q) acc[r][k][q] = vfmaq_f32(acc[r][k][q], wv[q], vld1q_f32(x + 4 * q));
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < K; ++k) y[(t0 + k) * w.out + o + r] = reduce16(acc[r][k]);
  }
}

// The vector dot product (cpu_matmul.cpp's dot without the GEMM).
template <class T>
float vec_dot(const T* a, const float* b, std::int64_t n) {
  const std::int64_t np = n & ~std::int64_t{63};
  float32x4_t acc[4][4];
  for (auto& g : acc) g[0] = g[1] = g[2] = g[3] = vdupq_n_f32(0.0f);
  for (std::int64_t i = 0; i < np; i += 64) {
    for (int g = 0; g < 4; ++g) {
      for (int q = 0; q < 4; ++q) {
        const std::int64_t e = i + 16 * g + 4 * q;
        acc[g][q] = vfmaq_f32(acc[g][q], widen4(a + e), vld1q_f32(b + e));
      }
    }
  }
  for (int q = 0; q < 4; ++q) {
    acc[0][q] = vaddq_f32(acc[0][q], acc[2][q]);
    acc[1][q] = vaddq_f32(acc[1][q], acc[3][q]);
    acc[0][q] = vaddq_f32(acc[0][q], acc[1][q]);
  }
  if constexpr (std::is_same_v<T, std::uint16_t>) {  // exact products: the tail in double
    double sum = reduce16(acc[0]);
    for (std::int64_t i = np; i < n; ++i) sum += static_cast<double>(fp16_to_fp32(a[i]) * b[i]);
    return static_cast<float>(sum);
  } else {
    float sum = reduce16(acc[0]);
    for (std::int64_t i = np; i < n; ++i) sum = std::fma(a[i], b[i], sum);
    return sum;
  }
}

template <class T>
void matmul_float(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  std::vector<float> rounded;
  const float* xs = x;
  if constexpr (std::is_same_v<T, std::uint16_t>) {
    rounded.resize(static_cast<std::size_t>(w.in * n_tokens));
    fast_math()->round_f16(x, rounded.data(), w.in * n_tokens);  // NEON's, simd_arm_neon_math.cpp
    xs = rounded.data();
  }
  if (!float_gemm_path(w)) {
    for_each_output(w.out, n_tokens, y, pool, [&](std::int64_t o, std::int64_t t) {
      return vec_dot(reinterpret_cast<const T*>(w.row(o)), xs + t * w.in, w.in);
    });
    return;
  }
  // Blocks of 8 groups of 4 rows: each 4 activation rows stay in L1 while the block's rows pass
  // (a whole batch per group would come from further away again for every group). Decode
  // splits single groups between the threads.
  const std::int64_t block_groups = n_tokens >= 4 ? 8 : 1;
  const std::int64_t groups = w.out / 4;
  pool.parallel_for((groups + block_groups - 1) / block_groups, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t b = begin; b < end; ++b) {
      const std::int64_t g0 = b * block_groups, g1 = std::min(groups, g0 + block_groups);
      std::int64_t t = 0;
      for (; t + 4 <= n_tokens; t += 4) {
        for (std::int64_t g = g0; g < g1; ++g) {
          for (int r = 0; r < 4; ++r) gemm_tile<T, 1, 4>(w, 4 * g + r, xs, t, y);
        }
      }
      for (; t < n_tokens; ++t) {
        for (std::int64_t g = g0; g < g1; ++g) gemm_tile<T, 4, 1>(w, 4 * g, xs, t, y);
      }
    }
  });
}

// ---- BF16 (n % 32 == 0): lane l takes pair l of every 32 values, odd element first, each
// product exact (so a fused multiply-add rounds as the instruction's add). A pair load splits
// 16 values into their even and odd elements; a bf16 is the top half of its float.
inline void bf16_step(const std::uint16_t* w, const std::uint16_t* x, float32x4_t* lanes) {
  for (int h = 0; h < 2; ++h) {
    const uint16x8x2_t wp = vld2q_u16(w + 16 * h), xp = vld2q_u16(x + 16 * h);
    for (int q = 0; q < 2; ++q) {
      const auto part = [q](uint16x8_t v) {
        return vreinterpretq_f32_u32(vshll_n_u16(q == 0 ? vget_low_u16(v) : vget_high_u16(v), 16));
      };
      float32x4_t& l = lanes[2 * h + q];
      l = vfmaq_f32(l, part(wp.val[1]), part(xp.val[1]));
      l = vfmaq_f32(l, part(wp.val[0]), part(xp.val[0]));
    }
  }
}

template <int K>
void bf16_tile(const weight& w, std::int64_t o, const std::uint16_t* xs, std::int64_t t0, float* y) {
  const std::int64_t n = w.in;
  const auto* row = reinterpret_cast<const std::uint16_t*>(w.row(o));
  float32x4_t acc[K][4];
  for (auto& a : acc) a[0] = a[1] = a[2] = a[3] = vdupq_n_f32(0.0f);
  for (std::int64_t i = 0; i < n; i += 32) {
    for (int k = 0; k < K; ++k) bf16_step(row + i, xs + (t0 + k) * n + i, acc[k]);
  }
  for (int k = 0; k < K; ++k) y[(t0 + k) * w.out + o] = reduce16(acc[k]);
}

void matmul_bf16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (w.in % 32 != 0) {  // the reference's vector dot product with a tail: rare, kept generic
    generic_matmul(w, x, n_tokens, y, pool);
    return;
  }
  std::vector<std::uint16_t> xs(static_cast<std::size_t>(w.in * n_tokens));
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = fp32_to_bf16(x[i]);
  // Blocks of 32 rows, each 4 activation rows in L1 while the block's rows pass (as above).
  const std::int64_t block_rows = n_tokens >= 4 ? 32 : 1;
  pool.parallel_for((w.out + block_rows - 1) / block_rows, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t b = begin; b < end; ++b) {
      const std::int64_t o0 = b * block_rows, o1 = std::min(w.out, o0 + block_rows);
      std::int64_t t = 0;
      for (; t + 4 <= n_tokens; t += 4) {
        for (std::int64_t o = o0; o < o1; ++o) bf16_tile<4>(w, o, xs.data(), t, y);
      }
      for (; t < n_tokens; ++t) {
        for (std::int64_t o = o0; o < o1; ++o) bf16_tile<1>(w, o, xs.data(), t, y);
      }
    }
  });
}

constexpr exact_matmul k_table[] = {
    {tensor_type::f16, matmul_float<std::uint16_t>},
    {tensor_type::f32, matmul_float<float>},
    {tensor_type::bf16, matmul_bf16},
};

}  // namespace

std::span<const exact_matmul> float_matmuls() { return k_table; }
float vec_dot_f16(const std::uint16_t* a, const float* x, std::int64_t n) { return vec_dot(a, x, n); }

}  // namespace spite::dispatch::cpu::neon

#endif
