// `is` tests, as jinja2 defines them.
#include <algorithm>
#include <array>

#include "template/format.hpp"
#include "template/interp.hpp"
#include "template/parser.hpp"
#include "template/text.hpp"

namespace spite::tokenizer::template_detail {
namespace {

using test_fn = result<bool> (*)(interp&, const value&, call_args&);

result<value> one_arg(call_args& args, std::string_view name) {
  SPITE_TPL_LET(auto a, bind_args(args, name, {"other"}, 1));
  return std::move(*a[0]);
}

result<bool> no_args(call_args& args, std::string_view name) {
  SPITE_TPL_LET(auto a, bind_args(args, name, {}));
  (void)a;
  return true;
}

result<bool> test_defined(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(bool ok, no_args(args, "defined"));
  (void)ok;
  return !v.is_undefined();
}
result<bool> test_undefined(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(bool ok, no_args(args, "undefined"));
  (void)ok;
  return v.is_undefined();
}

template <bool (*Pred)(const value&)>
result<bool> simple(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(bool ok, no_args(args, "test"));
  (void)ok;
  return Pred(v);
}

bool is_none(const value& v) { return v.is_none(); }
bool is_boolean(const value& v) { return v.is_bool(); }
bool is_false(const value& v) { return v.is_bool() && !v.as_bool(); }
bool is_true(const value& v) { return v.is_bool() && v.as_bool(); }
bool is_integer(const value& v) { return v.is_int(); }
bool is_float(const value& v) { return v.is_float(); }
bool is_string(const value& v) { return v.is_string(); }
bool is_mapping(const value& v) { return v.is_dict(); }
bool is_num(const value& v) { return is_number(v); }
bool is_escaped(const value& v) { return is_markup(v); }
bool is_sequence(const value& v) {
  return v.is_string() || v.is_dict() || v.is_undefined() ||
         (v.is_list() && (v.flavor() == value::flavour::plain || v.flavor() == value::flavour::tuple));
}
bool is_iterable(const value& v) {
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined() || is_object(v, object_kind::generator) ||
         is_object(v, object_kind::loop);
}
bool is_callable(const value& v) {
  return v.is_undefined() || is_object(v, object_kind::macro) || is_object(v, object_kind::builtin) ||
         is_object(v, object_kind::method) || is_object(v, object_kind::loop);
}
bool is_lower(const value& v) {
  bool cased = false;
  for (char32_t c : decode_utf8(py_str(v))) {
    if (py_isupper_char(c)) return false;
    cased = cased || py_islower_char(c);
  }
  return cased;
}
bool is_upper(const value& v) {
  bool cased = false;
  for (char32_t c : decode_utf8(py_str(v))) {
    if (py_islower_char(c)) return false;
    cased = cased || py_isupper_char(c);
  }
  return cased;
}

result<bool> modulo_is(interp& in, const value& v, const value& divisor, std::int64_t want) {
  SPITE_TPL_LET(value r, in.binary(binop::mod, v, divisor));
  return r == value(want);
}

result<bool> test_odd(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(bool ok, no_args(args, "odd"));
  (void)ok;
  return modulo_is(in, v, value(2), 1);
}
result<bool> test_even(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(bool ok, no_args(args, "even"));
  (void)ok;
  return modulo_is(in, v, value(2), 0);
}
result<bool> test_divisibleby(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "divisibleby", {"num"}, 1));
  return modulo_is(in, v, *a[0], 0);
}

result<bool> test_sameas(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(value other, one_arg(args, "sameas"));
  if (v.type() != other.type()) return false;
  switch (v.type()) {
    case value::kind::none:
    case value::kind::undefined: return v.identity() == other.identity();
    case value::kind::boolean: return v.as_bool() == other.as_bool();
    case value::kind::integer:  // CPython caches small ints
      return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case value::kind::floating: return false;
    default: return v.identity() == other.identity();
  }
}

result<bool> test_in(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(value other, one_arg(args, "in"));
  return in.contains(other, v);
}

template <cmpop Op>
result<bool> compare_test(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(value other, one_arg(args, "compare"));
  return in.compare(Op, v, other);
}

result<bool> test_filter(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(bool ok, no_args(args, "filter"));
  (void)ok;
  return v.is_string() && is_known_filter(v.as_string());
}
result<bool> test_test(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(bool ok, no_args(args, "test"));
  (void)ok;
  return v.is_string() && is_known_test(v.as_string());
}

struct test_entry {
  std::string_view name;
  test_fn fn;
};

constexpr test_entry k_tests[] = {
    {"!=", compare_test<cmpop::ne>},
    {"<", compare_test<cmpop::lt>},
    {"<=", compare_test<cmpop::le>},
    {"==", compare_test<cmpop::eq>},
    {">", compare_test<cmpop::gt>},
    {">=", compare_test<cmpop::ge>},
    {"boolean", simple<is_boolean>},
    {"callable", simple<is_callable>},
    {"defined", test_defined},
    {"divisibleby", test_divisibleby},
    {"eq", compare_test<cmpop::eq>},
    {"equalto", compare_test<cmpop::eq>},
    {"escaped", simple<is_escaped>},
    {"even", test_even},
    {"false", simple<is_false>},
    {"filter", test_filter},
    {"float", simple<is_float>},
    {"ge", compare_test<cmpop::ge>},
    {"greaterthan", compare_test<cmpop::gt>},
    {"gt", compare_test<cmpop::gt>},
    {"in", test_in},
    {"integer", simple<is_integer>},
    {"iterable", simple<is_iterable>},
    {"le", compare_test<cmpop::le>},
    {"lessthan", compare_test<cmpop::lt>},
    {"lower", simple<is_lower>},
    {"lt", compare_test<cmpop::lt>},
    {"mapping", simple<is_mapping>},
    {"ne", compare_test<cmpop::ne>},
    {"none", simple<is_none>},
    {"number", simple<is_num>},
    {"odd", test_odd},
    {"sameas", test_sameas},
    {"sequence", simple<is_sequence>},
    {"string", simple<is_string>},
    {"test", test_test},
    {"true", simple<is_true>},
    {"undefined", test_undefined},
    {"upper", simple<is_upper>},
};

const test_entry* find_test(std::string_view name) {
  for (const auto& e : k_tests)
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace

bool is_known_test(std::string_view name) { return find_test(name) != nullptr; }

result<bool> apply_test(interp& in, std::string_view name, const value& v, call_args& args) {
  const test_entry* t = find_test(name);
  if (!t) return runtime_error("No test named '" + std::string(name) + "' found.");
  return t->fn(in, v, args);
}

}  // namespace spite::tokenizer::template_detail
