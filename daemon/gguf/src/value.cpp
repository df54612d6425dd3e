#include "spite/gguf/value.hpp"

#include <cmath>
#include <limits>

namespace spite::gguf {
namespace {

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Decodes one scalar of type t at p into the three numeric views.
struct decoded {
  bool is_signed_int = false, is_unsigned_int = false, is_float = false;
  std::int64_t i = 0;
  std::uint64_t u = 0;
  double f = 0;
};

decoded decode(value_type t, const std::byte* p) {
  decoded d;
  switch (t) {
    case value_type::u8: d.u = load<std::uint8_t>(p); d.is_unsigned_int = true; break;
    case value_type::boolean: d.u = load<std::uint8_t>(p) != 0; d.is_unsigned_int = true; break;
    case value_type::u16: d.u = load<std::uint16_t>(p); d.is_unsigned_int = true; break;
    case value_type::u32: d.u = load<std::uint32_t>(p); d.is_unsigned_int = true; break;
    case value_type::u64: d.u = load<std::uint64_t>(p); d.is_unsigned_int = true; break;
    case value_type::i8: d.i = load<std::int8_t>(p); d.is_signed_int = true; break;
    case value_type::i16: d.i = load<std::int16_t>(p); d.is_signed_int = true; break;
    case value_type::i32: d.i = load<std::int32_t>(p); d.is_signed_int = true; break;
    case value_type::i64: d.i = load<std::int64_t>(p); d.is_signed_int = true; break;
    case value_type::f32: d.f = load<float>(p); d.is_float = true; break;
    case value_type::f64: d.f = load<double>(p); d.is_float = true; break;
    case value_type::string:
    case value_type::array: break;
  }
  return d;
}

std::optional<std::int64_t> to_int(const decoded& d) {
  if (d.is_signed_int) return d.i;
  if (d.is_unsigned_int) {
    if (d.u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(d.u);
  }
  return std::nullopt;
}

std::optional<std::uint64_t> to_uint(const decoded& d) {
  if (d.is_unsigned_int) return d.u;
  if (d.is_signed_int && d.i >= 0) return static_cast<std::uint64_t>(d.i);
  return std::nullopt;
}

std::optional<double> to_float(const decoded& d) {
  if (d.is_float) return d.f;
  if (d.is_signed_int) return static_cast<double>(d.i);
  if (d.is_unsigned_int) return static_cast<double>(d.u);
  return std::nullopt;
}

}  // namespace

std::string_view value_type_name(value_type t) noexcept {
  switch (t) {
    case value_type::u8: return "u8";
    case value_type::i8: return "i8";
    case value_type::u16: return "u16";
    case value_type::i16: return "i16";
    case value_type::u32: return "u32";
    case value_type::i32: return "i32";
    case value_type::f32: return "f32";
    case value_type::boolean: return "bool";
    case value_type::string: return "string";
    case value_type::array: return "array";
    case value_type::u64: return "u64";
    case value_type::i64: return "i64";
    case value_type::f64: return "f64";
  }
  return "?";
}

std::size_t scalar_size(value_type t) noexcept {
  switch (t) {
    case value_type::u8: case value_type::i8: case value_type::boolean: return 1;
    case value_type::u16: case value_type::i16: return 2;
    case value_type::u32: case value_type::i32: case value_type::f32: return 4;
    case value_type::u64: case value_type::i64: case value_type::f64: return 8;
    case value_type::string: case value_type::array: return 0;
  }
  return 0;
}

bool is_valid_value_type(std::uint32_t id) noexcept { return id <= 12; }

// ---- array_value

array_value::array_value(const array_value& o)
    : elem_(o.elem_), count_(o.count_), raw_(o.raw_), strings_(o.strings_), arrays_(o.arrays_),
      owned_raw_(o.owned_raw_), owned_strings_(o.owned_strings_) {
  rebind_owned();
}

array_value::array_value(array_value&& o) noexcept
    : elem_(o.elem_), count_(o.count_), raw_(o.raw_), strings_(std::move(o.strings_)), arrays_(std::move(o.arrays_)),
      owned_raw_(std::move(o.owned_raw_)), owned_strings_(std::move(o.owned_strings_)) {
  rebind_owned();  // moved std::strings may have moved their (small-string) bytes
}

array_value& array_value::operator=(const array_value& o) {
  if (this != &o) *this = array_value(o);
  return *this;
}

array_value& array_value::operator=(array_value&& o) noexcept {
  if (this != &o) {
    elem_ = o.elem_;
    count_ = o.count_;
    raw_ = o.raw_;
    strings_ = std::move(o.strings_);
    arrays_ = std::move(o.arrays_);
    owned_raw_ = std::move(o.owned_raw_);
    owned_strings_ = std::move(o.owned_strings_);
    rebind_owned();
  }
  return *this;
}

void array_value::rebind_owned() noexcept {
  if (!owned_raw_.empty()) raw_ = owned_raw_;
  if (!owned_strings_.empty()) {
    for (std::size_t i = 0; i < owned_strings_.size(); ++i) strings_[i] = owned_strings_[i];
  }
}

std::optional<std::int64_t> array_value::int_at(std::size_t i) const {
  const std::size_t s = scalar_size(elem_);
  if (s == 0 || i >= count_) return std::nullopt;
  return to_int(decode(elem_, raw_.data() + i * s));
}

std::optional<std::uint64_t> array_value::uint_at(std::size_t i) const {
  const std::size_t s = scalar_size(elem_);
  if (s == 0 || i >= count_) return std::nullopt;
  return to_uint(decode(elem_, raw_.data() + i * s));
}

std::optional<double> array_value::float_at(std::size_t i) const {
  const std::size_t s = scalar_size(elem_);
  if (s == 0 || i >= count_) return std::nullopt;
  return to_float(decode(elem_, raw_.data() + i * s));
}

std::string_view array_value::string_at(std::size_t i) const {
  return elem_ == value_type::string && i < strings_.size() ? strings_[i] : std::string_view{};
}

const array_value* array_value::array_at(std::size_t i) const {
  return elem_ == value_type::array && i < arrays_.size() ? &arrays_[i] : nullptr;
}

bool array_value::operator==(const array_value& o) const {
  if (elem_ != o.elem_ || count_ != o.count_) return false;
  if (elem_ == value_type::string) return strings_ == o.strings_;
  if (elem_ == value_type::array) return arrays_ == o.arrays_;
  return raw_.size() == o.raw_.size() && std::memcmp(raw_.data(), o.raw_.data(), raw_.size()) == 0;
}

// ---- value

value value::string(std::string s) {
  value v;
  v.type_ = value_type::string;
  v.owned_str_ = std::make_shared<std::string>(std::move(s));
  v.str_ = *v.owned_str_;
  return v;
}

value value::string_view_of(std::string_view s) {
  value v;
  v.type_ = value_type::string;
  v.str_ = s;
  return v;
}

value value::array_of_scalars(value_type elem, std::vector<std::byte> bytes) {
  auto a = std::make_shared<array_value>();
  a->elem_ = elem;
  const std::size_t s = scalar_size(elem);
  a->count_ = s == 0 ? 0 : bytes.size() / s;
  a->owned_raw_ = std::move(bytes);
  a->raw_ = a->owned_raw_;
  value v;
  v.type_ = value_type::array;
  v.array_ = std::move(a);
  return v;
}

value value::array_of_strings(std::vector<std::string> items) {
  auto a = std::make_shared<array_value>();
  a->elem_ = value_type::string;
  a->count_ = items.size();
  a->owned_strings_ = std::move(items);
  a->strings_.assign(a->owned_strings_.begin(), a->owned_strings_.end());
  value v;
  v.type_ = value_type::array;
  v.array_ = std::move(a);
  return v;
}

value value::array_of_arrays(std::vector<array_value> items) {
  auto a = std::make_shared<array_value>();
  a->elem_ = value_type::array;
  a->count_ = items.size();
  a->arrays_ = std::move(items);
  value v;
  v.type_ = value_type::array;
  v.array_ = std::move(a);
  return v;
}

value value::from_array(array_value a) {
  value v;
  v.type_ = value_type::array;
  v.array_ = std::make_shared<const array_value>(std::move(a));
  return v;
}

std::optional<std::int64_t> value::as_int() const { return to_int(decode(type_, scalar_)); }
std::optional<std::uint64_t> value::as_uint() const { return to_uint(decode(type_, scalar_)); }
std::optional<double> value::as_float() const { return to_float(decode(type_, scalar_)); }

std::optional<bool> value::as_bool() const {
  if (type_ == value_type::boolean) return std::to_integer<int>(scalar_[0]) != 0;
  return std::nullopt;
}

std::optional<std::string_view> value::as_string() const {
  if (type_ != value_type::string) return std::nullopt;
  return str_;
}

const array_value* value::as_array() const { return type_ == value_type::array ? array_.get() : nullptr; }

bool value::operator==(const value& o) const {
  if (type_ != o.type_) return false;
  if (type_ == value_type::string) return str_ == o.str_;
  if (type_ == value_type::array) return *array_ == *o.array_;
  return std::memcmp(scalar_, o.scalar_, scalar_size(type_)) == 0;
}

}  // namespace spite::gguf
