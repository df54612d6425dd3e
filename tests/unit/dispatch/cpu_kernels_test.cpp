// The SIMD matmuls of the built-in CPU kernels against the portable reference implementations
// they replace. The reference ones are what the golden logits tests hold to the reference
// engine; the fast ones must give the very same bits, on shapes that hit every edge (row counts
// that are and are not multiples of 8, batches below, at and past the GEMM split of 4, several
// super-blocks, outliers in the activations).
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "ref_quant.hpp"
#include "spite/core/thread_pool.hpp"
#include "spite/gguf/types.hpp"

namespace {

using spite::gguf::tensor_type;
namespace cpu = spite::dispatch::cpu;

struct quantized_matrix {
  std::vector<std::byte> bytes;
  spite::dispatch::weight w;
};

quantized_matrix random_matrix(tensor_type type, std::int64_t in, std::int64_t out, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  quantized_matrix m;
  const auto row = *spite::gguf::row_bytes(type, in);
  m.bytes.resize(row * static_cast<std::size_t>(out));
  std::vector<float> values(static_cast<std::size_t>(in));
  for (std::int64_t r = 0; r < out; ++r) {
    // Rows of different magnitudes, so that block scales differ a lot.
    const float scale = 0.01f * static_cast<float>(1 + r % 7);
    for (float& v : values) v = scale * normal(rng);
    REQUIRE(spite::gguf::quantize(type, values.data(), m.bytes.data() + r * row, in));
  }
  m.w.data = m.bytes.data();
  m.w.type = type;
  m.w.in = in;
  m.w.out = out;
  m.w.row_bytes = row;
  return m;
}

std::vector<float> random_activations(std::int64_t in, std::int64_t n_tokens, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(in * n_tokens));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * (i % 97 == 0 ? 40.0f : 1.0f);
  return x;
}

cpu::matmul_fn fast_for(tensor_type type) {
  for (const auto& m : cpu::fast_matmuls()) {
    if (m.type == type) return m.fn;
  }
  return nullptr;
}

void check_bit_identical(tensor_type type, std::int64_t block) {
  const cpu::matmul_fn fast = fast_for(type);
  if (fast == nullptr) {
    WARN("no SIMD matmul for this type on this processor; nothing to compare");
    return;
  }
  const cpu::matmul_fn reference = cpu::find_reference_matmul(type);
  REQUIRE(reference != nullptr);
  REQUIRE(cpu::find_exact_matmul(type) == fast);
  std::mt19937 rng(1234);
  for (const int threads : {1, 3}) {
    spite::thread_pool pool(threads);
    for (const std::int64_t in : {block, 3 * block}) {
      for (const std::int64_t out : {8, 13, 24, 40}) {
        const quantized_matrix m = random_matrix(type, in, out, rng);
        for (const std::int64_t n_tokens : {1, 2, 3, 4, 5, 7, 9, 12}) {
          const std::vector<float> x = random_activations(in, n_tokens, rng);
          std::vector<float> want(static_cast<std::size_t>(out * n_tokens)), got(want.size(), -1.0f);
          reference(m.w, x.data(), n_tokens, want.data(), pool);
          fast(m.w, x.data(), n_tokens, got.data(), pool);
          INFO("in " << in << ", out " << out << ", tokens " << n_tokens << ", threads " << threads);
          std::size_t differing = 0;
          for (std::size_t i = 0; i < want.size(); ++i) differing += std::memcmp(&want[i], &got[i], sizeof(float)) != 0;
          CHECK(differing == 0);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("the SIMD Q8_0 matmul gives the reference's bits") { check_bit_identical(tensor_type::q8_0, 32); }
TEST_CASE("the SIMD Q4_0 matmul gives the reference's bits") { check_bit_identical(tensor_type::q4_0, 32); }
TEST_CASE("the SIMD Q4_K matmul gives the reference's bits") { check_bit_identical(tensor_type::q4_K, 256); }
TEST_CASE("the SIMD Q6_K matmul gives the reference's bits") { check_bit_identical(tensor_type::q6_K, 256); }

TEST_CASE("an x86-64 processor with AVX2 gets the SIMD matmuls") {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    CHECK(cpu::fast_matmuls().size() >= 4);
  } else {
    CHECK(cpu::fast_matmuls().empty());
  }
#else
  CHECK(cpu::fast_matmuls().empty());
#endif
}
