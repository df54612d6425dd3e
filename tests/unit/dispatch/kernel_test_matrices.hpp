// Random weight matrices of every type and activation rows for the kernel tests: the rows
// quantized by spite's own quantizer where the type has one, random blocks with sane scales where
// it does not.
#pragma once

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "cpu_kernels.hpp"
#include "ref_quant.hpp"
#include "spite/core/half.hpp"
#include "spite/dispatch/tensor.hpp"
#include "spite/gguf/blocks.hpp"
#include "spite/gguf/types.hpp"

namespace spite_test {

struct quantized_matrix {
  std::vector<std::byte> bytes;
  spite::dispatch::weight w;
};

inline quantized_matrix random_matrix(spite::gguf::tensor_type type, std::int64_t in, std::int64_t out, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  quantized_matrix m;
  const auto row = *spite::gguf::row_bytes(type, in);
  m.bytes.resize(row * static_cast<std::size_t>(out));
  std::vector<float> values(static_cast<std::size_t>(in));
  m.w.data = m.bytes.data();
  m.w.type = type;
  m.w.in = in;
  m.w.out = out;
  m.w.row_bytes = row;
  // Types without a quantizer here: random blocks (any index is valid) with sane scales.
  const auto random_blocks = [&]<class Block>(Block*) {
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : m.bytes) b = static_cast<std::byte>(byte(rng));
    auto* blocks = reinterpret_cast<Block*>(m.bytes.data());
    for (std::size_t i = 0; i < m.bytes.size() / sizeof(Block); ++i) {
      if constexpr (std::is_same_v<Block, spite::gguf::block_iq1_m>) {
        // The fp16 scale (now and then negative) in the top nibbles of the four 16-bit scale
        // words, nibble k in word k.
        const std::uint16_t d = spite::fp32_to_fp16((i % 5 == 3 ? -0.001f : 0.001f) * static_cast<float>(1 + i % 13));
        for (int k = 0; k < 4; ++k) {
          blocks[i].scales[2 * k + 1] = static_cast<std::uint8_t>((blocks[i].scales[2 * k + 1] & 0x0F) | (((d >> (4 * k)) & 0xF) << 4));
        }
      } else {
        blocks[i].d = spite::fp32_to_fp16(0.001f * static_cast<float>(1 + i % 13));
      }
    }
  };
  switch (type) {
    case spite::gguf::tensor_type::iq4_xs:
      random_blocks(static_cast<spite::gguf::block_iq4_xs*>(nullptr));
      return m;
    case spite::gguf::tensor_type::iq1_s:
      random_blocks(static_cast<spite::gguf::block_iq1_s*>(nullptr));
      return m;
    case spite::gguf::tensor_type::iq1_m:
      random_blocks(static_cast<spite::gguf::block_iq1_m*>(nullptr));
      return m;
    case spite::gguf::tensor_type::iq2_xxs:
      random_blocks(static_cast<spite::gguf::block_iq2_xxs*>(nullptr));
      return m;
    case spite::gguf::tensor_type::iq2_xs:
      random_blocks(static_cast<spite::gguf::block_iq2_xs*>(nullptr));
      return m;
    case spite::gguf::tensor_type::iq2_s:
      random_blocks(static_cast<spite::gguf::block_iq2_s*>(nullptr));
      return m;
    case spite::gguf::tensor_type::iq3_xxs:
      random_blocks(static_cast<spite::gguf::block_iq3_xxs*>(nullptr));
      return m;
    case spite::gguf::tensor_type::iq3_s:
      random_blocks(static_cast<spite::gguf::block_iq3_s*>(nullptr));
      return m;
    case spite::gguf::tensor_type::tq1_0:
      random_blocks(static_cast<spite::gguf::block_tq1_0*>(nullptr));
      return m;
    case spite::gguf::tensor_type::tq2_0:
      random_blocks(static_cast<spite::gguf::block_tq2_0*>(nullptr));
      return m;
    case spite::gguf::tensor_type::mxfp4: {
      // Any code is valid; exponents around 2^-8, with now and then the two subnormal ones.
      std::uniform_int_distribution<int> byte(0, 255);
      for (auto& b : m.bytes) b = static_cast<std::byte>(byte(rng));
      auto* blocks = reinterpret_cast<spite::gguf::block_mxfp4*>(m.bytes.data());
      for (std::size_t i = 0; i < m.bytes.size() / sizeof(spite::gguf::block_mxfp4); ++i) {
        blocks[i].e = static_cast<std::uint8_t>(i % 37 == 5 ? i % 2 : 116 + i % 11);
      }
      return m;
    }
    default:
      break;
  }
  for (std::int64_t r = 0; r < out; ++r) {
    // Rows of different magnitudes, so that block scales differ a lot.
    const float scale = 0.01f * static_cast<float>(1 + r % 7);
    for (float& v : values) v = scale * normal(rng);
    REQUIRE(spite::gguf::quantize(type, values.data(), m.bytes.data() + r * row, in));
  }
  return m;
}

inline std::vector<float> random_activations(std::int64_t in, std::int64_t n_tokens, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(in * n_tokens));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * (i % 97 == 0 ? 40.0f : 1.0f);
  return x;
}

inline spite::dispatch::cpu::matmul_fn fast_for(spite::gguf::tensor_type type) {
  for (const auto& m : spite::dispatch::cpu::fast_matmuls()) {
    if (m.type == type) return m.fn;
  }
  return nullptr;
}

}  // namespace spite_test
