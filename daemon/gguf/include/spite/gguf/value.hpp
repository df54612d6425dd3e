// GGUF metadata values. Values read from a file are views into its mapping (strings and scalar
// arrays are not copied: a 150k-token vocabulary loads without 150k allocations); values built
// in memory (for the writer) own their storage. Both kinds behave the same to callers.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace spite::gguf {

// Ids as stored in the file (GGUF specification).
enum class value_type : std::uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

std::string_view value_type_name(value_type t) noexcept;
// Bytes of a fixed-size scalar type; 0 for string and array.
std::size_t scalar_size(value_type t) noexcept;
bool is_valid_value_type(std::uint32_t id) noexcept;

class value;
class file_parser;

// The elements of an array value.
class array_value {
 public:
  array_value() = default;
  // Copies and moves re-point the views at the new object's own storage.
  array_value(const array_value& other);
  array_value(array_value&& other) noexcept;
  array_value& operator=(const array_value& other);
  array_value& operator=(array_value&& other) noexcept;
  ~array_value() = default;

  value_type element_type() const noexcept { return elem_; }
  std::size_t size() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }

  // Scalar elements (element_type() is a fixed-size type), converted like value::as_*.
  std::optional<std::int64_t> int_at(std::size_t i) const;
  std::optional<std::uint64_t> uint_at(std::size_t i) const;
  std::optional<double> float_at(std::size_t i) const;
  // String elements; empty view when element_type() is not string.
  std::string_view string_at(std::size_t i) const;
  // Nested array elements; nullptr when element_type() is not array.
  const array_value* array_at(std::size_t i) const;
  // Little-endian bytes of all scalar elements (empty for strings and arrays).
  std::span<const std::byte> raw() const noexcept { return raw_; }

  // Copies every element as T (numeric arrays only); nullopt on a non-numeric array.
  template <class T>
  std::optional<std::vector<T>> to_vector() const;

  bool operator==(const array_value& other) const;

 private:
  friend class value;
  friend class file_parser;
  value_type elem_ = value_type::u8;
  std::size_t count_ = 0;
  std::span<const std::byte> raw_;       // scalars
  std::vector<std::string_view> strings_;
  std::vector<array_value> arrays_;
  // Storage for values built in memory.
  std::vector<std::byte> owned_raw_;
  std::vector<std::string> owned_strings_;
  void rebind_owned() noexcept;
};

class value {
 public:
  value() = default;  // u8 zero; only as a placeholder
  static value u8(std::uint8_t v) { return scalar(value_type::u8, v); }
  static value i8(std::int8_t v) { return scalar(value_type::i8, v); }
  static value u16(std::uint16_t v) { return scalar(value_type::u16, v); }
  static value i16(std::int16_t v) { return scalar(value_type::i16, v); }
  static value u32(std::uint32_t v) { return scalar(value_type::u32, v); }
  static value i32(std::int32_t v) { return scalar(value_type::i32, v); }
  static value u64(std::uint64_t v) { return scalar(value_type::u64, v); }
  static value i64(std::int64_t v) { return scalar(value_type::i64, v); }
  static value f32(float v) { return scalar(value_type::f32, v); }
  static value f64(double v) { return scalar(value_type::f64, v); }
  static value boolean(bool v) { return scalar(value_type::boolean, static_cast<std::uint8_t>(v)); }
  static value string(std::string s);
  static value string_view_of(std::string_view s);  // a view: the caller keeps `s` alive
  // Scalar arrays from little-endian element bytes; element type must be a fixed-size type.
  static value array_of_scalars(value_type elem, std::vector<std::byte> bytes);
  template <class T>
  static value array_of(value_type elem, std::span<const T> items);
  static value array_of_strings(std::vector<std::string> items);
  static value array_of_arrays(std::vector<array_value> items);
  static value from_array(array_value a);

  value_type type() const noexcept { return type_; }

  // Numeric scalars converted to the asked kind; nullopt if not numeric or not representable
  // (a negative value as unsigned). Booleans count as 0/1.
  std::optional<std::int64_t> as_int() const;
  std::optional<std::uint64_t> as_uint() const;
  std::optional<double> as_float() const;
  std::optional<bool> as_bool() const;
  std::optional<std::string_view> as_string() const;
  const array_value* as_array() const;

  // The stored scalar bits (for printing exact values).
  std::span<const std::byte> scalar_bytes() const noexcept { return {scalar_, scalar_size(type_)}; }

  bool operator==(const value& other) const;

 private:
  friend class file_parser;
  template <class T>
  static value scalar(value_type t, T v) {
    value out;
    out.type_ = t;
    std::memcpy(out.scalar_, &v, sizeof(T));
    return out;
  }
  value_type type_ = value_type::u8;
  std::byte scalar_[8]{};
  std::string_view str_;
  std::shared_ptr<std::string> owned_str_;
  std::shared_ptr<const array_value> array_;
};

template <class T>
value value::array_of(value_type elem, std::span<const T> items) {
  std::vector<std::byte> bytes(items.size_bytes());
  if (!bytes.empty()) std::memcpy(bytes.data(), items.data(), bytes.size());
  return array_of_scalars(elem, std::move(bytes));
}

template <class T>
std::optional<std::vector<T>> array_value::to_vector() const {
  if (scalar_size(elem_) == 0) return std::nullopt;
  std::vector<T> out;
  out.reserve(count_);
  for (std::size_t i = 0; i < count_; ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      out.push_back(static_cast<T>(*float_at(i)));
    } else if constexpr (std::is_signed_v<T>) {
      const auto v = int_at(i);
      if (!v) return std::nullopt;
      out.push_back(static_cast<T>(*v));
    } else {
      const auto v = uint_at(i);
      if (!v) return std::nullopt;
      out.push_back(static_cast<T>(*v));
    }
  }
  return out;
}

}  // namespace spite::gguf
