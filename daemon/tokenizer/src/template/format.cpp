#include "template/format.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "template/objects.hpp"
#include "template/text.hpp"

namespace spite::tokenizer::template_detail {
namespace {

constexpr int k_max_nesting = 200;

void append_hex(std::string& out, std::uint32_t v, int digits) {
  static const char* hex = "0123456789abcdef";
  for (int i = digits - 1; i >= 0; --i) out.push_back(hex[(v >> (4 * i)) & 0xF]);
}

}  // namespace

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<std::size_t>(r.ptr - buf));
  // sci: [-]d[.ddd]e[+-]xx
  std::string out;
  std::size_t i = 0;
  if (sci[0] == '-') {
    out.push_back('-');
    i = 1;
  }
  const std::size_t e = sci.find('e');
  std::string digits;
  for (std::size_t k = i; k < e; ++k)
    if (sci[k] != '.') digits.push_back(sci[k]);
  int exp10 = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exp10);
  const int decpt = exp10 + 1;
  const int n = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= n) {
      out += digits;
      out.append(static_cast<std::size_t>(decpt - n), '0');
      out += ".0";
    } else {
      out.append(digits, 0, static_cast<std::size_t>(decpt));
      out.push_back('.');
      out.append(digits, static_cast<std::size_t>(decpt));
    }
    return out;
  }
  out.push_back(digits[0]);
  if (n > 1) {
    out.push_back('.');
    out.append(digits, 1);
  }
  out.push_back('e');
  out.push_back(exp10 < 0 ? '-' : '+');
  const int a = std::abs(exp10);
  if (a < 10) out.push_back('0');
  out += std::to_string(a);
  return out;
}

std::string py_string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back(quote);
  for (char32_t c : decode_utf8(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c >= 0xDC80 && c <= 0xDCFF) {
      out += "\\udc";  // a stray byte, as Python's surrogateescape shows it
      append_hex(out, c & 0xFF, 2);
    } else if (!py_isprintable(c)) {
      if (c < 0x100) {
        out += "\\x";
        append_hex(out, c, 2);
      } else if (c < 0x10000) {
        out += "\\u";
        append_hex(out, c, 4);
      } else {
        out += "\\U";
        append_hex(out, c, 8);
      }
    } else {
      append_utf8(out, c);
    }
  }
  out.push_back(quote);
  return out;
}

std::string type_name(const value& v) {
  switch (v.type()) {
    case value::kind::undefined: return "Undefined";
    case value::kind::none: return "NoneType";
    case value::kind::boolean: return "bool";
    case value::kind::integer: return "int";
    case value::kind::floating: return "float";
    case value::kind::string: return v.flavor() == value::flavour::markup ? "Markup" : "str";
    case value::kind::list:
      switch (v.flavor()) {
        case value::flavour::tuple: return "tuple";
        case value::flavour::dict_keys: return "dict_keys";
        case value::flavour::dict_values: return "dict_values";
        case value::flavour::dict_items: return "dict_items";
        default: return "list";
      }
    case value::kind::dict: return "dict";
    case value::kind::object:
      switch (v.object()->kind) {
        case object_kind::macro: return "Macro";
        case object_kind::builtin: return "builtin_function_or_method";
        case object_kind::method: return "builtin_function_or_method";
        case object_kind::namespace_: return "Namespace";
        case object_kind::loop: return "LoopContext";
        case object_kind::generator: return as<generator_object>(v).type_name;
      }
  }
  return "object";
}

std::string quoted_type(const value& v) {
  std::string out = "'";
  out.append(type_name(v)).push_back('\'');
  return out;
}

namespace {

void repr_items(std::string& out, const value_list& items, int depth) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    py_repr_to(out, items[i], depth + 1);
  }
}

void repr_dict(std::string& out, const value_dict& d, int depth) {
  out.push_back('{');
  bool first = true;
  for (const auto& [k, v] : d) {
    if (!first) out += ", ";
    first = false;
    py_repr_to(out, k, depth + 1);
    out += ": ";
    py_repr_to(out, v, depth + 1);
  }
  out.push_back('}');
}

void object_str(std::string& out, const value& v, int depth) {
  switch (v.object()->kind) {
    case object_kind::macro: {
      const auto& m = as<macro_object>(v);
      out += "<Macro " + (m.def->name.empty() ? std::string("anonymous") : py_string_repr(m.def->name)) + ">";
      return;
    }
    case object_kind::builtin: out += "<built-in function>"; return;
    case object_kind::method: {
      const auto& m = as<method_object>(v);
      out += "<built-in method " + m.name + " of " + type_name(m.self) + " object>";
      return;
    }
    case object_kind::namespace_:
      out += "<Namespace ";
      repr_dict(out, as<namespace_object>(v).attrs, depth);
      out += ">";
      return;
    case object_kind::loop: {
      const auto& l = as<loop_object>(v);
      out += "<LoopContext " + std::to_string(l.index0 + 1) + "/" + std::to_string(l.size()) + ">";
      return;
    }
    case object_kind::generator: out += "<" + as<generator_object>(v).type_name + " object>"; return;
  }
}

}  // namespace

void py_repr_to(std::string& out, const value& v, int depth) {
  if (depth > k_max_nesting) {
    out += "...";
    return;
  }
  switch (v.type()) {
    case value::kind::undefined: out += "Undefined"; return;
    case value::kind::string:
      if (v.flavor() == value::flavour::markup) {
        out += "Markup(" + py_string_repr(v.as_string()) + ")";
      } else {
        out += py_string_repr(v.as_string());
      }
      return;
    case value::kind::list: {
      const auto& items = v.as_list();
      switch (v.flavor()) {
        case value::flavour::tuple:
          out.push_back('(');
          repr_items(out, items, depth);
          if (items.size() == 1) out.push_back(',');
          out.push_back(')');
          return;
        case value::flavour::dict_keys:
        case value::flavour::dict_values:
        case value::flavour::dict_items:
          out += type_name(v) + "([";
          repr_items(out, items, depth);
          out += "])";
          return;
        default:
          out.push_back('[');
          repr_items(out, items, depth);
          out.push_back(']');
          return;
      }
    }
    case value::kind::dict: repr_dict(out, v.as_dict(), depth); return;
    case value::kind::object: object_str(out, v, depth); return;
    default: out += py_str(v); return;
  }
}

std::string py_repr(const value& v) {
  std::string out;
  py_repr_to(out, v);
  return out;
}

std::string py_str(const value& v) {
  switch (v.type()) {
    case value::kind::undefined: return {};
    case value::kind::none: return "None";
    case value::kind::boolean: return v.as_bool() ? "True" : "False";
    case value::kind::integer: return std::to_string(v.as_int());
    case value::kind::floating: return float_repr(v.as_float());
    case value::kind::string: return v.as_string();
    default: return py_repr(v);
  }
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\'': out += "&#39;"; break;
      case '"': out += "&#34;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  const auto escape_cp = [&](char32_t c) {
    switch (c) {
      case '"': out += "\\\""; return;
      case '\\': out += "\\\\"; return;
      case '\n': out += "\\n"; return;
      case '\r': out += "\\r"; return;
      case '\t': out += "\\t"; return;
      case '\b': out += "\\b"; return;
      case '\f': out += "\\f"; return;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
      if (c >= 0x10000) {
        const char32_t v = c - 0x10000;
        out += "\\u";
        append_hex(out, 0xD800 + (v >> 10), 4);
        out += "\\u";
        append_hex(out, 0xDC00 + (v & 0x3FF), 4);
      } else {
        out += "\\u";
        append_hex(out, c, 4);
      }
      return;
    }
    append_utf8(out, c);
  };
  bool simple = true;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || c == '"' || c == '\\' || (ensure_ascii && u >= 0x7F)) {
      simple = false;
      break;
    }
  }
  if (simple) {
    out.append(s);
  } else {
    for (char32_t c : decode_utf8(s)) escape_cp(c);
  }
  out.push_back('"');
}

result<void> json_to(std::string& out, const value& v, const json_options& o, int level);

void json_newline(std::string& out, const json_options& o, int level) {
  out.push_back('\n');
  for (int i = 0; i < level; ++i) out += o.indent;
}

result<std::string> json_key(const value& k) {
  switch (k.type()) {
    case value::kind::string: return k.as_string();
    case value::kind::integer: return std::to_string(k.as_int());
    case value::kind::floating: {
      const double d = k.as_float();
      if (std::isnan(d)) return std::string("NaN");
      if (std::isinf(d)) return std::string(d < 0 ? "-Infinity" : "Infinity");
      return float_repr(d);
    }
    case value::kind::boolean: return std::string(k.as_bool() ? "true" : "false");
    case value::kind::none: return std::string("null");
    default:
      return make_error(errc::malformed, "TypeError: keys must be str, int, float, bool or None, not " + type_name(k));
  }
}

// Python sorts dict items by key; keys of different types do not compare.
result<void> sort_entries(std::vector<const value_dict::entry*>& entries) {
  bool all_str = true, all_num = true;
  for (const auto* e : entries) {
    all_str = all_str && e->first.is_string();
    all_num = all_num && (e->first.is_int() || e->first.is_float() || e->first.is_bool());
  }
  if (!all_str && !all_num && entries.size() > 1)
    return make_error(errc::malformed, "TypeError: '<' not supported between dict keys of different types");
  const auto num = [](const value& v) {
    return v.is_float() ? v.as_float() : static_cast<double>(v.is_bool() ? v.as_bool() : v.as_int());
  };
  std::stable_sort(entries.begin(), entries.end(), [&](const auto* a, const auto* b) {
    if (all_str) return a->first.as_string() < b->first.as_string();
    return num(a->first) < num(b->first);
  });
  return ok();
}

result<void> json_to(std::string& out, const value& v, const json_options& o, int level) {
  if (level > k_max_nesting) return make_error(errc::malformed, "ValueError: nesting too deep for json");
  switch (v.type()) {
    case value::kind::none: out += "null"; return ok();
    case value::kind::boolean: out += v.as_bool() ? "true" : "false"; return ok();
    case value::kind::integer: out += std::to_string(v.as_int()); return ok();
    case value::kind::floating: {
      const double d = v.as_float();
      if (std::isnan(d))
        out += "NaN";
      else if (std::isinf(d))
        out += d < 0 ? "-Infinity" : "Infinity";
      else
        out += float_repr(d);
      return ok();
    }
    case value::kind::string: json_string(out, v.as_string(), o.ensure_ascii); return ok();
    case value::kind::list: {
      if (v.flavor() != value::flavour::plain && v.flavor() != value::flavour::tuple) break;
      const auto& items = v.as_list();
      if (items.empty()) {
        out += "[]";
        return ok();
      }
      out.push_back('[');
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_separator;
        if (o.has_indent) json_newline(out, o, level + 1);
        SPITE_TRY(json_to(out, items[i], o, level + 1));
      }
      if (o.has_indent) json_newline(out, o, level);
      out.push_back(']');
      return ok();
    }
    case value::kind::dict: {
      const auto& d = v.as_dict();
      if (d.empty()) {
        out += "{}";
        return ok();
      }
      std::vector<const value_dict::entry*> entries;
      entries.reserve(d.size());
      for (const auto& e : d) entries.push_back(&e);
      if (o.sort_keys) SPITE_TRY(sort_entries(entries));
      out.push_back('{');
      bool first = true;
      for (const auto* e : entries) {
        auto key = json_key(e->first);
        if (!key) return std::move(key).err();
        if (!first) out += o.item_separator;
        first = false;
        if (o.has_indent) json_newline(out, o, level + 1);
        json_string(out, *key, o.ensure_ascii);
        out += o.key_separator;
        SPITE_TRY(json_to(out, e->second, o, level + 1));
      }
      if (o.has_indent) json_newline(out, o, level);
      out.push_back('}');
      return ok();
    }
    default: break;
  }
  return make_error(errc::malformed, "TypeError: Object of type " + type_name(v) + " is not JSON serializable");
}

}  // namespace

result<std::string> to_json(const value& v, const json_options& options) {
  std::string out;
  SPITE_TRY(json_to(out, v, options, 0));
  return out;
}

}  // namespace spite::tokenizer::template_detail
