// Python str methods (Markup receivers keep Markup results and escape plain arguments, as
// markupsafe does).
#include "template/format.hpp"
#include "template/interp.hpp"
#include "template/text.hpp"

namespace spite::tokenizer::template_detail {
namespace {

result<std::optional<std::string>> opt_str(const std::optional<value>& v, std::string_view what) {
  if (!v || v->is_none()) return std::optional<std::string>();
  if (!v->is_string()) return type_error(std::string(what) + " arg must be None or str");
  return std::optional<std::string>(v->as_string());
}

result<std::optional<std::int64_t>> opt_index(const std::optional<value>& v) {
  if (!v || v->is_none()) return std::optional<std::int64_t>();
  if (!is_integral(*v)) return type_error("slice indices must be integers or None or have an __index__ method");
  return std::optional<std::int64_t>(to_i64(*v));
}

result<std::int64_t> int_arg(const std::optional<value>& v, std::int64_t dflt) {
  if (!v) return dflt;
  if (!is_integral(*v)) return type_error(quoted_type(*v) + " object cannot be interpreted as an integer");
  return to_i64(*v);
}

// startswith/endswith: a str or a tuple of str.
result<bool> affix(const std::string& s, const value& what, std::optional<std::int64_t> start,
                   std::optional<std::int64_t> end, bool prefix) {
  const std::string part = (start || end) ? py_substr(s, start, end) : s;
  const auto test = [&](const value& v) -> result<bool> {
    if (!v.is_string())
      return type_error(std::string(prefix ? "startswith" : "endswith") + " first arg must be str or a tuple of str, not " +
                        type_name(v));
    const std::string& a = v.as_string();
    if (a.size() > part.size()) return false;
    return prefix ? part.compare(0, a.size(), a) == 0 : part.compare(part.size() - a.size(), a.size(), a) == 0;
  };
  if (what.is_list() && what.flavor() == value::flavour::tuple) {
    for (const auto& v : what.as_list()) {
      SPITE_TPL_LET(bool r, test(v));
      if (r) return true;
    }
    return false;
  }
  return test(what);
}

value str_list(const std::vector<std::string>& parts, bool as_markup) {
  value_list out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.push_back(as_markup ? markup(p) : value(p));
  return value(std::move(out));
}

template <class Pred>
bool all_chars(const std::string& s, Pred pred) {
  const auto cps = decode_utf8(s);
  if (cps.empty()) return false;
  for (char32_t c : cps)
    if (!pred(c)) return false;
  return true;
}

// islower/isupper: at least one cased character, and none of the other case.
bool case_test(const std::string& s, bool lower) {
  bool cased = false;
  for (char32_t c : decode_utf8(s)) {
    if (lower ? py_isupper_char(c) : py_islower_char(c)) return false;
    if (lower ? py_islower_char(c) : py_isupper_char(c)) cased = true;
  }
  return cased;
}

bool is_title(const std::string& s) {
  bool cased = false, prev_cased = false;
  for (char32_t c : decode_utf8(s)) {
    if (py_isupper_char(c)) {
      if (prev_cased) return false;
      prev_cased = cased = true;
    } else if (py_islower_char(c)) {
      if (!prev_cased) return false;
      prev_cased = cased = true;
    } else {
      prev_cased = false;
    }
  }
  return cased;
}

bool is_identifier(const std::string& s) {
  const auto cps = decode_utf8(s);
  if (cps.empty()) return false;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const bool ok = c == '_' || py_isalpha(c) || (i > 0 && py_isdecimal(c));
    if (!ok) return false;
  }
  return true;
}

std::string expand_tabs(const std::string& s, std::int64_t tab) {
  std::string out;
  std::int64_t col = 0;
  for (char32_t c : decode_utf8(s)) {
    if (c == '\t') {
      if (tab > 0) {
        const std::int64_t n = tab - col % tab;
        out.append(static_cast<std::size_t>(n), ' ');
        col += n;
      }
    } else {
      append_utf8(out, c);
      col = (c == '\n' || c == '\r') ? 0 : col + 1;
    }
  }
  return out;
}

}  // namespace

result<value> call_str_method(interp& in, const value& self, std::string_view name, call_args& args) {
  const std::string& s = self.as_string();
  const bool mk = is_markup(self);
  const auto str_result = [&](std::string r) -> result<value> {
    SPITE_TRY(in.check_size(r.size()));
    return mk ? markup(std::move(r)) : value(std::move(r));
  };
  const auto esc = [&](const value& v) { return (mk && !is_markup(v)) ? html_escape(py_str(v)) : py_str(v); };
  const std::string fn(name);

  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    SPITE_TPL_LET(auto a, bind_args(args, fn, {"chars"}));
    SPITE_TPL_LET(auto chars, opt_str(a[0], fn));
    return str_result(py_strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    SPITE_TPL_LET(auto a, bind_args(args, fn, {"sep", "maxsplit"}));
    SPITE_TPL_LET(auto sep, opt_str(a[0], "must be str or None,"));
    if (sep && sep->empty()) return value_error("empty separator");
    SPITE_TPL_LET(std::int64_t maxsplit, int_arg(a[1], -1));
    return str_list(name == "split" ? py_split(s, sep, maxsplit) : py_rsplit(s, sep, maxsplit), mk);
  }
  if (name == "splitlines") {
    SPITE_TPL_LET(auto a, bind_args(args, fn, {"keepends"}));
    return str_list(py_splitlines(s, a[0] && truthy(*a[0])), mk);
  }
  if (name == "startswith" || name == "endswith") {
    SPITE_TPL_LET(auto a, bind_args(args, fn, {"prefix", "start", "end"}, 1));
    SPITE_TPL_LET(auto start, opt_index(a[1]));
    SPITE_TPL_LET(auto end, opt_index(a[2]));
    SPITE_TPL_LET(bool r, affix(s, *a[0], start, end, name == "startswith"));
    return value(r);
  }
  if (name == "upper") return str_result(py_upper(s));
  if (name == "lower" || name == "casefold") return str_result(py_lower(s));
  if (name == "title") return str_result(py_title(s));
  if (name == "capitalize") return str_result(py_capitalize(s));
  if (name == "swapcase") return str_result(py_swapcase(s));
  if (name == "replace") {
    SPITE_TPL_LET(auto a, bind_args(args, fn, {"old", "new", "count"}, 2));
    if (!a[0]->is_string() || !a[1]->is_string())
      return type_error("replace() argument must be str, not " + type_name(a[0]->is_string() ? *a[1] : *a[0]));
    SPITE_TPL_LET(std::int64_t count, int_arg(a[2], -1));
    const std::string r = py_replace(s, esc(*a[0]), esc(*a[1]), count);
    return str_result(r);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    SPITE_TPL_LET(auto a, bind_args(args, fn, {"sub", "start", "end"}, 1));
    if (!a[0]->is_string()) return type_error("must be str, not " + type_name(*a[0]));
    SPITE_TPL_LET(auto start, opt_index(a[1]));
    SPITE_TPL_LET(auto end, opt_index(a[2]));
    if (name == "count") return value(py_count(s, a[0]->as_string(), start, end));
    const std::int64_t r = py_find(s, a[0]->as_string(), start, end, name[0] == 'r');
    if (r < 0 && (name == "index" || name == "rindex")) return value_error("substring not found");
    return value(r);
  }
  if (name == "join") {
    SPITE_TPL_LET(auto a, bind_args(args, fn, {"iterable"}, 1));
    SPITE_TPL_LET(seq items, in.iterate(*a[0]));
    std::string out;
    for (std::size_t i = 0; i < items->size(); ++i) {
      const value& v = (*items)[i];
      if (!v.is_string())
        return type_error("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(v) + " found");
      if (i) out += s;
      out += esc(v);
      SPITE_TRY(in.check_size(out.size()));
    }
    return str_result(std::move(out));
  }
  if (name == "format") {
    call_args escaped = args;
    if (mk) {
      for (auto& v : escaped.pos)
        if (v.is_string() && !is_markup(v)) v = value(html_escape(v.as_string()));
      for (auto& [k, v] : escaped.kw)
        if (v.is_string() && !is_markup(v)) v = value(html_escape(v.as_string()));
    }
    SPITE_TPL_LET(std::string r, str_format(in, s, escaped));
    return str_result(std::move(r));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    SPITE_TPL_LET(auto a, bind_args(args, fn, {"width", "fillchar"}, 1));
    SPITE_TPL_LET(std::int64_t width, int_arg(a[0], 0));
    char32_t fill = ' ';
    if (a[1]) {
      const auto f = a[1]->is_string() ? decode_utf8(a[1]->as_string()) : u32string{};
      if (f.size() != 1) return type_error("The fill character must be exactly one character long");
      fill = f[0];
    }
    SPITE_TRY(in.check_size(static_cast<std::size_t>(std::max<std::int64_t>(width, 0))));
    return str_result(py_pad(s, width, fill, name == "center" ? 0 : name == "ljust" ? -1 : 1));
  }
  if (name == "zfill") {
    SPITE_TPL_LET(auto a, bind_args(args, fn, {"width"}, 1));
    SPITE_TPL_LET(std::int64_t width, int_arg(a[0], 0));
    SPITE_TRY(in.check_size(static_cast<std::size_t>(std::max<std::int64_t>(width, 0))));
    const bool sign = !s.empty() && (s[0] == '+' || s[0] == '-');
    std::string body = py_pad(s.substr(sign ? 1 : 0), width - (sign ? 1 : 0), '0', 1);
    return str_result(sign ? s.substr(0, 1) + body : body);
  }
  if (name == "partition" || name == "rpartition") {
    SPITE_TPL_LET(auto a, bind_args(args, fn, {"sep"}, 1));
    if (!a[0]->is_string()) return type_error("must be str, not " + type_name(*a[0]));
    const std::string& sep = a[0]->as_string();
    if (sep.empty()) return value_error("empty separator");
    const std::size_t q = name == "partition" ? s.find(sep) : s.rfind(sep);
    const auto piece = [&](std::string v) { return mk ? markup(std::move(v)) : value(std::move(v)); };
    if (q == std::string::npos)
      return name == "partition" ? make_tuple({piece(s), piece(""), piece("")}) : make_tuple({piece(""), piece(""), piece(s)});
    return make_tuple({piece(s.substr(0, q)), piece(sep), piece(s.substr(q + sep.size()))});
  }
  if (name == "removeprefix" || name == "removesuffix") {
    SPITE_TPL_LET(auto a, bind_args(args, fn, {"affix"}, 1));
    if (!a[0]->is_string()) return type_error(fn + "() argument must be str, not " + type_name(*a[0]));
    const std::string& x = a[0]->as_string();
    if (name == "removeprefix" && s.compare(0, x.size(), x) == 0) return str_result(s.substr(x.size()));
    if (name == "removesuffix" && !x.empty() && s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0)
      return str_result(s.substr(0, s.size() - x.size()));
    return str_result(s);
  }
  if (name == "expandtabs") {
    SPITE_TPL_LET(auto a, bind_args(args, fn, {"tabsize"}));
    SPITE_TPL_LET(std::int64_t tab, int_arg(a[0], 8));
    return str_result(expand_tabs(s, tab));
  }
  if (name.substr(0, 2) == "is") {
    SPITE_TPL_LET(auto a, bind_args(args, fn, {}));
    (void)a;
    if (name == "isalpha") return value(all_chars(s, py_isalpha));
    if (name == "isdigit") return value(all_chars(s, py_isdigit));
    if (name == "isdecimal") return value(all_chars(s, py_isdecimal));
    if (name == "isnumeric") return value(all_chars(s, py_isnumeric));
    if (name == "isalnum") return value(all_chars(s, py_isalnum));
    if (name == "isspace") return value(all_chars(s, py_isspace));
    if (name == "islower") return value(case_test(s, true));
    if (name == "isupper") return value(case_test(s, false));
    if (name == "istitle") return value(is_title(s));
    if (name == "isidentifier") return value(is_identifier(s));
    if (name == "isascii") {
      for (char c : s)
        if (static_cast<unsigned char>(c) >= 0x80) return value(false);
      return value(true);
    }
    if (name == "isprintable") {
      for (char32_t c : decode_utf8(s))
        if (!py_isprintable(c)) return value(false);
      return value(true);
    }
  }
  return unsupported_error("str." + fn + "() is not supported in templates");
}

}  // namespace spite::tokenizer::template_detail
