// Chat templates: a Jinja2 interpreter for the chat templates models ship (GGUF key
// tokenizer.chat_template). It renders byte for byte what Python's jinja2 renders under the settings
// Hugging Face transformers uses for apply_chat_template:
//   ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True), loop controls, the
//   {% generation %} block, one trailing newline of the source dropped, Undefined (not strict),
//   tojson = json.dumps(ensure_ascii=False), globals raise_exception and strftime_now.
// Values follow Python semantics: str() of True/None is "True"/"None", lists and dicts print as
// Python repr, strings are sequences of code points, and what raises in Python fails here.
//
// Errors (spite::error):
//   compile: errc::malformed, "chat template line N: <what>".
//   render:  raise_exception(msg) gives errc::invalid_argument with exactly the template's msg;
//            everything else "chat template line N: <Python exception>: <what>" with
//            errc::malformed (UndefinedError, TypeError, SecurityError, ValueError, ...),
//            errc::unsupported (a filter or feature jinja2 has but spite does not) or
//            errc::out_of_range (a render limit was reached).
//
// Known differences from Python: integers are 64-bit (overflow is an error, not a bigint);
// Unicode character classes and case mapping cover the common scripts only; range() gives a
// list; printed generators and methods carry no address; lipsum, cycler, joiner and the HTML
// filters urlize, urlencode, wordwrap, xmlattr, striptags, filesizeformat, pprint and random
// fail as unsupported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "spite/core/result.hpp"

namespace spite::tokenizer {

namespace template_detail {
struct object;   // interpreter objects: macros, methods, namespaces, loops, generators
struct program;  // a compiled template
}  // namespace template_detail

class value;
class value_dict;
using value_list = std::vector<value>;

// A template value: what Python would hand to jinja2 (None, bool, int, float, str, list, dict)
// plus Jinja's undefined. Copies are cheap (strings, lists and dicts are shared, immutable).
class value {
 public:
  enum class kind : std::uint8_t { undefined, none, boolean, integer, floating, string, list, dict, object };

  value() noexcept : i_(0) {}  // undefined
  value(std::nullptr_t) noexcept : kind_(kind::none), i_(0) {}  // NOLINT: implicit by design
  value(bool b) noexcept : kind_(kind::boolean), b_(b) {}        // NOLINT
  // Any integer type (values beyond int64 wrap: Python ints are unbounded, template ints are not).
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool> && !std::is_same_v<I, char>, int> = 0>
  value(I i) noexcept : kind_(kind::integer), i_(static_cast<std::int64_t>(i)) {}  // NOLINT
  value(double d) noexcept : kind_(kind::floating), d_(d) {}     // NOLINT
  value(std::string s);                                          // NOLINT
  value(std::string_view s) : value(std::string(s)) {}           // NOLINT
  value(const char* s) : value(std::string(s)) {}                // NOLINT
  value(value_list items);                                       // NOLINT
  value(value_dict items);                                       // NOLINT
  static value none() noexcept { return value(nullptr); }

  kind type() const noexcept { return kind_; }
  bool is_undefined() const noexcept { return kind_ == kind::undefined; }
  bool is_none() const noexcept { return kind_ == kind::none; }
  bool is_bool() const noexcept { return kind_ == kind::boolean; }
  bool is_int() const noexcept { return kind_ == kind::integer; }
  bool is_float() const noexcept { return kind_ == kind::floating; }
  bool is_string() const noexcept { return kind_ == kind::string; }
  bool is_list() const noexcept { return kind_ == kind::list; }
  bool is_dict() const noexcept { return kind_ == kind::dict; }
  bool is_object() const noexcept { return kind_ == kind::object; }

  // Accessors for the matching kind only (checked by assert).
  bool as_bool() const noexcept;
  std::int64_t as_int() const noexcept;
  double as_float() const noexcept;
  const std::string& as_string() const noexcept;
  const value_list& as_list() const noexcept;
  const value_dict& as_dict() const noexcept;

  // Python ==: 1 == 1.0 == True, lists element-wise, dicts regardless of order; undefined equals
  // only undefined.
  friend bool operator==(const value& a, const value& b);

  // --- Interpreter internals (not needed by callers) ---
  // A Python type that shares a kind: tuples and dict views are lists, Markup is a string, an
  // undefined from a refused (unsafe) attribute raises SecurityError when called.
  enum class flavour : std::uint8_t { plain, tuple, dict_keys, dict_values, dict_items, markup, unsafe };
  flavour flavor() const noexcept { return flavour_; }
  value with_flavour(flavour f) const {
    value v = *this;
    v.flavour_ = f;
    return v;
  }
  static value undefined(std::string hint, flavour f = flavour::plain);
  // Why the value is undefined ("'x' is undefined"); empty when nothing is known.
  const std::string& undefined_hint() const noexcept;
  static value from_object(std::shared_ptr<template_detail::object> o);
  template_detail::object* object() const noexcept;
  // Identity of the shared storage (Python `is`), null for scalars.
  const void* identity() const noexcept { return ptr_.get(); }

 private:
  kind kind_ = kind::undefined;
  flavour flavour_ = flavour::plain;
  union {
    bool b_;
    std::int64_t i_;
    double d_;
  };
  std::shared_ptr<void> ptr_;  // std::string, value_list, value_dict or template_detail::object
};

// A Python dict: keys unique under Python equality, kept in insertion order. String keys are
// hashed once the dict is large.
class value_dict {
 public:
  using entry = std::pair<value, value>;

  std::size_t size() const noexcept { return entries_.size(); }
  bool empty() const noexcept { return entries_.empty(); }
  const value* find(const value& key) const;
  const value* find(std::string_view key) const;
  const value* find(const std::string& key) const { return find(std::string_view(key)); }
  const value* find(const char* key) const { return find(std::string_view(key)); }
  // Inserts at the end, or replaces the value in place when the key exists.
  void set(value key, value v);
  const std::vector<entry>& entries() const noexcept { return entries_; }
  std::vector<entry>::const_iterator begin() const noexcept { return entries_.begin(); }
  std::vector<entry>::const_iterator end() const noexcept { return entries_.end(); }

 private:
  std::vector<entry> entries_;
  std::unordered_map<std::string_view, std::size_t> index_;  // views into the shared key strings
  bool indexed_ = false;
};

// JSON to template values: null -> None, objects -> dicts in the document's key order (use
// ordered_json when parsing), integers that fit int64 -> int, other numbers -> float.
// Containers nested deeper than 512 levels become None (no chat template reads that deep, and
// the interpreter must not recurse without bound).
value from_json(const nlohmann::ordered_json& j);

struct render_options {
  // The clock strftime_now reads, as local broken-down time; unset: the current local time.
  std::optional<std::tm> now;
  // Limits: beyond them rendering fails with errc::out_of_range.
  std::size_t max_output_bytes = std::size_t{16} << 20;  // also bounds every string built
  std::uint64_t max_loop_iterations = 1'000'000;         // all loops of one render together
  int max_call_depth = 64;                               // nested macro calls
  int max_nesting = 1000;  // statements and expressions being evaluated at once (bounds stack use)
};

// A compiled chat template. Immutable after compile: render may run from many threads at once.
class chat_template {
 public:
  static result<chat_template> compile(std::string_view source);

  // `context` is a dict of the template variables (messages, tools, add_generation_prompt,
  // bos_token, ...); anything the template reads that is missing is undefined.
  result<std::string> render(const value& context, const render_options& options = {}) const;

 private:
  std::shared_ptr<const template_detail::program> program_;
};

}  // namespace spite::tokenizer
