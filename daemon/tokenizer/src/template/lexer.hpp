// Splits a template into text and tag tokens the way jinja2's lexer does with trim_blocks,
// lstrip_blocks and keep_trailing_newline=False: newlines normalised to \n, one trailing newline
// dropped, whitespace control (-, +), comments removed, raw blocks kept as text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "spite/core/result.hpp"

namespace spite::tokenizer::template_detail {

enum class tok : std::uint8_t {
  text,          // template data
  var_begin,     // {{
  var_end,       // }}
  block_begin,   // {%
  block_end,     // %}
  name,          // identifiers and keywords
  string,        // value: the unescaped literal
  integer,       // int_value
  floating,      // float_value
  op,            // value: the operator (+ - * / // % ** ~ [ ] ( ) { } == != < <= > >= = . : | , ;)
  eof,
};

struct token {
  tok type = tok::eof;
  int line = 1;
  std::string text;
  std::int64_t int_value = 0;
  double float_value = 0;
};

result<std::vector<token>> tokenize(std::string_view source);

}  // namespace spite::tokenizer::template_detail
