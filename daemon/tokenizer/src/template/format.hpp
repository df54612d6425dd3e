// Python's str(), repr() and json.dumps() of template values, and HTML escaping (Markup).
#pragma once

#include <string>
#include <string_view>

#include "spite/core/result.hpp"
#include "spite/tokenizer/template.hpp"

namespace spite::tokenizer::template_detail {

std::string float_repr(double d);          // repr(float): 0.1, 1.0, 1e-05, 1e+16, inf, nan
std::string py_str(const value& v);        // str(v); undefined gives ""
std::string py_repr(const value& v);       // repr(v)
void py_repr_to(std::string& out, const value& v, int depth = 0);
std::string py_string_repr(std::string_view s);  // 'text' with Python's quoting and escapes
std::string type_name(const value& v);     // Python's type name: str, NoneType, dict, ...
std::string quoted_type(const value& v);   // 'str'

std::string html_escape(std::string_view s);  // markupsafe.escape: & < > ' "

struct json_options {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;  // per level, when has_indent
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// json.dumps(v, ...): TypeError for what Python cannot serialise (undefined, generators, ...).
result<std::string> to_json(const value& v, const json_options& options);

}  // namespace spite::tokenizer::template_detail
