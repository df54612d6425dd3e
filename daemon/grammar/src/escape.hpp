// Writing characters into GBNF text (literals and classes), shared by grammar::to_string and the
// JSON-schema compiler, so that what one writes the parser reads back unchanged.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "utf8.hpp"

namespace spite::grammar::detail {

inline void append_gbnf_char(std::string& out, char32_t c, bool in_class) {
  switch (c) {
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    case '\\': out += "\\\\"; return;
    case '"': out += in_class ? "\"" : "\\\""; return;
    case ']': case '[': case '-': case '^': if (in_class) { out += '\\'; out += static_cast<char>(c); return; } break;
    default: break;
  }
  if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0)) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(c));
    out += buf;
    return;
  }
  append_utf8(out, c);
}

// "text" as a GBNF literal; `text` is UTF-8 (invalid bytes are written as \xHH escapes of
// code points, which only happens for input that was not text to begin with).
inline std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t at = i;
    char32_t c = next_cp(text, i);
    if (c == invalid_cp) c = static_cast<unsigned char>(text[at]);
    append_gbnf_char(out, c, false);
  }
  out += '"';
  return out;
}

}  // namespace spite::grammar::detail
