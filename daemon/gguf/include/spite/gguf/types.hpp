// Tensor types of GGUF files: one traits table, indexed by the type id stored in the file.
// Code that handles tensors reads the table; it never switches over types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "spite/core/result.hpp"

namespace spite::gguf {

// Ids as in the GGUF specification (ggml_type). Append-only; gaps are ids retired upstream.
enum class tensor_type : std::uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
  q2_K = 10, q3_K = 11, q4_K = 12, q5_K = 13, q6_K = 14, q8_K = 15,
  iq2_xxs = 16, iq2_xs = 17, iq3_xxs = 18, iq1_s = 19, iq4_nl = 20, iq3_s = 21, iq2_s = 22,
  iq4_xs = 23, i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, iq1_m = 29, bf16 = 30,
  tq1_0 = 34, tq2_0 = 35, mxfp4 = 39,
};

using dequantize_row_fn = void (*)(const void* src, float* dst, std::int64_t n);
using quantize_row_fn = void (*)(const float* src, void* dst, std::int64_t n);

struct type_traits {
  tensor_type type;
  std::string_view name;     // as llama.cpp prints it: "Q4_K", "F16", ...
  std::int64_t block_size;   // elements per block (1 for plain types)
  std::size_t block_bytes;   // bytes per block
  bool quantized;
  dequantize_row_fn to_float;   // never null: every type has a reference dequantizer
  quantize_row_fn from_float;   // null where spite has no quantizer for the type
};

// nullptr for an id that no GGUF type uses.
const type_traits* find_type(std::uint32_t id) noexcept;
const type_traits& traits(tensor_type type) noexcept;
const type_traits* find_type_by_name(std::string_view name) noexcept;  // case-insensitive
std::span<const type_traits> all_types() noexcept;

inline std::string_view type_name(tensor_type t) noexcept { return traits(t).name; }

// Bytes of a row of `n` elements; nullopt when n is not a multiple of the block size or overflows.
std::optional<std::uint64_t> row_bytes(tensor_type type, std::int64_t n) noexcept;

// Whole-buffer conversions. Fail (with a message) when n does not fit the block size or the
// type has no quantizer; `src` / `dst` must hold row_bytes(type, n) bytes.
result<void> dequantize(tensor_type type, const void* src, float* dst, std::int64_t n);
result<void> quantize(tensor_type type, const float* src, void* dst, std::int64_t n);

}  // namespace spite::gguf
