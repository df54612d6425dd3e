// Normalization, rotary embedding and the gated activations, evaluated in the reference
// engine's order.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_kernels.hpp"
#include "ref_math.hpp"
#include "simd_math.hpp"
#include "spite/core/half.hpp"

namespace spite::dispatch::cpu {

namespace {

// The reference's mean of a row's squares: float(sum / n), the squares (floats, widened) added
// in double one after the other. That chain of dependent additions set the pace of a decode
// step's norms (2048 of them, 3-4 cycles each). Any order of adding n non-negative terms lands
// within gamma = (n - 1) u / (1 - (n - 1) u) of their exact sum S (u = 2^-53), so the chain's sum
// and one taken in 8 lanes lie within 2 gamma S of each other; float(sum / n) is monotonic in
// the sum, so where the bounds around the lanes' sum give one float, it is the chain's. Only
// rows within about 2 n u of a float's rounding boundary (about one in 10^5 at 2048) run the
// chain.
float mean_square(const float* x, std::int64_t n) {
  const auto dn = static_cast<double>(n);
  double lanes[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) lanes[k] += static_cast<double>(x[i + k] * x[i + k]);
  }
  double sum = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  // 2 gamma / (1 - gamma) with room to spare, and 4 u for the rounding of sum -/+ bound.
  constexpr double u = 0x1p-53;
  const double bound = sum * (2.0 * dn * u * (1.0 + 0x1p-20) + 4.0 * u);
  const auto low = static_cast<float>((sum - bound) / dn), high = static_cast<float>((sum + bound) / dn);
  if (low == high && std::isfinite(sum) && n < (std::int64_t{1} << 30)) return low;
  double chain = 0.0;
  for (std::int64_t j = 0; j < n; ++j) chain += static_cast<double>(x[j] * x[j]);
  return static_cast<float>(chain / dn);
}

// Row r of rms_norm from the mean of its squares.
void rms_scale_row(const float* xr, const float* w, float* yr, std::int64_t n, float mean, float eps) {
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (std::int64_t i = 0; i < n; ++i) yr[i] = xr[i] * scale;
  if (w != nullptr) {
    for (std::int64_t i = 0; i < n; ++i) yr[i] = yr[i] * w[i];
  }
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, std::int64_t n, std::int64_t rows, float eps) {
  // The reference accumulates each row's squares in double, one after the other: a chain of
  // dependent additions that sets the pace. Four rows' chains side by side (each still in its
  // own order) run faster: 4 rows of 2048 normed in 2.7-3.2 us with the SIMD sums (1.4 of it
  // the sums), 3.5-4.6 with four scalar chains, 6.9-8.3 one row after the other. A row alone
  // (decode) is summed in lanes where that provably gives the chain's mean (mean_square).
  const simd_math* simd = fast_math();
  std::int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float* x0 = x + r * n;
    double sums[4] = {0.0, 0.0, 0.0, 0.0};
    if (simd != nullptr && simd->sum_squares4 != nullptr) {
      simd->sum_squares4(x0, n, n, sums);
    } else {
      const float *x1 = x0 + n, *x2 = x1 + n, *x3 = x2 + n;
      for (std::int64_t i = 0; i < n; ++i) {
        sums[0] += static_cast<double>(x0[i] * x0[i]);
        sums[1] += static_cast<double>(x1[i] * x1[i]);
        sums[2] += static_cast<double>(x2[i] * x2[i]);
        sums[3] += static_cast<double>(x3[i] * x3[i]);
      }
    }
    for (int k = 0; k < 4; ++k) rms_scale_row(x0 + k * n, w, y + (r + k) * n, n, static_cast<float>(sums[k] / static_cast<double>(n)), eps);
  }
  for (; r < rows; ++r) rms_scale_row(x + r * n, w, y + r * n, n, mean_square(x + r * n, n), eps);
}

namespace {

float yarn_corr_dim(std::int64_t n_dims, std::int32_t n_ctx_orig, float n_rot, float base) {
  return static_cast<float>(n_dims) * std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2.0f * 3.14159265358979323846f)) /
         (2.0f * std::log(base));
}

float yarn_ramp(float low, float high, std::int64_t i0) {
  const float y = (static_cast<float>(i0 / 2) - low) / std::max(0.001f, high - low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

}  // namespace

void rope(const rope_args& a) {
  const float theta_scale = std::pow(a.freq_base, -2.0f / static_cast<float>(a.n_dims));
  float corr_low = 0, corr_high = 0;
  if (a.ext_factor != 0.0f) {
    corr_low = std::max(0.0f, std::floor(yarn_corr_dim(a.n_dims, a.n_ctx_orig, a.beta_fast, a.freq_base)));
    corr_high = std::min(static_cast<float>(a.n_dims - 1), std::ceil(yarn_corr_dim(a.n_dims, a.n_ctx_orig, a.beta_slow, a.freq_base)));
  }
  std::vector<float> cos_sin(static_cast<std::size_t>(a.n_dims));
  // The rotation with SIMD where the processor has it (the same operations, so the same bits):
  // the scalar loop's fma calls into the C library cost more than the rest of a decode step's
  // RoPE (`bench --parallel 4`, TinyLlama: 12 us per call of 4 tokens).
  const simd_math* simd = fast_math();
  const auto rotate = simd != nullptr && a.n_dims % 2 == 0 ? simd->rope_heads : nullptr;
  for (std::int64_t t = 0; t < a.n_tokens; ++t) {
    // cos / sin per pair for this position; theta advances by repeated multiplication, in float.
    float theta_base = static_cast<float>(a.pos[t]);
    for (std::int64_t i0 = 0; i0 < a.n_dims; i0 += 2) {
      const float ff = a.freq_factors != nullptr ? a.freq_factors[i0 / 2] : 1.0f;
      const float theta_extrap = theta_base / ff;
      const float theta_interp = a.freq_scale * theta_extrap;
      float theta = theta_interp, mscale = a.attn_factor;
      if (a.ext_factor != 0.0f) {
        const float mix = yarn_ramp(corr_low, corr_high, i0) * a.ext_factor;
        // the reference's compiler contracts these into fused multiply-adds
        theta = std::fma(theta_interp, 1 - mix, theta_extrap * mix);
        mscale *= std::fma(0.1f, std::log(1.0f / a.freq_scale), 1.0f);
      }
      cos_sin[static_cast<std::size_t>(i0)] = std::cos(theta) * mscale;
      cos_sin[static_cast<std::size_t>(i0 + 1)] = std::sin(theta) * mscale;
      theta_base *= theta_scale;
    }
    if (rotate != nullptr) {
      rotate(a.x + t * a.n_head * a.head_dim, a.n_head, a.head_dim, cos_sin.data(), a.n_dims, a.neox);
      continue;
    }
    for (std::int64_t h = 0; h < a.n_head; ++h) {
      float* v = a.x + (t * a.n_head + h) * a.head_dim;
      for (std::int64_t i0 = 0; i0 < a.n_dims; i0 += 2) {
        const float c = cos_sin[static_cast<std::size_t>(i0)], s = cos_sin[static_cast<std::size_t>(i0 + 1)];
        const std::int64_t i = a.neox ? i0 / 2 : i0;
        const std::int64_t j = a.neox ? i0 / 2 + a.n_dims / 2 : i0 + 1;
        const float x0 = v[i], x1 = v[j];
        // The reference's compiler contracts these into fused multiply-adds; so do we.
        v[i] = std::fma(x0, c, -(x1 * s));
        v[j] = std::fma(x0, s, x1 * c);
      }
    }
  }
}

void swiglu(const float* g, const float* u, float* h, std::int64_t n, std::int64_t rows) {
  const std::int64_t vector_part = n / 16 * 16;  // the reference's vector exp covers whole chunks
  const simd_math* simd = fast_math();
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t i = 0;
    if (simd != nullptr && simd->swiglu_row != nullptr) {
      simd->swiglu_row(g + r * n, u + r * n, h + r * n, vector_part);
      i = vector_part;
    } else if (simd != nullptr) {
      for (; i < vector_part; i += 16) simd->swiglu16(g + r * n + i, u + r * n + i, h + r * n + i);
    }
    for (; i < n; ++i) {
      const std::int64_t k = r * n + i;
      h[k] = ref_silu(g[k], i < vector_part) * u[k];
    }
  }
}

}  // namespace spite::dispatch::cpu

namespace spite::dispatch::cpu {

namespace {

// The reference evaluates GELU through a table over every f16 value: the input is rounded to
// f16 and the f16-rounded tanh-GELU of that value is looked up.
const std::vector<std::uint16_t>& gelu_table() {
  static const std::vector<std::uint16_t> table = [] {
    std::vector<std::uint16_t> t(65536);
    constexpr float coef_a = 0.044715f, sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    for (std::size_t i = 0; i < t.size(); ++i) {
      const float x = fp16_to_fp32(static_cast<std::uint16_t>(i));
      // the reference's compiler contracts 1 + a*x*x into a fused multiply-add
      t[i] = fp32_to_fp16(0.5f * x * (1.0f + std::tanh(sqrt_2_over_pi * x * std::fma(coef_a * x, x, 1.0f))));
    }
    return t;
  }();
  return table;
}

}  // namespace

void geglu(const float* g, const float* u, float* h, std::int64_t n, std::int64_t rows) {
  const std::vector<std::uint16_t>& table = gelu_table();
  for (std::int64_t k = 0; k < n * rows; ++k) {
    const float x = g[k];
    const float gelu = x <= -10.0f ? 0.0f : x >= 10.0f ? x : fp16_to_fp32(table[fp32_to_fp16(x)]);
    h[k] = gelu * u[k];
  }
}

void swiglu_oai(const float* g, const float* u, float* h, std::int64_t n, std::int64_t rows, float alpha, float limit) {
  for (std::int64_t k = 0; k < n * rows; ++k) {
    const float x = std::min(g[k], limit);
    const float y = std::clamp(u[k], -limit, limit);
    h[k] = x / (1.0f + std::exp(alpha * (-x))) * (y + 1.0f);
  }
}

}  // namespace spite::dispatch::cpu
