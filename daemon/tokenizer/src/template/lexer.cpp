#include "template/lexer.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "template/text.hpp"

namespace spite::tokenizer::template_detail {
namespace {

// Length of the Python whitespace code point starting at s[i], 0 when there is none.
std::size_t space_at(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return ascii_space(static_cast<char>(c)) ? 1 : 0;
  std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (i + len > s.size()) return 0;
  const auto cps = decode_utf8(s.substr(i, len));
  return (cps.size() == 1 && py_isspace(cps[0])) ? len : 0;
}

std::size_t skip_spaces(std::string_view s, std::size_t i) {
  while (i < s.size()) {
    const std::size_t n = space_at(s, i);
    if (n == 0) break;
    i += n;
  }
  return i;
}

// Start of the run of whitespace that ends s (Python's str.rstrip()).
std::size_t trailing_spaces_start(std::string_view s) {
  std::size_t end = s.size();
  while (end > 0) {
    std::size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
    if (space_at(s, start) != end - start) break;
    end = start;
  }
  return end;
}

bool all_spaces(std::string_view s) { return !s.empty() && skip_spaces(s, 0) == s.size(); }

int count_newlines(std::string_view s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

bool starts_with_at(std::string_view s, std::size_t i, std::string_view what) { return s.substr(i, what.size()) == what; }

error syntax_error(int line, const std::string& what) {
  return make_error(errc::malformed, "chat template line " + std::to_string(line) + ": " + what);
}

// Python's unicode-escape decoding of a string literal's body (after backslashreplace, so a
// non-ASCII character after a backslash stays as an escape text).
result<std::string> unescape(std::string_view body, int line) {
  std::string out;
  out.reserve(body.size());
  const auto hex_value = [&](std::size_t i, std::size_t n, std::uint32_t& v) {
    if (i + n > body.size()) return false;
    v = 0;
    for (std::size_t k = i; k < i + n; ++k) {
      const char c = body[k];
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) return false;
      v = v * 16 + static_cast<std::uint32_t>(d);
    }
    return true;
  };
  for (std::size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out.push_back(c);
      continue;
    }
    const char e = body[++i];
    switch (e) {
      case '\n': break;  // line continuation
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x':
      case 'u':
      case 'U': {
        const std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        std::uint32_t v = 0;
        if (!hex_value(i + 1, n, v))
          return syntax_error(line, std::string("truncated \\") + (e == 'x' ? "xXX" : e == 'u' ? "uXXXX" : "UXXXXXXXX") +
                                        " escape");
        if (v > 0x10FFFF) return syntax_error(line, "illegal Unicode character");
        append_utf8(out, v);
        i += n;
        break;
      }
      case 'N': return syntax_error(line, "\\N{...} escapes are not supported");
      default:
        if (e >= '0' && e <= '7') {
          std::uint32_t v = 0;
          std::size_t k = i;
          for (; k < body.size() && k < i + 3 && body[k] >= '0' && body[k] <= '7'; ++k) v = v * 8 + (body[k] - '0');
          append_utf8(out, v);
          i = k - 1;
        } else if (static_cast<unsigned char>(e) >= 0x80) {
          // "\é" became "\\xe9" before decoding: a backslash, then the escape text.
          std::size_t len = 1;
          while (i + len < body.size() && (static_cast<unsigned char>(body[i + len]) & 0xC0) == 0x80) ++len;
          const auto cps = decode_utf8(body.substr(i, len));
          const char32_t cp = cps.empty() ? 0 : cps[0];
          static const char* hex = "0123456789abcdef";
          out += "\\";
          const int digits = cp < 0x100 ? 2 : cp < 0x10000 ? 4 : 8;
          out.push_back(cp < 0x100 ? 'x' : cp < 0x10000 ? 'u' : 'U');
          for (int d = digits - 1; d >= 0; --d) out.push_back(hex[(cp >> (4 * d)) & 0xF]);
          i += len - 1;
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

// (\d+_)*\d+ : digits with single underscores between them.
std::size_t match_digits(std::string_view s, std::size_t i, bool (*is_digit)(char)) {
  if (i >= s.size() || !is_digit(s[i])) return 0;
  std::size_t k = i + 1;
  while (k < s.size()) {
    if (is_digit(s[k])) {
      ++k;
    } else if (s[k] == '_' && k + 1 < s.size() && is_digit(s[k + 1])) {
      k += 2;
    } else {
      break;
    }
  }
  return k - i;
}

bool dec_digit(char c) { return c >= '0' && c <= '9'; }

std::size_t match_float(std::string_view s, std::size_t i) {
  if (i > 0 && s[i - 1] == '.') return 0;
  const std::size_t d = match_digits(s, i, dec_digit);
  if (d == 0) return 0;
  std::size_t k = i + d;
  bool fraction = false;
  if (k < s.size() && s[k] == '.') {
    const std::size_t f = match_digits(s, k + 1, dec_digit);
    if (f) {
      fraction = true;
      k += 1 + f;
    }
  }
  if (k < s.size() && (s[k] == 'e' || s[k] == 'E')) {
    std::size_t e = k + 1;
    if (e < s.size() && (s[e] == '+' || s[e] == '-')) ++e;
    const std::size_t x = match_digits(s, e, dec_digit);
    if (x) return e + x - i;
  }
  return fraction ? k - i : 0;
}

bool bin_digit(char c) { return c == '0' || c == '1'; }
bool oct_digit(char c) { return c >= '0' && c <= '7'; }
bool hex_digit(char c) { return dec_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }
bool zero_digit(char c) { return c == '0'; }

// 0b(_?[01])+ | 0o(_?[0-7])+ | 0x(_?[0-9a-f])+ | [1-9](_?\d)* | 0(_?0)*
std::size_t match_integer(std::string_view s, std::size_t i, int& base) {
  base = 10;
  if (s[i] == '0' && i + 1 < s.size()) {
    const char p = static_cast<char>(s[i + 1] | 0x20);
    bool (*digit)(char) = p == 'b' ? bin_digit : p == 'o' ? oct_digit : p == 'x' ? hex_digit : nullptr;
    if (digit) {
      std::size_t k = i + 2;
      while (k < s.size()) {
        if (digit(s[k])) {
          ++k;
        } else if (s[k] == '_' && k + 1 < s.size() && digit(s[k + 1])) {
          k += 2;
        } else {
          break;
        }
      }
      if (k > i + 2) {
        base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
        return k - i;
      }
    }
  }
  if (s[i] >= '1' && s[i] <= '9') return match_digits(s, i, dec_digit);
  if (s[i] == '0') return match_digits(s, i, zero_digit);
  return 0;
}

// Identifiers: ASCII letters, digits and _, plus non-ASCII letters, digits and combining marks
// (an approximation of Python's Unicode identifier classes).
bool mark(char32_t c) {
  return (c >= 0x300 && c <= 0x36F) || (c >= 0x1AB0 && c <= 0x1AFF) || (c >= 0x1DC0 && c <= 0x1DFF) ||
         (c >= 0x20D0 && c <= 0x20FF) || (c >= 0xFE20 && c <= 0xFE2F) || c == 0xB7;
}

// Length of the identifier character at s[i] (0 if none).
std::size_t name_char_at(std::string_view s, std::size_t i, bool start) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!start && dec_digit(static_cast<char>(c)))) ? 1 : 0;
  const std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (i + len > s.size()) return 0;
  const auto cps = decode_utf8(s.substr(i, len));
  if (cps.size() != 1) return 0;
  const char32_t cp = cps[0];
  return (py_isalpha(cp) || (!start && (py_isdecimal(cp) || mark(cp)))) ? len : 0;
}

const std::string_view k_operators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]",
                                        "(",  ")",  "{",  "}",  ">",  "<",  "=", ".", ":", "|", ",", ";"};

class lexer {
 public:
  explicit lexer(std::string source) : s_(std::move(source)) {}

  result<std::vector<token>> run() {
    while (pos_ < s_.size()) {
      std::size_t p = pos_;
      for (;; ++p) {
        p = s_.find('{', p);
        if (p == std::string::npos || p + 1 >= s_.size()) {
          p = std::string::npos;
          break;
        }
        const char k = s_[p + 1];
        if (k == '{' || k == '%' || k == '#') break;
      }
      if (p == std::string::npos) {
        emit_text(std::string_view(s_).substr(pos_));
        break;
      }
      SPITE_TRY(tag(p));
    }
    push(tok::eof, "");
    return std::move(tokens_);
  }

 private:
  std::string s_;
  std::size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<token> tokens_;

  void push(tok t, std::string text) {
    token k;
    k.type = t;
    k.line = line_;
    k.text = std::move(text);
    tokens_.push_back(std::move(k));
  }

  void emit_text(std::string_view text) {
    if (!text.empty()) push(tok::text, std::string(text));
    line_ += count_newlines(text);
  }

  // Text before a tag, with the tag's whitespace control applied (jinja2's OptionalLStrip).
  void emit_text_before(std::string_view text, char sign, bool is_variable) {
    std::string_view kept = text;
    if (sign == '-') {
      kept = text.substr(0, trailing_spaces_start(text));
    } else if (sign != '+' && !is_variable) {
      const std::size_t nl = text.rfind('\n');
      const std::size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && all_spaces(text.substr(l_pos))) kept = text.substr(0, l_pos);
    }
    if (!kept.empty()) push(tok::text, std::string(kept));
    line_ += count_newlines(text);
  }

  // {%(-|+|)\s*raw\s*(-%}\s*|%}) at p: the end of the match, or npos.
  std::size_t match_raw_begin(std::size_t p, std::string_view word) const {
    std::size_t i = p + 2;
    if (i < s_.size() && (s_[i] == '-' || s_[i] == '+')) ++i;
    i = skip_spaces(s_, i);
    if (!starts_with_at(s_, i, word)) return std::string::npos;
    i = skip_spaces(s_, i + word.size());
    if (starts_with_at(s_, i, "-%}")) return skip_spaces(s_, i + 3);
    if (starts_with_at(s_, i, "%}")) return i + 2;
    return std::string::npos;
  }

  // {%(-|+|)\s*endraw\s*(+%}|-%}\s*|%}\n?) at p: the end of the match, or npos.
  std::size_t match_raw_end(std::size_t p) const {
    std::size_t i = p + 2;
    if (i < s_.size() && (s_[i] == '-' || s_[i] == '+')) ++i;
    i = skip_spaces(s_, i);
    if (!starts_with_at(s_, i, "endraw")) return std::string::npos;
    i = skip_spaces(s_, i + 6);
    if (starts_with_at(s_, i, "+%}")) return i + 3;
    if (starts_with_at(s_, i, "-%}")) return skip_spaces(s_, i + 3);
    if (starts_with_at(s_, i, "%}")) return i + 2 + (starts_with_at(s_, i + 2, "\n") ? 1 : 0);
    return std::string::npos;
  }

  char sign_at(std::size_t i) const { return (i < s_.size() && (s_[i] == '-' || s_[i] == '+')) ? s_[i] : '\0'; }

  result<void> tag(std::size_t p) {
    const std::string_view src(s_);
    const char kind = s_[p + 1];
    const char sign = sign_at(p + 2);
    const std::string_view before = src.substr(pos_, p - pos_);
    if (kind == '%') {
      const std::size_t raw_end = match_raw_begin(p, "raw");
      if (raw_end != std::string::npos) {
        emit_text_before(before, sign, false);
        line_ += count_newlines(src.substr(p, raw_end - p));
        line_starting_ = s_[raw_end - 1] == '\n';
        return raw_body(raw_end);
      }
    }
    emit_text_before(before, sign, kind == '{');
    pos_ = p + 2 + (sign ? 1 : 0);
    line_starting_ = false;
    if (kind == '#') return comment();
    push(kind == '{' ? tok::var_begin : tok::block_begin, "");
    return tag_body(kind == '{');
  }

  result<void> raw_body(std::size_t start) {
    for (std::size_t p = s_.find("{%", start); p != std::string::npos; p = s_.find("{%", p + 1)) {
      const std::size_t end = match_raw_end(p);
      if (end == std::string::npos) continue;
      emit_text_before(std::string_view(s_).substr(start, p - start), sign_at(p + 2), false);
      line_ += count_newlines(std::string_view(s_).substr(p, end - p));
      line_starting_ = s_[end - 1] == '\n';
      pos_ = end;
      return ok();
    }
    return syntax_error(line_, "Missing end of raw directive");
  }

  result<void> comment() {
    const std::size_t q = s_.find("#}", pos_);
    if (q == std::string::npos) return syntax_error(line_, "Missing end of comment tag");
    std::size_t end = q + 2;
    if (q > pos_ && s_[q - 1] == '-') {
      end = skip_spaces(s_, end);
    } else if (!(q > pos_ && s_[q - 1] == '+')) {
      if (end < s_.size() && s_[end] == '\n') ++end;
    }
    line_ += count_newlines(std::string_view(s_).substr(pos_, end - pos_));
    line_starting_ = s_[end - 1] == '\n';
    pos_ = end;
    return ok();
  }

  // The end of the tag at pos_, or npos.
  std::size_t match_tag_end(bool variable) const {
    const std::string_view close = variable ? "}}" : "%}";
    if (!variable && starts_with_at(s_, pos_, "+%}")) return pos_ + 3;
    if (s_[pos_] == '-' && starts_with_at(s_, pos_ + 1, close)) return skip_spaces(s_, pos_ + 3);
    if (starts_with_at(s_, pos_, close)) {
      const std::size_t end = pos_ + 2;
      return (!variable && end < s_.size() && s_[end] == '\n') ? end + 1 : end;
    }
    return std::string::npos;
  }

  result<void> tag_body(bool variable) {
    std::string balance;
    const std::string_view src(s_);
    while (pos_ < s_.size()) {
      if (balance.empty()) {
        const std::size_t end = match_tag_end(variable);
        if (end != std::string::npos) {
          push(variable ? tok::var_end : tok::block_end, "");
          line_ += count_newlines(src.substr(pos_, end - pos_));
          line_starting_ = s_[end - 1] == '\n';
          pos_ = end;
          return ok();
        }
      }
      if (const std::size_t ws = skip_spaces(s_, pos_); ws > pos_) {
        line_ += count_newlines(src.substr(pos_, ws - pos_));
        pos_ = ws;
        continue;
      }
      if (const std::size_t n = match_float(src, pos_)) {
        std::string digits;
        for (char c : src.substr(pos_, n))
          if (c != '_') digits.push_back(c);
        push(tok::floating, std::string(src.substr(pos_, n)));
        tokens_.back().float_value = std::strtod(digits.c_str(), nullptr);
        pos_ += n;
        continue;
      }
      int base = 10;
      if (const std::size_t n = match_integer(src, pos_, base)) {
        std::string digits;
        for (char c : src.substr(pos_ + (base == 10 ? 0 : 2), n - (base == 10 ? 0 : 2)))
          if (c != '_') digits.push_back(c);
        std::int64_t v = 0;
        const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
        if (r.ec != std::errc()) return syntax_error(line_, "integer literal too large: " + std::string(src.substr(pos_, n)));
        push(tok::integer, std::string(src.substr(pos_, n)));
        tokens_.back().int_value = v;
        pos_ += n;
        continue;
      }
      if (const std::size_t first = name_char_at(src, pos_, true)) {
        std::size_t k = pos_ + first;
        while (k < s_.size()) {
          const std::size_t n = name_char_at(src, k, false);
          if (n == 0) break;
          k += n;
        }
        push(tok::name, std::string(src.substr(pos_, k - pos_)));
        pos_ = k;
        continue;
      }
      if (s_[pos_] == '\'' || s_[pos_] == '"') {
        const char q = s_[pos_];
        std::size_t k = pos_ + 1;
        while (k < s_.size() && s_[k] != q) k += (s_[k] == '\\') ? 2 : 1;
        if (k < s_.size()) {
          auto text = unescape(src.substr(pos_ + 1, k - pos_ - 1), line_);
          if (!text) return std::move(text).err();
          push(tok::string, std::move(*text));
          line_ += count_newlines(src.substr(pos_, k + 1 - pos_));
          pos_ = k + 1;
          continue;
        }
      }
      bool matched = false;
      for (std::string_view op : k_operators) {
        if (!starts_with_at(s_, pos_, op)) continue;
        if (op == "{" || op == "(" || op == "[") {
          balance.push_back(op == "{" ? '}' : op == "(" ? ')' : ']');
        } else if (op == "}" || op == ")" || op == "]") {
          if (balance.empty()) return syntax_error(line_, "unexpected '" + std::string(op) + "'");
          if (balance.back() != op[0])
            return syntax_error(line_, "unexpected '" + std::string(op) + "', expected '" + balance.back() + "'");
          balance.pop_back();
        }
        push(tok::op, std::string(op));
        pos_ += op.size();
        matched = true;
        break;
      }
      if (!matched) {
        std::size_t len = 1;
        while (pos_ + len < s_.size() && len < 4 && (static_cast<unsigned char>(s_[pos_ + len]) & 0xC0) == 0x80) ++len;
        return syntax_error(line_, "unexpected char '" + s_.substr(pos_, len) + "'");
      }
    }
    return ok();  // end of source inside a tag: the parser reports it
  }
};

// jinja2 splits on \r\n, \r and \n, drops one trailing empty line and joins with \n.
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

result<std::vector<token>> tokenize(std::string_view source) { return lexer(normalize_newlines(source)).run(); }

}  // namespace spite::tokenizer::template_detail
