// Filters on single values: strings, numbers, JSON, defaults (sequence filters: filters_seq.cpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "template/format.hpp"
#include "template/interp.hpp"
#include "template/parser.hpp"
#include "template/text.hpp"

namespace spite::tokenizer::template_detail {
namespace {

using filter_fn = result<value> (*)(interp&, const value&, call_args&);

value like(const value& input, std::string s) {
  return is_markup(input) ? markup(std::move(s)) : value(std::move(s));
}

result<value> f_upper(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "upper", {}));
  (void)a;
  return like(v, py_upper(py_str(v)));
}

result<value> f_lower(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "lower", {}));
  (void)a;
  return like(v, py_lower(py_str(v)));
}

result<value> f_capitalize(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "capitalize", {}));
  (void)a;
  return like(v, py_capitalize(py_str(v)));
}

// jinja2's title: each piece after a run of -, whitespace, (, {, [ or < is capitalised.
result<value> f_title(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "title", {}));
  (void)a;
  const auto cps = decode_utf8(py_str(v));
  const auto is_break = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c); };
  u32string out;
  bool start = true;
  for (char32_t c : cps) {
    if (is_break(c)) {
      out.push_back(c);
      start = true;
    } else if (start) {
      append_upper(out, c);
      start = false;
    } else {
      append_lower(out, c);
    }
  }
  return value(encode_utf8(out));
}

result<value> f_trim(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "trim", {"chars"}));
  std::optional<std::string> chars;
  if (a[0] && !a[0]->is_none()) {
    if (!a[0]->is_string()) return type_error("strip arg must be None or str");
    chars = a[0]->as_string();
  }
  return like(v, py_strip(py_str(v), chars, true, true));
}

result<value> f_replace(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "replace", {"old", "new", "count"}, 2));
  std::int64_t count = -1;
  if (a[2] && !a[2]->is_none()) {
    if (!is_integral(*a[2])) return type_error(quoted_type(*a[2]) + " object cannot be interpreted as an integer");
    count = to_i64(*a[2]);
  }
  std::string r = py_replace(py_str(v), py_str(*a[0]), py_str(*a[1]), count);
  SPITE_TRY(in.check_size(r.size()));
  return value(std::move(r));
}

result<value> f_center(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "center", {"width"}));
  std::int64_t width = 80;
  if (a[0]) {
    if (!is_integral(*a[0])) return type_error(quoted_type(*a[0]) + " object cannot be interpreted as an integer");
    width = to_i64(*a[0]);
  }
  SPITE_TRY(in.check_size(static_cast<std::size_t>(std::max<std::int64_t>(width, 0))));
  return like(v, py_pad(py_str(v), width, ' ', 0));
}

result<value> f_indent(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "indent", {"width", "first", "blank"}));
  std::string indention = "    ";
  if (a[0]) {
    if (a[0]->is_string()) {
      indention = a[0]->as_string();
    } else if (is_integral(*a[0])) {
      const std::int64_t w = to_i64(*a[0]);
      SPITE_TRY(in.check_size(static_cast<std::size_t>(std::max<std::int64_t>(w, 0))));
      indention = std::string(static_cast<std::size_t>(std::max<std::int64_t>(w, 0)), ' ');
    } else {
      return type_error("can't multiply sequence by non-int of type '" + type_name(*a[0]) + "'");
    }
  }
  if (v.is_undefined()) return undefined_error(v);
  if (!v.is_string()) return type_error("unsupported operand type(s) for +=: " + quoted_type(v) + " and 'str'");
  const bool first = a[1] && truthy(*a[1]);
  const bool blank = a[2] && truthy(*a[2]);
  const auto lines = py_splitlines(py_str(v) + "\n", false);
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += "\n";
      if (blank || !lines[i].empty()) out += indention;
    }
    out += lines[i];
    SPITE_TRY(in.check_size(out.size()));
  }
  if (first) out = indention + out;
  return like(v, std::move(out));
}

result<value> f_truncate(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "truncate", {"length", "killwords", "end", "leeway"}));
  const std::int64_t length = a[0] && is_integral(*a[0]) ? to_i64(*a[0]) : 255;
  const bool killwords = a[1] && truthy(*a[1]);
  const std::string end = a[2] ? py_str(*a[2]) : "...";
  const std::int64_t leeway = a[3] && is_integral(*a[3]) ? to_i64(*a[3]) : 5;
  const std::string s = py_str(v);
  const auto n = static_cast<std::int64_t>(count_code_points(s));
  const auto end_len = static_cast<std::int64_t>(count_code_points(end));
  if (length < end_len) return runtime_error("expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
  if (n <= length + leeway) return value(s);
  const std::string head = py_substr(s, 0, length - end_len);
  if (killwords) return value(head + end);
  const auto parts = py_rsplit(head, std::string(" "), 1);
  return value(parts[0] + end);
}

result<value> f_wordcount(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "wordcount", {}));
  (void)a;
  std::int64_t n = 0;
  bool in_word = false;
  for (char32_t c : decode_utf8(py_str(v))) {
    const bool w = c == '_' || py_isalnum(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return value(n);
}

result<value> f_format(interp&, const value& v, call_args& args) {
  if (!args.pos.empty() && !args.kw.empty())
    return runtime_error("can't handle positional and keyword arguments at the same time");
  value spec_args;
  if (!args.kw.empty()) {
    value_dict d;
    for (auto& [k, x] : args.kw) d.set(value(k), x);
    spec_args = value(std::move(d));
  } else {
    spec_args = make_tuple(args.pos);
  }
  SPITE_TPL_LET(std::string r, percent_format(py_str(v), spec_args));
  return value(std::move(r));
}

result<value> f_string(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "string", {}));
  (void)a;
  return v.is_string() ? v : value(py_str(v));
}

result<value> f_safe(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "safe", {}));
  (void)a;
  return is_markup(v) ? v : markup(py_str(v));
}

result<value> f_escape(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "escape", {}));
  (void)a;
  return is_markup(v) ? v : markup(html_escape(py_str(v)));
}

result<value> f_forceescape(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "forceescape", {}));
  (void)a;
  return markup(html_escape(py_str(v)));
}

result<value> f_default(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "default", {"default_value", "boolean"}));
  const bool boolean = a[1] && truthy(*a[1]);
  if (v.is_undefined() || (boolean && !truthy(v))) return a[0] ? *a[0] : value("");
  return v;
}

result<value> f_length(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "length", {}));
  (void)a;
  SPITE_TPL_LET(std::size_t n, in.length(v));
  return value(static_cast<std::int64_t>(n));
}

result<value> f_list(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "list", {}));
  (void)a;
  SPITE_TPL_LET(seq items, in.iterate(v));
  return value(*items);
}

result<value> f_first(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "first", {}));
  (void)a;
  if (is_object(v, object_kind::generator)) {
    auto& g = as<generator_object>(v);
    if (g.failure) return *g.failure;
    if (g.pos < g.items.size()) return g.items[g.pos++];
  } else {
    SPITE_TPL_LET(seq items, in.iterate(v));
    if (!items->empty()) return items->front();
  }
  return value::undefined("No first item, sequence was empty.");
}

result<value> f_last(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "last", {}));
  (void)a;
  if (!(v.is_list() || v.is_string() || v.is_dict() || v.is_undefined()))
    return type_error(quoted_type(v) + " object is not reversible");
  SPITE_TPL_LET(seq items, in.iterate(v));
  if (!items->empty()) return items->back();
  return value::undefined("No last item, sequence was empty.");
}

result<value> f_items(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "items", {}));
  (void)a;
  if (v.is_undefined()) return make_generator({});
  if (!v.is_dict()) return lazy_generator(type_error("Can only get item pairs from a mapping."));
  value_list out;
  for (const auto& [k, x] : v.as_dict()) out.push_back(make_tuple({k, x}));
  return make_generator(std::move(out));
}

result<value> f_abs(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "abs", {}));
  (void)a;
  if (v.is_float()) return value(std::fabs(v.as_float()));
  if (is_integral(v)) {
    const std::int64_t i = to_i64(v);
    if (i == INT64_MIN) return limit_error("integer overflow");
    return value(i < 0 ? -i : i);
  }
  if (v.is_undefined()) return undefined_error(v);
  return type_error("bad operand type for abs(): '" + type_name(v) + "'");
}

// Python's float(str): whitespace, sign, digits with single underscores, inf and nan.
std::optional<double> parse_py_float(std::string_view text) {
  const std::string s = py_strip(text, std::nullopt, true, true);
  std::string clean;
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean.push_back(s[i++]);
  std::string rest = py_lower(s.substr(i));
  if (rest == "inf" || rest == "infinity" || rest == "nan") return std::strtod((clean + rest).c_str(), nullptr);
  bool digits = false, prev_digit = false;
  for (std::size_t k = 0; k < rest.size(); ++k) {
    const char c = rest[k];
    if (c >= '0' && c <= '9') {
      clean.push_back(c);
      digits = prev_digit = true;
    } else if (c == '_' && prev_digit && k + 1 < rest.size() && std::isdigit(static_cast<unsigned char>(rest[k + 1]))) {
      prev_digit = false;
    } else if (c == '.' || c == 'e' || c == '+' || c == '-') {
      clean.push_back(c);
      prev_digit = false;
    } else {
      return std::nullopt;
    }
  }
  if (!digits) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

// Python's int(str, base); nullopt when it is not an integer literal.
result<std::optional<std::int64_t>> parse_py_int(std::string_view text, std::int64_t base) {
  std::string s = py_strip(text, std::nullopt, true, true);
  bool neg = false;
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  std::string body = py_lower(s.substr(i));
  if (base == 0 || base == 16 || base == 8 || base == 2) {
    const char p = body.size() > 1 && body[0] == '0' ? body[1] : 0;
    const std::int64_t prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefixed && (base == 0 || base == prefixed)) {
      body = body.substr(body.size() > 2 && body[2] == '_' ? 3 : 2);
      base = prefixed;
    } else if (base == 0) {
      base = 10;
    }
  }
  if (body.empty() || body.front() == '_' || body.back() == '_' || body.find("__") != std::string::npos)
    return std::optional<std::int64_t>();
  std::int64_t v = 0;
  for (char c : body) {
    if (c == '_') continue;
    const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10 : 99;
    if (d >= base) return std::optional<std::int64_t>();
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v))
      return limit_error("integer overflow (template integers are 64-bit)");
  }
  return std::optional<std::int64_t>(neg ? -v : v);
}

result<value> f_int(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "int", {"default", "base"}));
  const value dflt = a[0] ? *a[0] : value(0);
  const std::int64_t base = a[1] && is_integral(*a[1]) ? to_i64(*a[1]) : 10;
  if (v.is_undefined()) return undefined_error(v);
  if (is_integral(v)) return value(to_i64(v));
  const auto from_double = [&](double d) -> result<value> {
    if (std::isinf(d)) return limit_error("OverflowError: cannot convert float infinity to integer");
    if (std::isnan(d) || std::fabs(d) >= 9.2e18) return dflt;
    return value(static_cast<std::int64_t>(d));
  };
  if (v.is_float()) {
    if (std::isnan(v.as_float())) return dflt;
    return from_double(v.as_float());
  }
  if (v.is_string()) {
    SPITE_TPL_LET(auto i, parse_py_int(v.as_string(), base));
    if (i) return value(*i);
    const auto d = parse_py_float(v.as_string());
    if (!d || std::isinf(*d)) return dflt;
    return from_double(*d);
  }
  return dflt;
}

result<value> f_float(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "float", {"default"}));
  const value dflt = a[0] ? *a[0] : value(0.0);
  if (v.is_undefined()) return undefined_error(v);
  if (is_number(v)) return value(to_f64(v));
  if (v.is_string()) {
    const auto d = parse_py_float(v.as_string());
    if (d) return value(*d);
  }
  return dflt;
}

result<value> f_round(interp&, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "round", {"precision", "method"}));
  std::int64_t precision = 0;
  if (a[0]) {
    if (!is_integral(*a[0])) return type_error(quoted_type(*a[0]) + " object cannot be interpreted as an integer");
    precision = to_i64(*a[0]);
  }
  const std::string method = a[1] ? py_str(*a[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    return runtime_error("method must be common, ceil or floor");
  if (v.is_undefined()) return undefined_error(v);
  if (!is_number(v)) return type_error("type " + type_name(v) + " doesn't define __round__ method");
  precision = std::clamp<std::int64_t>(precision, -400, 400);
  if (method == "common") {
    if (is_integral(v) && precision >= 0) return value(to_i64(v));
    const double d = to_f64(v);
    double r;
    if (precision >= 0) {
      char buf[512];
      std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<std::int64_t>(precision, 300)), d);
      r = std::strtod(buf, nullptr);
    } else {
      const double scale = std::pow(10.0, static_cast<double>(-precision));
      r = std::nearbyint(d / scale) * scale;
    }
    if (is_integral(v)) return value(static_cast<std::int64_t>(r));
    return value(r);
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = to_f64(v) * scale;
  return value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

result<value> f_tojson(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"}));
  json_options o;
  o.ensure_ascii = a[0] && truthy(*a[0]);
  if (a[1] && !a[1]->is_none()) {
    o.has_indent = true;
    o.item_separator = ",";
    if (a[1]->is_string()) {
      o.indent = a[1]->as_string();
    } else if (is_integral(*a[1])) {
      o.indent.assign(static_cast<std::size_t>(std::clamp<std::int64_t>(to_i64(*a[1]), 0, 1 << 16)), ' ');
    } else if ((v.is_list() && !v.as_list().empty()) || (v.is_dict() && !v.as_dict().empty())) {
      return type_error("can't multiply sequence by non-int of type " + quoted_type(*a[1]));
    }
  }
  if (a[2] && !a[2]->is_none()) {
    SPITE_TPL_LET(seq parts, in.iterate(*a[2]));
    if (parts->size() != 2 || !(*parts)[0].is_string() || !(*parts)[1].is_string())
      return type_error("separators must be a pair of strings");
    o.item_separator = (*parts)[0].as_string();
    o.key_separator = (*parts)[1].as_string();
  }
  o.sort_keys = a[3] && truthy(*a[3]);
  SPITE_TPL_LET(std::string s, to_json(v, o));
  SPITE_TRY(in.check_size(s.size()));
  return value(std::move(s));
}

result<value> f_attr(interp& in, const value& v, call_args& args) {
  SPITE_TPL_LET(auto a, bind_args(args, "attr", {"name"}, 1));
  if (!a[0]->is_string()) return type_error("attribute name must be string");
  const std::string& name = a[0]->as_string();
  if (v.is_undefined()) return undefined_error(v);
  if (is_object(v, object_kind::namespace_) || is_object(v, object_kind::loop)) return in.getattr(v, name);
  if (!name.empty() && name[0] != '_')
    if (auto m = find_method(v, name)) return std::move(*m);
  return missing_attribute(v, name);
}

result<value> f_unsupported(interp&, const value&, call_args&) {
  return unsupported_error("this filter is not supported in templates");
}

struct filter_entry {
  std::string_view name;
  filter_fn fn;
};

constexpr filter_entry k_filters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"e", f_escape},
    {"escape", f_escape},
    {"filesizeformat", f_unsupported},
    {"first", f_first},
    {"float", f_float},
    {"forceescape", f_forceescape},
    {"format", f_format},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"pprint", f_unsupported},
    {"random", f_unsupported},
    {"replace", f_replace},
    {"round", f_round},
    {"safe", f_safe},
    {"string", f_string},
    {"striptags", f_unsupported},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"truncate", f_truncate},
    {"upper", f_upper},
    {"urlencode", f_unsupported},
    {"urlize", f_unsupported},
    {"wordcount", f_wordcount},
    {"wordwrap", f_unsupported},
    {"xmlattr", f_unsupported},
};

const filter_entry* find_filter(std::string_view name) {
  for (const auto& e : k_filters)
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace

bool is_known_filter(std::string_view name) { return find_filter(name) != nullptr || is_seq_filter(name); }

result<value> apply_filter(interp& in, std::string_view name, const value& input, call_args& args) {
  if (const filter_entry* f = find_filter(name)) return f->fn(in, input, args);
  if (is_seq_filter(name)) return apply_seq_filter(in, name, input, args);
  return runtime_error("No filter named '" + std::string(name) + "' found.");
}

}  // namespace spite::tokenizer::template_detail
