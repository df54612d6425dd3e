#include "format.hpp"

#include <cstdio>
#include <cstring>

namespace spite::ctl {
namespace {

using gguf::array_value;
using gguf::value_type;

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string scalar_text(value_type t, std::optional<std::int64_t> i, std::optional<std::uint64_t> u,
                        std::optional<double> f) {
  switch (t) {
    case value_type::f32:
    case value_type::f64: return number_text(*f);
    case value_type::boolean: return *u ? "true" : "false";
    case value_type::i8: case value_type::i16: case value_type::i32: case value_type::i64:
      return std::to_string(*i);
    default: return std::to_string(*u);
  }
}

std::string array_text(const array_value& a, std::size_t max_items) {
  std::string out = "[";
  const std::size_t shown = std::min(a.size(), max_items);
  for (std::size_t k = 0; k < shown; ++k) {
    if (k > 0) out += ", ";
    if (a.element_type() == value_type::string) out += quoted(a.string_at(k));
    else if (a.element_type() == value_type::array) out += array_text(*a.array_at(k), max_items);
    else out += scalar_text(a.element_type(), a.int_at(k), a.uint_at(k), a.float_at(k));
  }
  if (shown < a.size()) out += ", ...";
  return out + "]";
}

nlohmann::json scalar_json(value_type t, std::optional<std::int64_t> i, std::optional<std::uint64_t> u,
                           std::optional<double> f) {
  switch (t) {
    case value_type::f32:
    case value_type::f64: return *f;
    case value_type::boolean: return *u != 0;
    case value_type::i8: case value_type::i16: case value_type::i32: case value_type::i64: return *i;
    default: return *u;
  }
}

nlohmann::json array_json(const array_value& a, std::size_t max_items) {
  nlohmann::json values = nlohmann::json::array();
  const std::size_t shown = std::min(a.size(), max_items);
  for (std::size_t k = 0; k < shown; ++k) {
    if (a.element_type() == value_type::string) values.push_back(std::string(a.string_at(k)));
    else if (a.element_type() == value_type::array) values.push_back(array_json(*a.array_at(k), max_items));
    else values.push_back(scalar_json(a.element_type(), a.int_at(k), a.uint_at(k), a.float_at(k)));
  }
  return {{"type", "array"},
          {"element_type", std::string(value_type_name(a.element_type()))},
          {"length", a.size()},
          {"values", std::move(values)},
          {"truncated", shown < a.size()}};
}

}  // namespace

std::string with_thousands(std::uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string human_count(std::uint64_t n) {
  static constexpr const char* units[] = {"", "K", "M", "B", "T"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1000.0 && u < 4) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
  else std::snprintf(buf, sizeof buf, "%.2f%s", v, units[u]);
  return buf;
}

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));  // UTF-8 passes through; terminals render it
    }
  }
  return out + "\"";
}

std::string value_text(const gguf::value& v, std::size_t max_items) {
  if (v.type() == value_type::string) return quoted(*v.as_string());
  if (v.type() == value_type::array) return array_text(*v.as_array(), max_items);
  return scalar_text(v.type(), v.as_int(), v.as_uint(), v.as_float());
}

nlohmann::json value_json(const gguf::value& v, std::size_t max_items) {
  if (v.type() == value_type::array) return array_json(*v.as_array(), max_items);
  nlohmann::json out = {{"type", std::string(value_type_name(v.type()))}};
  if (v.type() == value_type::string) out["value"] = std::string(*v.as_string());
  else out["value"] = scalar_json(v.type(), v.as_int(), v.as_uint(), v.as_float());
  return out;
}

}  // namespace spite::ctl
