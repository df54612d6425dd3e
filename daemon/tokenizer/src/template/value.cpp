// Template values: construction, Python equality, dicts and JSON conversion.
#include <cassert>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "spite/tokenizer/template.hpp"

namespace spite::tokenizer {

value::value(std::string s) : kind_(kind::string), i_(0), ptr_(std::make_shared<std::string>(std::move(s))) {}

value::value(value_list items) : kind_(kind::list), i_(0), ptr_(std::make_shared<value_list>(std::move(items))) {}

value::value(value_dict items) : kind_(kind::dict), i_(0), ptr_(std::make_shared<value_dict>(std::move(items))) {}

value value::undefined(std::string hint, flavour f) {
  value v;
  v.flavour_ = f;
  if (!hint.empty()) v.ptr_ = std::make_shared<std::string>(std::move(hint));
  return v;
}

const std::string& value::undefined_hint() const noexcept {
  static const std::string empty;
  if (kind_ != kind::undefined || !ptr_) return empty;
  return *static_cast<const std::string*>(ptr_.get());
}

value value::from_object(std::shared_ptr<template_detail::object> o) {
  value v;
  v.kind_ = kind::object;
  v.ptr_ = std::move(o);
  return v;
}

template_detail::object* value::object() const noexcept {
  assert(kind_ == kind::object);
  return static_cast<template_detail::object*>(ptr_.get());
}

bool value::as_bool() const noexcept {
  assert(kind_ == kind::boolean);
  return b_;
}

std::int64_t value::as_int() const noexcept {
  assert(kind_ == kind::integer);
  return i_;
}

double value::as_float() const noexcept {
  assert(kind_ == kind::floating);
  return d_;
}

const std::string& value::as_string() const noexcept {
  assert(kind_ == kind::string);
  return *static_cast<const std::string*>(ptr_.get());
}

const value_list& value::as_list() const noexcept {
  assert(kind_ == kind::list);
  return *static_cast<const value_list*>(ptr_.get());
}

const value_dict& value::as_dict() const noexcept {
  assert(kind_ == kind::dict);
  return *static_cast<const value_dict*>(ptr_.get());
}

namespace {

bool is_numeric(const value& v) { return v.is_bool() || v.is_int() || v.is_float(); }

// Python compares int and float exactly.
bool numbers_equal(const value& a, const value& b) {
  const auto as_i = [](const value& v) { return v.is_bool() ? std::int64_t{v.as_bool()} : v.as_int(); };
  if (!a.is_float() && !b.is_float()) return as_i(a) == as_i(b);
  if (a.is_float() && b.is_float()) return a.as_float() == b.as_float();
  const double d = a.is_float() ? a.as_float() : b.as_float();
  const std::int64_t i = a.is_float() ? as_i(b) : as_i(a);
  if (!std::isfinite(d) || d != std::floor(d)) return false;
  if (d < -9.2233720368547758e18 || d >= 9.2233720368547758e18) return false;
  return static_cast<std::int64_t>(d) == i;
}

bool same_sequence_type(value::flavour a, value::flavour b) {
  const auto family = [](value::flavour f) { return f == value::flavour::markup ? value::flavour::plain : f; };
  return family(a) == family(b);
}

}  // namespace

bool operator==(const value& a, const value& b) {
  if (is_numeric(a) && is_numeric(b)) return numbers_equal(a, b);
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case value::kind::undefined:
    case value::kind::none: return true;
    case value::kind::string: return a.as_string() == b.as_string();
    case value::kind::list: {
      if (!same_sequence_type(a.flavor(), b.flavor())) return false;
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i)
        if (!(x[i] == y[i])) return false;
      return true;
    }
    case value::kind::dict: {
      const auto& x = a.as_dict();
      const auto& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x) {
        const value* other = y.find(k);
        if (!other || !(*other == v)) return false;
      }
      return true;
    }
    case value::kind::object: return a.identity() == b.identity();
    default: return false;
  }
}

namespace {
constexpr std::size_t k_index_from = 16;
}

const value* value_dict::find(std::string_view key) const {
  if (indexed_) {
    const auto it = index_.find(key);
    return it == index_.end() ? nullptr : &entries_[it->second].second;
  }
  for (const auto& e : entries_)
    if (e.first.is_string() && e.first.as_string() == key) return &e.second;
  return nullptr;
}

const value* value_dict::find(const value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& e : entries_)
    if (e.first == key) return &e.second;
  return nullptr;
}

void value_dict::set(value key, value v) {
  if (const value* existing = find(key)) {
    *const_cast<value*>(existing) = std::move(v);
    return;
  }
  entries_.emplace_back(std::move(key), std::move(v));
  if (indexed_) {
    const value& k = entries_.back().first;
    if (k.is_string()) index_.emplace(k.as_string(), entries_.size() - 1);
  } else if (entries_.size() >= k_index_from) {
    for (std::size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].first.is_string()) index_.emplace(entries_[i].first.as_string(), i);
    indexed_ = true;
  }
}

namespace {

constexpr int k_max_json_depth = 512;

value from_json_at(const nlohmann::ordered_json& j, int depth) {
  using t = nlohmann::ordered_json::value_t;
  if (depth > k_max_json_depth && (j.is_array() || j.is_object())) return value::none();
  switch (j.type()) {
    case t::null: return value::none();
    case t::boolean: return value(j.get<bool>());
    case t::number_integer: return value(j.get<std::int64_t>());
    case t::number_unsigned: {
      const auto u = j.get<std::uint64_t>();
      if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return value(static_cast<std::int64_t>(u));
      return value(static_cast<double>(u));
    }
    case t::number_float: return value(j.get<double>());
    case t::string: return value(j.get<std::string>());
    case t::array: {
      value_list items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_at(e, depth + 1));
      return value(std::move(items));
    }
    case t::object: {
      value_dict d;
      for (const auto& [k, v] : j.items()) d.set(value(k), from_json_at(v, depth + 1));
      return value(std::move(d));
    }
    case t::binary: {
      value_list items;
      for (auto b : j.get_binary()) items.emplace_back(static_cast<std::int64_t>(b));
      return value(std::move(items));
    }
    case t::discarded: break;
  }
  return value();
}

}  // namespace

value from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

}  // namespace spite::tokenizer
