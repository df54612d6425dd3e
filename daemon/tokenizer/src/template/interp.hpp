// The tree-walking interpreter: evaluation state of one render and the operations shared by the
// evaluator, filters, tests and methods. Python semantics throughout; errors are named after the
// Python exception jinja2 raises ("TypeError: ...").
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/tokenizer/template.hpp"
#include "template/ast.hpp"
#include "template/objects.hpp"

// Declares `decl` from a result, or returns its error: SPITE_TPL_LET(value v, eval(e, sc));
#define SPITE_TPL_CAT2(a, b) a##b
#define SPITE_TPL_CAT(a, b) SPITE_TPL_CAT2(a, b)
#define SPITE_TPL_LET(decl, expr)                                                                  \
  auto SPITE_TPL_CAT(spite_tpl_r_, __LINE__) = (expr);                                             \
  if (!SPITE_TPL_CAT(spite_tpl_r_, __LINE__)) return std::move(SPITE_TPL_CAT(spite_tpl_r_, __LINE__)).err(); \
  decl = std::move(*SPITE_TPL_CAT(spite_tpl_r_, __LINE__))

namespace spite::tokenizer::template_detail {

// ---- errors ----
inline error type_error(const std::string& m) { return make_error(errc::malformed, "TypeError: " + m); }
inline error value_error(const std::string& m) { return make_error(errc::malformed, "ValueError: " + m); }
inline error security_error(const std::string& m) { return make_error(errc::malformed, "SecurityError: " + m); }
inline error runtime_error(const std::string& m) {
  return make_error(errc::malformed, "TemplateRuntimeError: " + m);
}
inline error unsupported_error(const std::string& m) { return make_error(errc::unsupported, m); }
inline error limit_error(const std::string& m) { return make_error(errc::out_of_range, m); }
// raise_exception(msg): the template's message, unchanged.
inline error raised_error(const std::string& m) { return make_error(errc::invalid_argument, m); }
// Using an undefined value where jinja2's Undefined raises.
error undefined_error(const value& undefined);

// ---- values ----
bool truthy(const value& v);
inline bool is_markup(const value& v) { return v.is_string() && v.flavor() == value::flavour::markup; }
inline value markup(std::string s) { return value(std::move(s)).with_flavour(value::flavour::markup); }
inline value make_tuple(value_list items) { return value(std::move(items)).with_flavour(value::flavour::tuple); }
value make_generator(value_list items, std::string type_name = "generator");
// A generator filter's result; a failure is kept in the generator until it is consumed.
value lazy_generator(result<value> made);
// bool and int both count as Python ints.
inline bool is_integral(const value& v) { return v.is_int() || v.is_bool(); }
inline std::int64_t to_i64(const value& v) { return v.is_bool() ? std::int64_t{v.as_bool()} : v.as_int(); }
inline bool is_number(const value& v) { return is_integral(v) || v.is_float(); }
inline double to_f64(const value& v) { return v.is_float() ? v.as_float() : static_cast<double>(to_i64(v)); }
// jinja2's undefined for a missing attribute or item of `obj`.
value missing_attribute(const value& obj, std::string_view name);
value missing_item(const value& obj, const value& key);

// ---- calls ----
struct call_args {
  value_list pos;
  std::vector<std::pair<std::string, value>> kw;
};

// Binds arguments to parameters like a Python function of those parameters (all optional); the
// first `required` must be given.
result<std::vector<std::optional<value>>> bind_args(const call_args& args, std::string_view function,
                                                    std::initializer_list<std::string_view> params,
                                                    std::size_t required = 0);

// Something to iterate: the list stays alive as long as the holder.
struct seq {
  value holder;
  const value_list* items = nullptr;
  const value_list& operator*() const { return *items; }
  const value_list* operator->() const { return items; }
};

enum class flow : std::uint8_t { normal, break_, continue_ };

class interp {
 public:
  explicit interp(const render_options& options) : opts_(options) {}
  ~interp();
  interp(const interp&) = delete;
  interp& operator=(const interp&) = delete;

  result<std::string> render(const program& prog, const value& context);

  // Expressions (eval.cpp).
  result<value> eval(const expr& e, const scope_ptr& sc);
  result<call_args> eval_args(const call_spec& spec, const scope_ptr& sc);

  // Statements (exec.cpp).
  result<flow> exec(const stmt_list& body, const scope_ptr& sc);
  result<std::string> capture(const stmt_list& body, const scope_ptr& sc);
  result<value> call_macro(const macro_object& m, call_args args);

  // Operations (ops.cpp).
  result<value> getattr(const value& obj, const std::string& name);
  result<value> getitem(const value& obj, const value& key);
  result<value> call(const value& callee, call_args args);
  result<value> binary(binop op, const value& a, const value& b);
  result<bool> compare(cmpop op, const value& a, const value& b);
  result<bool> contains(const value& container, const value& item);
  result<seq> iterate(const value& v);
  result<std::size_t> length(const value& v);

  // Filters, tests, methods and globals (filters*.cpp, tests.cpp, methods.cpp, globals.cpp).
  result<value> filter(std::string_view name, const value& input, call_args args);
  result<bool> test(std::string_view name, const value& v, call_args args);

  // Objects that can close a reference cycle (macro closures, namespaces, recursive loops): the
  // interpreter empties them when the render ends, so shared_ptr cycles cannot leak.
  value track(std::shared_ptr<object> o);

  // Fails once a string being built would pass the output limit.
  result<void> check_size(std::size_t bytes) const;
  result<void> count_iterations(std::size_t n);
  const render_options& options() const { return opts_; }

 private:
  const render_options& opts_;
  std::string* out_ = nullptr;
  std::uint64_t iterations_ = 0;
  int depth_ = 0;
  int nesting_ = 0;       // eval and exec frames on the stack
  std::vector<std::weak_ptr<object>> tracked_;
  bool located_ = false;  // the error being returned already names its line

  struct nesting_guard {
    explicit nesting_guard(int& n) : n_(n) { ++n_; }
    ~nesting_guard() { --n_; }
    int& n_;
  };
  error too_deep() const;

  error locate(error e, int line);
  result<flow> exec_stmt(const stmt& s, const scope_ptr& sc);
  result<flow> exec_for(const stmt& s, const value& iterable, const scope_ptr& sc, std::size_t depth0);
  result<value> call_loop(const loop_object& loop, call_args args);
  result<void> assign(const target& t, value v, const scope_ptr& sc);
  result<void> emit(std::string_view text);
  result<value> eval_inner(const expr& e, const scope_ptr& sc);
  result<value> eval_compare(const expr& e, const scope_ptr& sc);
  result<value> eval_slice(const expr& getitem, const scope_ptr& sc);
};

// Python's `<` for ordering (sort, min, max, dictsort, comparisons).
result<bool> py_less(const value& a, const value& b);
// Python's a[start:stop:step] on lists, tuples and strings.
result<value> slice_value(const value& obj, std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
                          std::optional<std::int64_t> step);

// Tables (filters*.cpp, tests.cpp, methods.cpp, globals.cpp).
result<value> apply_filter(interp& in, std::string_view name, const value& input, call_args& args);
result<value> apply_seq_filter(interp& in, std::string_view name, const value& input, call_args& args);
bool is_seq_filter(std::string_view name);
// jinja2's attribute getter for filters: "a.b.0" looks up a, then b, then item 0; an undefined
// result becomes `fallback` when one is given.
result<value> attribute_path(interp& in, value item, const value& attribute, const std::optional<value>& fallback = {});
result<bool> apply_test(interp& in, std::string_view name, const value& v, call_args& args);
// The method `name` of `self` (bound) if its Python type has one; mutating methods give the
// sandbox's unsafe undefined. nullopt: no such method.
std::optional<value> find_method(const value& self, std::string_view name);
result<value> call_method(interp& in, const method_object& m, call_args& args);
result<value> call_str_method(interp& in, const value& self, std::string_view name, call_args& args);
std::optional<value> find_global(std::string_view name);
result<value> call_builtin(interp& in, builtin_id id, call_args& args);
// Python str.format and printf-style % formatting, and strftime.
result<std::string> str_format(interp& in, const std::string& fmt, const call_args& args);
result<std::string> percent_format(const std::string& fmt, const value& args);
std::string format_time(std::string_view fmt, const std::tm& t);

}  // namespace spite::tokenizer::template_detail
