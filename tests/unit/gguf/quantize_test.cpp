// Properties of the quantizers on synthetic data (the reference comparison is in tests/golden).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "random_data.hpp"
#include "spite/core/half.hpp"
#include "spite/gguf/blocks.hpp"
#include "spite/gguf/types.hpp"

using namespace spite::gguf;

namespace {

using spite::test::gaussian;

std::vector<float> round_trip(tensor_type type, const std::vector<float>& x) {
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<std::byte> q(*row_bytes(type, n));
  REQUIRE(quantize(type, x.data(), q.data(), n).ok());
  std::vector<float> y(x.size());
  REQUIRE(dequantize(type, q.data(), y.data(), n).ok());
  return y;
}

double relative_rms_error(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    e += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    s += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(e / s);
}

}  // namespace

TEST_CASE("quantize then dequantize stays within each type's expected error", "[gguf][quantize]") {
  struct bound {
    tensor_type type;
    double max_error;  // relative RMS on N(0,1) data; about 1/(2^bits) scaled by the block range
  };
  const bound bounds[] = {
      {tensor_type::f32, 0.0},    {tensor_type::f16, 1e-3},   {tensor_type::bf16, 4e-3},
      {tensor_type::q8_0, 0.01},  {tensor_type::q8_1, 0.01},  {tensor_type::q8_K, 0.01},
      {tensor_type::q6_K, 0.03},  {tensor_type::q5_0, 0.06},  {tensor_type::q5_1, 0.06},
      {tensor_type::q5_K, 0.05},  {tensor_type::q4_0, 0.12},  {tensor_type::q4_1, 0.12},
      {tensor_type::q4_K, 0.1},   {tensor_type::iq4_nl, 0.1}, {tensor_type::q3_K, 0.2},
      {tensor_type::q2_K, 0.4},
  };
  const auto x = gaussian(256 * 64, 3);
  for (const auto& b : bounds) {
    INFO(type_name(b.type));
    const double err = relative_rms_error(x, round_trip(b.type, x));
    CHECK(err <= b.max_error);
    if (b.type != tensor_type::f32) CHECK(err > 0.0);  // a lossy type that loses nothing is suspicious
  }
}

TEST_CASE("all-zero and constant blocks quantize without NaN", "[gguf][quantize]") {
  for (const auto& t : all_types()) {
    if (t.from_float == nullptr) continue;
    INFO(t.name);
    const std::vector<float> zeros(512, 0.0f);
    for (float v : round_trip(t.type, zeros)) REQUIRE(v == 0.0f);
    const std::vector<float> constant(512, 0.75f);
    for (float v : round_trip(t.type, constant)) REQUIRE(std::fabs(v - 0.75f) < 0.05f);
  }
}

TEST_CASE("Q8_K block sums and Q8_1 scaled sums are consistent with the quants", "[gguf][quantize]") {
  const auto x = gaussian(512, 9);
  std::vector<block_q8_K> k(2);
  REQUIRE(quantize(tensor_type::q8_K, x.data(), k.data(), 512).ok());
  for (const auto& b : k) {
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b.qs[g * 16 + j];
      CHECK(b.bsums[g] == sum);
    }
  }
  std::vector<block_q8_1> one(16);
  REQUIRE(quantize(tensor_type::q8_1, x.data(), one.data(), 512).ok());
  for (const auto& b : one) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += b.qs[j];
    const float d = spite::fp16_to_fp32(b.d);
    CHECK(std::fabs(spite::fp16_to_fp32(b.s) - static_cast<float>(sum) * d) <= 2e-3f * std::fabs(static_cast<float>(sum) * d) + 1e-4f);
  }
}
