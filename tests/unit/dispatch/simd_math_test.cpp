// The SIMD pieces of attention and SwiGLU (simd_math.hpp) against their scalar definitions, bit
// for bit: the exp of a chunk of keys with its sum, the f16 and f32 dot products, SwiGLU.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu_kernels.hpp"
#include "ref_math.hpp"
#include "ref_quant.hpp"
#include "simd_math.hpp"
#include "spite/core/half.hpp"

namespace {

namespace cpu = spite::dispatch::cpu;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The SIMD attention pieces of this processor, or null (with a warning: nothing to compare).
const cpu::simd_math* simd_math_or_warn() {
  const auto* simd = cpu::fast_math();
  if (simd == nullptr) WARN("no SIMD attention on this processor; nothing to compare");
  return simd;
}

}  // namespace

TEST_CASE("the SIMD exp of a 16-key chunk gives the reference exp's bits and their reduce16 sum, masked keys and extremes included") {
  const auto* simd = simd_math_or_warn();
  if (simd == nullptr) return;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-200.0f, 0.0f), narrow(-12.0f, 0.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (int round = 0; round < 2000; ++round) {
    float chunk[16], want[16];
    for (int l = 0; l < 16; ++l) chunk[l] = l % 5 == 0 ? wide(rng) : narrow(rng);
    if (round % 3 == 0) chunk[round % 16] = -inf;  // a masked key
    if (round % 7 == 0) chunk[(round + 3) % 16] = -87.5f - static_cast<float>(round % 11);  // subnormal results
    const float max = round % 2 == 0 ? 0.0f : 1.5f;
    for (int l = 0; l < 16; ++l) want[l] = cpu::ref_expf(chunk[l] - max);
    const float sum = simd->exp16(chunk, max);
    for (int l = 0; l < 16; ++l) {
      INFO("lane " << l << ": " << want[l] << " vs " << chunk[l]);
      REQUIRE(same_bits(want[l], chunk[l]));
    }
    REQUIRE(same_bits(sum, cpu::reduce16(want)));  // the results' sum, in reduce16's order
  }
}

TEST_CASE("the SIMD exp near its fast range's ends (subnormal, infinite) gives the reference's bits") {
  const auto* simd = simd_math_or_warn();
  if (simd == nullptr) return;
  std::mt19937 rng(11);
  // Whole chunks of exponents near -126 (results near and below the smallest normal) and near
  // 127 (results near the largest float and past it), and chunks that straddle the bounds.
  std::uniform_real_distribution<float> low(-87.6f, -86.4f), high(87.4f, 88.8f), straddle(-88.5f, 89.0f);
  for (int round = 0; round < 3000; ++round) {
    float chunk[16], want[16];
    const float max = round % 3 == 1 ? -80.0f : 0.0f;  // max < 0 turns some of them positive
    for (int l = 0; l < 16; ++l) {
      const float x = round % 3 == 0 ? low(rng) : round % 3 == 1 ? high(rng) : straddle(rng);
      chunk[l] = x + max;
    }
    for (int l = 0; l < 16; ++l) want[l] = cpu::ref_expf(chunk[l] - max);
    const float sum = simd->exp16(chunk, max);
    for (int l = 0; l < 16; ++l) {
      INFO("round " << round << ", lane " << l << ": " << want[l] << " vs " << chunk[l]);
      REQUIRE(same_bits(want[l], chunk[l]));
    }
    REQUIRE(same_bits(sum, cpu::reduce16(want)));
  }
}

TEST_CASE("the SIMD f16 dot product, widening and rounding give the reference's bits") {
  const auto* simd = simd_math_or_warn();
  if (simd == nullptr) return;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (const std::int64_t n : {16, 64, 80, 256, 1024}) {
    std::vector<float> a(static_cast<std::size_t>(n)), b(a.size()), round_trip(a.size());
    std::vector<std::uint16_t> h(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] = spite::fp16_to_fp32(spite::fp32_to_fp16(normal(rng)));
      b[i] = spite::fp16_to_fp32(spite::fp32_to_fp16(normal(rng) * 1e-3f));
      h[i] = spite::fp32_to_fp16(normal(rng) * (i % 9 == 0 ? 1e-6f : 1.0f));  // subnormal halves too
    }
    float lanes[16] = {};
    for (std::int64_t i = 0; i < n; ++i) lanes[i % 16] += a[static_cast<std::size_t>(i)] * b[static_cast<std::size_t>(i)];
    CHECK(same_bits(simd->dot16(a.data(), b.data(), n), cpu::reduce16(lanes)));
    // The same with the first operand as f16 (keys read from the cache), and the V.p lane update.
    std::vector<std::uint16_t> ah(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) ah[i] = spite::fp32_to_fp16(a[i]);
    CHECK(same_bits(simd->dot16_h(ah.data(), b.data(), n), cpu::reduce16(lanes)));
    std::vector<float> acc(b), acc_want(b);
    const float p = b[3] * 1e3f;
    simd->axpy_h(acc.data(), ah.data(), p, n - 5);  // a tail that is not a multiple of 8
    for (std::int64_t i = 0; i < n - 5; ++i) acc_want[static_cast<std::size_t>(i)] += p * a[static_cast<std::size_t>(i)];
    for (std::size_t i = 0; i < acc.size(); ++i) CHECK(same_bits(acc[i], acc_want[i]));

    std::vector<float> widened(a.size());
    simd->widen(h.data(), widened.data(), n - 3);  // a tail that is not a multiple of 8
    for (std::int64_t i = 0; i < n - 3; ++i) CHECK(same_bits(widened[static_cast<std::size_t>(i)], spite::fp16_to_fp32(h[static_cast<std::size_t>(i)])));

    std::vector<float> x(a.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * (i % 13 == 0 ? 1e-6f : (i % 17 == 0 ? 7e4f : 1.0f));
    simd->round_f16(x.data(), round_trip.data(), n - 5);
    for (std::int64_t i = 0; i < n - 5; ++i) {
      const float want = spite::fp16_to_fp32(spite::fp32_to_fp16(x[static_cast<std::size_t>(i)]));
      INFO(x[static_cast<std::size_t>(i)]);
      CHECK(same_bits(round_trip[static_cast<std::size_t>(i)], want));
    }
  }
}

TEST_CASE("the SIMD SwiGLU gives the reference's bits on vector lanes") {
  const auto* simd = cpu::fast_math();
  if (simd == nullptr) {
    WARN("no SIMD math on this processor; nothing to compare");
    return;
  }
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (int round = 0; round < 2000; ++round) {
    float g[16], u[16], h[16];
    for (int l = 0; l < 16; ++l) {
      g[l] = normal(rng) * (l == round % 16 ? 30.0f : 1.0f);  // large |x|: exp overflows or vanishes
      u[l] = normal(rng);
    }
    simd->swiglu16(g, u, h);
    for (int l = 0; l < 16; ++l) {
      INFO(g[l]);
      REQUIRE(same_bits(h[l], cpu::ref_silu(g[l], true) * u[l]));
    }
  }
  // A row's chunks in one call (the AVX-512 registers where the processor has them, and the
  // AVX2 ones), with the same bits.
  if (simd->swiglu_row != nullptr) {
    for (const bool avx512 : {true, false}) {
      cpu::set_avx512(avx512);
      INFO("AVX-512 " << (avx512 ? "allowed" : "off"));
      for (const std::int64_t n : {16, 64, 176}) {
        std::vector<float> g(static_cast<std::size_t>(n)), u(g.size()), h(g.size());
        for (std::size_t i = 0; i < g.size(); ++i) {
          g[i] = normal(rng) * (i % 13 == 0 ? 30.0f : 1.0f);
          u[i] = normal(rng);
        }
        simd->swiglu_row(g.data(), u.data(), h.data(), n);
        std::size_t differ = 0;
        for (std::size_t i = 0; i < g.size(); ++i) differ += !same_bits(h[i], cpu::ref_silu(g[i], true) * u[i]);
        CHECK(differ == 0);
      }
    }
    cpu::set_avx512(true);
  }
}
