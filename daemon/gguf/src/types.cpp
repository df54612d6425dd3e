#include "spite/gguf/types.hpp"

#include <array>
#include <cctype>
#include <string>

#include "quants/quants.hpp"
#include "spite/core/checked.hpp"
#include "spite/gguf/blocks.hpp"

namespace spite::gguf {
namespace {

namespace q = quants;
using tt = tensor_type;

constexpr type_traits k_types[] = {
    {tt::f32, "F32", 1, 4, false, q::dequantize_row_f32, q::quantize_row_f32},
    {tt::f16, "F16", 1, 2, false, q::dequantize_row_f16, q::quantize_row_f16},
    {tt::q4_0, "Q4_0", qk_legacy, sizeof(block_q4_0), true, q::dequantize_row_q4_0, q::quantize_row_q4_0},
    {tt::q4_1, "Q4_1", qk_legacy, sizeof(block_q4_1), true, q::dequantize_row_q4_1, q::quantize_row_q4_1},
    {tt::q5_0, "Q5_0", qk_legacy, sizeof(block_q5_0), true, q::dequantize_row_q5_0, q::quantize_row_q5_0},
    {tt::q5_1, "Q5_1", qk_legacy, sizeof(block_q5_1), true, q::dequantize_row_q5_1, q::quantize_row_q5_1},
    {tt::q8_0, "Q8_0", qk_legacy, sizeof(block_q8_0), true, q::dequantize_row_q8_0, q::quantize_row_q8_0},
    {tt::q8_1, "Q8_1", qk_legacy, sizeof(block_q8_1), true, q::dequantize_row_q8_1, q::quantize_row_q8_1},
    {tt::q2_K, "Q2_K", qk_k, sizeof(block_q2_K), true, q::dequantize_row_q2_K, q::quantize_row_q2_K},
    {tt::q3_K, "Q3_K", qk_k, sizeof(block_q3_K), true, q::dequantize_row_q3_K, q::quantize_row_q3_K},
    {tt::q4_K, "Q4_K", qk_k, sizeof(block_q4_K), true, q::dequantize_row_q4_K, q::quantize_row_q4_K},
    {tt::q5_K, "Q5_K", qk_k, sizeof(block_q5_K), true, q::dequantize_row_q5_K, q::quantize_row_q5_K},
    {tt::q6_K, "Q6_K", qk_k, sizeof(block_q6_K), true, q::dequantize_row_q6_K, q::quantize_row_q6_K},
    {tt::q8_K, "Q8_K", qk_k, sizeof(block_q8_K), true, q::dequantize_row_q8_K, q::quantize_row_q8_K},
    {tt::iq2_xxs, "IQ2_XXS", qk_k, sizeof(block_iq2_xxs), true, q::dequantize_row_iq2_xxs, nullptr},
    {tt::iq2_xs, "IQ2_XS", qk_k, sizeof(block_iq2_xs), true, q::dequantize_row_iq2_xs, nullptr},
    {tt::iq3_xxs, "IQ3_XXS", qk_k, sizeof(block_iq3_xxs), true, q::dequantize_row_iq3_xxs, nullptr},
    {tt::iq1_s, "IQ1_S", qk_k, sizeof(block_iq1_s), true, q::dequantize_row_iq1_s, nullptr},
    {tt::iq4_nl, "IQ4_NL", qk_legacy, sizeof(block_iq4_nl), true, q::dequantize_row_iq4_nl, q::quantize_row_iq4_nl},
    {tt::iq3_s, "IQ3_S", qk_k, sizeof(block_iq3_s), true, q::dequantize_row_iq3_s, nullptr},
    {tt::iq2_s, "IQ2_S", qk_k, sizeof(block_iq2_s), true, q::dequantize_row_iq2_s, nullptr},
    {tt::iq4_xs, "IQ4_XS", qk_k, sizeof(block_iq4_xs), true, q::dequantize_row_iq4_xs, q::quantize_row_iq4_xs},
    {tt::i8, "I8", 1, 1, false, q::dequantize_row_i8, nullptr},
    {tt::i16, "I16", 1, 2, false, q::dequantize_row_i16, nullptr},
    {tt::i32, "I32", 1, 4, false, q::dequantize_row_i32, nullptr},
    {tt::i64, "I64", 1, 8, false, q::dequantize_row_i64, nullptr},
    {tt::f64, "F64", 1, 8, false, q::dequantize_row_f64, nullptr},
    {tt::iq1_m, "IQ1_M", qk_k, sizeof(block_iq1_m), true, q::dequantize_row_iq1_m, nullptr},
    {tt::bf16, "BF16", 1, 2, false, q::dequantize_row_bf16, q::quantize_row_bf16},
    {tt::tq1_0, "TQ1_0", qk_k, sizeof(block_tq1_0), true, q::dequantize_row_tq1_0, nullptr},
    {tt::tq2_0, "TQ2_0", qk_k, sizeof(block_tq2_0), true, q::dequantize_row_tq2_0, nullptr},
    {tt::mxfp4, "MXFP4", qk_legacy, sizeof(block_mxfp4), true, q::dequantize_row_mxfp4, q::quantize_row_mxfp4},
};

constexpr std::uint32_t k_max_id = 40;

constexpr std::array<const type_traits*, k_max_id> build_index() {
  std::array<const type_traits*, k_max_id> index{};
  for (const auto& t : k_types) index[static_cast<std::uint32_t>(t.type)] = &t;
  return index;
}

constexpr auto k_index = build_index();

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) != std::toupper(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

const type_traits* find_type(std::uint32_t id) noexcept { return id < k_max_id ? k_index[id] : nullptr; }

const type_traits& traits(tensor_type type) noexcept { return *k_index[static_cast<std::uint32_t>(type)]; }

const type_traits* find_type_by_name(std::string_view name) noexcept {
  for (const auto& t : k_types) {
    if (iequals(t.name, name)) return &t;
  }
  return nullptr;
}

std::span<const type_traits> all_types() noexcept { return k_types; }

std::optional<std::uint64_t> row_bytes(tensor_type type, std::int64_t n) noexcept {
  const type_traits& t = traits(type);
  if (n < 0 || n % t.block_size != 0) return std::nullopt;
  return checked_mul(static_cast<std::uint64_t>(n / t.block_size), t.block_bytes);
}

result<void> dequantize(tensor_type type, const void* src, float* dst, std::int64_t n) {
  const type_traits& t = traits(type);
  if (n < 0 || n % t.block_size != 0) {
    return make_error(errc::invalid_argument, std::string(t.name) + ": " + std::to_string(n) +
                                                  " elements is not a multiple of the block size " +
                                                  std::to_string(t.block_size));
  }
  t.to_float(src, dst, n);
  return ok();
}

result<void> quantize(tensor_type type, const float* src, void* dst, std::int64_t n) {
  const type_traits& t = traits(type);
  if (t.from_float == nullptr) {
    return make_error(errc::unsupported, "no quantizer for " + std::string(t.name));
  }
  if (n < 0 || n % t.block_size != 0) {
    return make_error(errc::invalid_argument, std::string(t.name) + ": " + std::to_string(n) +
                                                  " elements is not a multiple of the block size " +
                                                  std::to_string(t.block_size));
  }
  t.from_float(src, dst, n);
  return ok();
}

}  // namespace spite::gguf
