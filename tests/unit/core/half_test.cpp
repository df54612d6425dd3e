#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "spite/core/half.hpp"

using spite::bf16_to_fp32;
using spite::fp16_to_fp32;
using spite::fp32_to_bf16;
using spite::fp32_to_fp16;

// The compiler's own binary16 type is an independent oracle for both directions.
TEST_CASE("fp16 widening matches the compiler's binary16 for every bit pattern", "[core][half]") {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float ours = fp16_to_fp32(bits);
    const float ref = static_cast<float>(std::bit_cast<_Float16>(bits));
    if (std::isnan(ref)) {
      REQUIRE(std::isnan(ours));
    } else {
      REQUIRE(std::bit_cast<std::uint32_t>(ours) == std::bit_cast<std::uint32_t>(ref));
    }
  }
}

TEST_CASE("fp16 narrowing rounds to nearest even like the compiler", "[core][half]") {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  for (int i = 0; i < 2'000'000; ++i) {
    const float f = std::bit_cast<float>(any_bits(rng));
    const std::uint16_t ref = std::bit_cast<std::uint16_t>(static_cast<_Float16>(f));
    const std::uint16_t ours = fp32_to_fp16(f);
    if (std::isnan(f)) {
      REQUIRE((ours & 0x7c00) == 0x7c00);
      REQUIRE((ours & 0x3ff) != 0);
    } else {
      INFO("float bits " << std::bit_cast<std::uint32_t>(f));
      REQUIRE(ours == ref);
    }
  }
  // Ties: exactly halfway between two halves goes to the even one.
  CHECK(fp32_to_fp16(1.0f + 1.0f / 2048.0f) == 0x3c00);
  CHECK(fp32_to_fp16(1.0f + 3.0f / 2048.0f) == 0x3c02);
  CHECK(fp32_to_fp16(65520.0f) == 0x7c00);  // rounds past the largest finite half
  CHECK(fp32_to_fp16(65519.0f) == 0x7bff);
  CHECK(fp32_to_fp16(-0.0f) == 0x8000);
}

TEST_CASE("fp16 round trip is the identity on every finite half", "[core][half]") {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0) continue;  // NaN payloads may change
    REQUIRE(fp32_to_fp16(fp16_to_fp32(bits)) == bits);
  }
}

TEST_CASE("bf16 conversion rounds to nearest even and keeps NaN", "[core][half]") {
  CHECK(bf16_to_fp32(0x3f80) == 1.0f);
  CHECK(fp32_to_bf16(1.0f) == 0x3f80);
  CHECK(fp32_to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // tie -> even
  CHECK(fp32_to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // tie -> even
  CHECK(fp32_to_bf16(std::bit_cast<float>(0x3f808001u)) == 0x3f81);
  CHECK(std::isnan(bf16_to_fp32(fp32_to_bf16(std::nanf("")))));
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    if ((bits & 0x7f80) == 0x7f80 && (bits & 0x7f) != 0) continue;
    REQUIRE(fp32_to_bf16(bf16_to_fp32(bits)) == bits);
  }
}

TEST_CASE("a row of fp16 narrowings gives fp32_to_fp16's bits, NaNs, infinities and subnormals included", "[core][half]") {
  std::mt19937 rng(99);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  // Random bit patterns (every kind of float), values near the f16 range's edges, and lengths
  // off the 8-element chunks, so that both the vector and the scalar parts run.
  std::vector<float> x(1003);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint32_t bits = any_bits(rng);
    switch (i % 4) {
      case 0: x[i] = std::bit_cast<float>(bits); break;
      case 1: x[i] = std::ldexp(static_cast<float>(bits % 4096) / 4096.0f + 1.0f, static_cast<int>(bits % 40) - 26); break;
      case 2: x[i] = (bits & 1u) != 0 ? 65504.0f + static_cast<float>(bits % 64) : -6.1e-5f * static_cast<float>(bits % 3); break;
      default: x[i] = static_cast<float>(static_cast<std::int32_t>(bits)) * 1e-9f; break;
    }
  }
  x[17] = std::numeric_limits<float>::quiet_NaN();
  x[18] = -std::numeric_limits<float>::infinity();
  for (const std::size_t n : {std::size_t{0}, std::size_t{5}, std::size_t{8}, std::size_t{13}, x.size()}) {
    std::vector<std::uint16_t> row(n + 1, 0xABCD);
    spite::fp32_to_fp16_row(x.data(), row.data(), static_cast<std::int64_t>(n));
    std::size_t differ = 0;
    for (std::size_t i = 0; i < n; ++i) differ += row[i] != fp32_to_fp16(x[i]);
    INFO(n << " elements");
    CHECK(differ == 0);
    CHECK(row[n] == 0xABCD);  // nothing written past the row
  }
}
