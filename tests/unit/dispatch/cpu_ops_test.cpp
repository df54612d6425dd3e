// The ops of cpu_ops.cpp: RoPE's SIMD rotation (simd_math::rope_heads) against the scalar
// formula, bit for bit, for both pair layouts, partial rotary dimensions and counts off the
// vector widths, and cpu::rope as a whole against that formula; RMS norm of several rows at once
// against the reference's sum of squares in double, row by row.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cpu_kernels.hpp"
#include "simd_math.hpp"
#include "spite/dispatch/ops.hpp"

namespace {

namespace cpu = spite::dispatch::cpu;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The rotation as cpu_ops.cpp writes it: x0' = fma(x0, c, -(x1 s)), x1' = fma(x0, s, x1 c).
void rotate_scalar(float* x, std::int64_t n_head, std::int64_t head_dim, const float* cos_sin, std::int64_t n_dims, bool neox) {
  for (std::int64_t h = 0; h < n_head; ++h) {
    float* v = x + h * head_dim;
    for (std::int64_t i0 = 0; i0 < n_dims; i0 += 2) {
      const float c = cos_sin[i0], s = cos_sin[i0 + 1];
      const std::int64_t i = neox ? i0 / 2 : i0, j = neox ? i0 / 2 + n_dims / 2 : i0 + 1;
      const float x0 = v[i], x1 = v[j];
      const float p = x1 * s, q = x1 * c;
      v[i] = std::fma(x0, c, -p);
      v[j] = std::fma(x0, s, q);
    }
  }
}

}  // namespace

TEST_CASE("the SIMD RoPE rotation gives the scalar rotation's bits for both pair layouts") {
  const auto* simd = cpu::fast_math();
  if (simd == nullptr || simd->rope_heads == nullptr) {
    WARN("no SIMD RoPE rotation on this processor; nothing to compare");
    return;
  }
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_real_distribution<float> angle(-100.0f, 100.0f);
  for (const bool neox : {false, true}) {
    for (const std::int64_t head_dim : {2, 6, 16, 24, 64, 80, 128}) {
      for (const std::int64_t n_dims : {head_dim, head_dim / 2 / 2 * 2, std::int64_t{2}}) {
        if (n_dims < 2) continue;
        const std::int64_t n_head = 3;
        std::vector<float> x(static_cast<std::size_t>(n_head * head_dim)), cos_sin(static_cast<std::size_t>(n_dims));
        for (auto& e : x) e = normal(rng);
        for (std::int64_t p = 0; p < n_dims / 2; ++p) {
          const float theta = angle(rng);
          cos_sin[static_cast<std::size_t>(2 * p)] = std::cos(theta);
          cos_sin[static_cast<std::size_t>(2 * p + 1)] = std::sin(theta);
        }
        std::vector<float> want = x, got = x;
        rotate_scalar(want.data(), n_head, head_dim, cos_sin.data(), n_dims, neox);
        simd->rope_heads(got.data(), n_head, head_dim, cos_sin.data(), n_dims, neox);
        INFO("neox " << neox << ", head_dim " << head_dim << ", n_dims " << n_dims);
        std::size_t differ = 0;
        for (std::size_t i = 0; i < x.size(); ++i) differ += !same_bits(got[i], want[i]);
        CHECK(differ == 0);
      }
    }
  }
}

TEST_CASE("RoPE rotates each token by its own position and leaves the dimensions past n_dims alone") {
  std::mt19937 rng(37);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const bool neox : {false, true}) {
    const std::int64_t n_tokens = 3, n_head = 5, head_dim = 48, n_dims = 40;
    std::vector<float> x(static_cast<std::size_t>(n_tokens * n_head * head_dim));
    for (auto& e : x) e = normal(rng);
    const std::vector<std::int32_t> pos = {0, 7, 1000};
    std::vector<float> got = x;
    spite::dispatch::rope_args a{.x = got.data(), .n_tokens = n_tokens, .n_head = n_head, .head_dim = head_dim, .n_dims = n_dims,
                                 .pos = pos.data(), .neox = neox};
    cpu::rope(a);
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      // theta_p = pos * base^(-2p / n_dims), advanced by repeated multiplication in float.
      std::vector<float> cos_sin(static_cast<std::size_t>(n_dims));
      const float theta_scale = std::pow(10000.0f, -2.0f / static_cast<float>(n_dims));
      float theta = static_cast<float>(pos[static_cast<std::size_t>(t)]);
      for (std::int64_t p = 0; p < n_dims / 2; ++p) {
        cos_sin[static_cast<std::size_t>(2 * p)] = std::cos(theta);
        cos_sin[static_cast<std::size_t>(2 * p + 1)] = std::sin(theta);
        theta *= theta_scale;
      }
      std::vector<float> want(x.begin() + t * n_head * head_dim, x.begin() + (t + 1) * n_head * head_dim);
      rotate_scalar(want.data(), n_head, head_dim, cos_sin.data(), n_dims, neox);
      INFO("neox " << neox << ", token " << t);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < want.size(); ++i) differ += !same_bits(got[static_cast<std::size_t>(t * n_head * head_dim) + i], want[i]);
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("RMS norm of a single row gives the bits of the reference's one-after-the-other double sum, at rounding boundaries too") {
  // A single row's sum is taken in lanes and checked against bounds that the chain's sum must lie
  // within; rows near a float rounding boundary fall back to the chain. The reference mean is
  // float(sum / n) of the chain's sum.
  const auto reference_scale = [](const std::vector<float>& x) {
    double sum = 0.0;
    for (const float v : x) sum += static_cast<double>(v * v);
    return 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(x.size())) + 1e-6f);
  };
  const auto differing = [&](const std::vector<float>& x) {
    std::vector<float> got(x.size());
    cpu::rms_norm(x.data(), nullptr, got.data(), static_cast<std::int64_t>(x.size()), 1, 1e-6f);
    const float scale = reference_scale(x);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < x.size(); ++i) differ += !same_bits(got[i], x[i] * scale);
    return differ;
  };
  std::mt19937 rng(43);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> length(1, 5000), exponent(-40, 40);
  // Rows with a wide range of magnitudes round in double along the way (the lanes' sum then
  // differs from the chain's in its last bits).
  for (int row = 0; row < 3000; ++row) {
    std::vector<float> x(static_cast<std::size_t>(length(rng)));
    const bool wide = row % 2 == 0;
    for (float& v : x) v = normal(rng) * (wide ? std::ldexp(1.0f, exponent(rng)) : 1.0f);
    INFO("row " << row << ", " << x.size() << " elements");
    CHECK(differing(x) == 0);
  }
  // Sums whose mean is exactly halfway between two floats: {1, t} with t * t = 1 + k 2^-23 for
  // an odd k has the mean 1 + k 2^-24. The bounds straddle the boundary and the chain decides.
  int halfway = 0;
  for (float t = 1.0f; t < 1.4f && halfway < 8; t = std::nextafter(t, 2.0f)) {
    std::uint32_t square_bits = 0;
    const float square = t * t;
    std::memcpy(&square_bits, &square, sizeof square);
    if ((square_bits & 1U) == 0) continue;
    ++halfway;
    const std::vector<float> x{1.0f, t};
    INFO("t " << t);
    CHECK(differing(x) == 0);
  }
  CHECK(halfway == 8);
  // Rows whose chain and any lane-wise sum round apart: (4a)^2 + (2^-10)^2 = 16 (a^2 + 2^-24) is 16
  // times the midpoint above a^2 (in [1, 2), its last bit even: the chain's mean rounds to it),
  // and the fourteen (2^-25)^2 = 2^-50, each lost against 16 in the chain, add up in lanes to 3 x
  // 2^-48 (their mean rounds up, to a^2 + 2^-23). Taken where the two means give different scales.
  const auto scale_of = [](float mean) { return 1.0f / std::sqrt(mean + 1e-6f); };
  int apart = 0;
  for (int k = 2048; k < 2896 && apart < 4; ++k) {  // a = k / 2048: 12 bits, a^2 exact
    const float a = static_cast<float>(k) / 2048.0f, square = a * a;
    std::uint32_t bits = 0;
    std::memcpy(&bits, &square, sizeof square);
    if ((bits & 1U) != 0 || scale_of(square) == scale_of(std::nextafter(square, 2.0f))) continue;
    ++apart;
    std::vector<float> x(16, std::ldexp(1.0f, -25));
    x[0] = 4.0f * a;
    x[8] = std::ldexp(1.0f, -10);
    INFO("a " << a);
    CHECK(differing(x) == 0);
  }
  CHECK(apart == 4);
}

TEST_CASE("RMS norm of several rows gives each row the bits of the reference's double sum, in place too") {
  std::mt19937 rng(41);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t n = 1003;
  std::vector<float> w(static_cast<std::size_t>(n));
  for (auto& e : w) e = normal(rng);
  for (const std::int64_t rows : {1, 3, 4, 7, 9}) {
    std::vector<float> x(static_cast<std::size_t>(rows * n));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * (i % 97 == 0 ? 1e4f : 1.0f);
    for (const bool weighted : {false, true}) {
      std::vector<float> got(x.size()), in_place = x;
      cpu::rms_norm(x.data(), weighted ? w.data() : nullptr, got.data(), n, rows, 1e-5f);
      cpu::rms_norm(in_place.data(), weighted ? w.data() : nullptr, in_place.data(), n, rows, 1e-5f);
      std::size_t differ = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* xr = x.data() + r * n;
        double sum = 0.0;
        for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(xr[i] * xr[i]);
        const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + 1e-5f);
        for (std::int64_t i = 0; i < n; ++i) {
          float want = xr[i] * scale;
          if (weighted) want = want * w[static_cast<std::size_t>(i)];
          const auto at = static_cast<std::size_t>(r * n + i);
          differ += !same_bits(got[at], want) + !same_bits(in_place[at], want);
        }
      }
      INFO(rows << " rows, weighted " << weighted);
      CHECK(differ == 0);
    }
  }
}
