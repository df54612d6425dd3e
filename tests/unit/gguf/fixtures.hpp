// Small GGUF images built with spite's writer, for tests that need a known, valid file.
#pragma once

#include <cstring>
#include <stdexcept>
#include <vector>

#include "spite/gguf/writer.hpp"

namespace spite::test {

// Every metadata value type (nested arrays and string arrays included) and three tensors of
// different types, with data that depends on the element index.
inline gguf::writer sample_writer() {
  using gguf::value;
  using gguf::value_type;
  gguf::writer w;
  w.set("general.architecture", value::string("llama"));
  w.set("general.name", value::string("sample"));
  w.set("test.u8", value::u8(200));
  w.set("test.i8", value::i8(-100));
  w.set("test.u16", value::u16(60000));
  w.set("test.i16", value::i16(-30000));
  w.set("test.u32", value::u32(4000000000u));
  w.set("test.i32", value::i32(-2000000000));
  w.set("test.u64", value::u64(18000000000000000000ull));
  w.set("test.i64", value::i64(-9000000000000000000ll));
  w.set("test.f32", value::f32(3.25f));
  w.set("test.f64", value::f64(-1.0e300));
  w.set("test.bool", value::boolean(true));
  const std::int32_t ints[] = {1, -2, 3};
  w.set("test.array_i32", value::array_of<std::int32_t>(value_type::i32, ints));
  w.set("tokenizer.ggml.tokens", value::array_of_strings({"<unk>", "<s>", "</s>", "hello", "", "w\xc3\xb6rld"}));
  const float floats[] = {0.5f, -0.25f};
  std::vector<gguf::array_value> nested;
  nested.push_back(*value::array_of<float>(value_type::f32, floats).as_array());
  nested.push_back(*value::array_of_strings({"a", "bc"}).as_array());
  nested.push_back(*value::array_of_strings({}).as_array());
  w.set("test.nested", value::array_of_arrays(std::move(nested)));

  std::vector<float> f32(64 * 3);
  for (std::size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<float>(i) * 0.5f - 7.0f;
  std::vector<std::byte> f32_bytes(f32.size() * 4);
  std::memcpy(f32_bytes.data(), f32.data(), f32_bytes.size());
  const std::int64_t shape_f32[] = {64, 3};
  if (!w.add_tensor("blk.0.attn_q.weight", gguf::tensor_type::f32, shape_f32, std::move(f32_bytes)).ok()) throw std::logic_error("fixture tensor rejected");

  std::vector<std::byte> q8(2 * 34);
  if (!gguf::quantize(gguf::tensor_type::q8_0, f32.data(), q8.data(), 64).ok()) throw std::logic_error("fixture quantize failed");
  const std::int64_t shape_q8[] = {64};
  if (!w.add_tensor("blk.0.ffn_up.weight", gguf::tensor_type::q8_0, shape_q8, std::move(q8)).ok()) throw std::logic_error("fixture tensor rejected");

  std::vector<std::byte> i32(4 * 5);
  for (std::size_t i = 0; i < i32.size(); ++i) i32[i] = static_cast<std::byte>(i);
  const std::int64_t shape_i32[] = {5};
  if (!w.add_tensor("token_types", gguf::tensor_type::i32, shape_i32, std::move(i32)).ok()) throw std::logic_error("fixture tensor rejected");
  return w;
}

inline std::vector<std::byte> sample_bytes() { return sample_writer().to_bytes(); }

}  // namespace spite::test
