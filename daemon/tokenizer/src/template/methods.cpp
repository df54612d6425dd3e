// Methods of Python's str, dict, list and tuple as templates call them, under jinja2's immutable
// sandbox: methods that would modify a list or dict are refused (SecurityError when called).
#include <algorithm>
#include <array>

#include "template/format.hpp"
#include "template/interp.hpp"
#include "template/text.hpp"

namespace spite::tokenizer::template_detail {
namespace {

constexpr std::array<std::string_view, 47> k_str_methods = {
    "capitalize", "casefold",   "center",     "count",       "encode",       "endswith",  "expandtabs",
    "find",       "format",     "format_map", "index",       "isalnum",      "isalpha",   "isascii",
    "isdecimal",  "isdigit",    "isidentifier", "islower",   "isnumeric",    "isprintable", "isspace",
    "istitle",    "isupper",    "join",       "ljust",       "lower",        "lstrip",    "maketrans",
    "partition",  "removeprefix", "removesuffix", "replace", "rfind",        "rindex",    "rjust",
    "rpartition", "rsplit",     "rstrip",     "split",       "splitlines",   "startswith", "strip",
    "swapcase",   "title",      "translate",  "upper",       "zfill",
};
constexpr std::array<std::string_view, 6> k_dict_methods = {"get", "items", "keys", "values", "copy", "fromkeys"};
constexpr std::array<std::string_view, 5> k_dict_mutators = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::array<std::string_view, 3> k_list_methods = {"count", "index", "copy"};
constexpr std::array<std::string_view, 8> k_list_mutators = {"append", "clear", "extend", "insert",
                                                             "pop",    "remove", "reverse", "sort"};

template <std::size_t N>
bool listed(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

value bound(const value& self, std::string_view name) {
  return value::from_object(std::make_shared<method_object>(self, std::string(name)));
}

value unsafe(const value& self, std::string_view name) {
  return value::undefined("access to attribute '" + std::string(name) + "' of '" + type_name(self) +
                              "' object is unsafe.",
                          value::flavour::unsafe);
}

}  // namespace

std::optional<value> find_method(const value& self, std::string_view name) {
  if (self.is_string()) {
    if (listed(k_str_methods, name)) return bound(self, name);
  } else if (self.is_dict()) {
    if (listed(k_dict_methods, name)) return bound(self, name);
    if (listed(k_dict_mutators, name)) return unsafe(self, name);
  } else if (self.is_list() && self.flavor() == value::flavour::plain) {
    if (listed(k_list_methods, name)) return bound(self, name);
    if (listed(k_list_mutators, name)) return unsafe(self, name);
  } else if (self.is_list() && self.flavor() == value::flavour::tuple) {
    if (name == "count" || name == "index") return bound(self, name);
  }
  return std::nullopt;
}

namespace {

result<value> dict_method(interp& in, const value& self, std::string_view name, call_args& args) {
  const value_dict& d = self.as_dict();
  if (name == "get") {
    SPITE_TPL_LET(auto a, bind_args(args, "get", {"key", "default"}, 1));
    if ((a[0]->is_list() && a[0]->flavor() != value::flavour::tuple) || a[0]->is_dict())
      return type_error("unhashable type: '" + type_name(*a[0]) + "'");
    if (const value* v = d.find(*a[0])) return *v;
    return a[1] ? *a[1] : value::none();
  }
  SPITE_TPL_LET(auto a, bind_args(args, name, {}));
  (void)a;
  (void)in;
  if (name == "copy") return self;
  value_list out;
  out.reserve(d.size());
  for (const auto& [k, v] : d) {
    if (name == "keys") out.push_back(k);
    if (name == "values") out.push_back(v);
    if (name == "items") out.push_back(make_tuple({k, v}));
  }
  const auto f = name == "keys" ? value::flavour::dict_keys
                 : name == "values" ? value::flavour::dict_values
                                    : value::flavour::dict_items;
  if (name == "keys" || name == "values" || name == "items") return value(std::move(out)).with_flavour(f);
  return unsupported_error("dict." + std::string(name) + "() is not supported in templates");
}

result<value> list_method(interp& in, const value& self, std::string_view name, call_args& args) {
  const value_list& items = self.as_list();
  if (name == "copy") {
    SPITE_TPL_LET(auto a, bind_args(args, "copy", {}));
    (void)a;
    return self;
  }
  if (name == "count") {
    SPITE_TPL_LET(auto a, bind_args(args, "count", {"value"}, 1));
    return value(static_cast<std::int64_t>(std::count(items.begin(), items.end(), *a[0])));
  }
  // index(value, start, stop)
  SPITE_TPL_LET(auto a, bind_args(args, "index", {"value", "start", "stop"}, 1));
  const auto n = static_cast<std::int64_t>(items.size());
  std::int64_t lo = 0, hi = n;
  for (int k = 1; k <= 2; ++k) {
    if (!a[k]) continue;
    if (!is_integral(*a[k])) return type_error("slice indices must be integers");
    std::int64_t v = to_i64(*a[k]);
    if (v < 0) v = std::max<std::int64_t>(0, v + n);
    (k == 1 ? lo : hi) = std::min(v, n);
  }
  for (std::int64_t i = lo; i < hi; ++i)
    if (items[static_cast<std::size_t>(i)] == *a[0]) return value(i);
  (void)in;
  return value_error(py_repr(*a[0]) + " is not in " + type_name(self));
}

result<value> loop_method(interp& in, const value& self, std::string_view name, call_args& args) {
  auto& l = as<loop_object>(self);
  if (!args.kw.empty()) return type_error("loop." + std::string(name) + "() takes no keyword arguments");
  if (name == "cycle") {
    if (args.pos.empty()) return type_error("no items for cycling given");
    return args.pos[l.index0 % args.pos.size()];
  }
  // changed(*values): whether the values differ from the previous call's.
  value current = args.pos.size() == 1 ? args.pos[0] : value(args.pos);
  const bool changed = !l.has_last_changed || !(l.last_changed == current);
  l.has_last_changed = true;
  l.last_changed = std::move(current);
  (void)in;
  return value(changed);
}

}  // namespace

result<value> call_method(interp& in, const method_object& m, call_args& args) {
  const value& self = m.self;
  if (self.is_string()) return call_str_method(in, self, m.name, args);
  if (self.is_dict()) return dict_method(in, self, m.name, args);
  if (self.is_list()) return list_method(in, self, m.name, args);
  if (is_object(self, object_kind::loop)) return loop_method(in, self, m.name, args);
  return type_error("'" + m.name + "' is not callable");
}

}  // namespace spite::tokenizer::template_detail
