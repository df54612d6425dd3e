// Patterns: the regular-expression subset JSON schemas use in practice, compiled to GBNF for
// the inside of a JSON string.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "escape.hpp"
#include "json_schema_internal.hpp"
#include "utf8.hpp"

namespace spite::grammar::detail {

namespace {

// Code point ranges as the inside of a JSON string: raw where JSON allows it, escaped for the
// quote, the backslash and the common control characters (others are left out: a subset).
std::string json_chars(const std::vector<std::pair<char32_t, char32_t>>& set) {
  std::vector<std::pair<char32_t, char32_t>> raw;
  for (auto [lo, hi] : set) {
    lo = std::max<char32_t>(lo, 0x20);
    for (const char32_t cut : {char32_t{'"'}, char32_t{'\\'}}) {
      if (lo <= cut && cut <= hi) {
        if (lo < cut) raw.emplace_back(lo, cut - 1);
        lo = cut + 1;
      }
    }
    if (lo <= hi) raw.emplace_back(lo, hi);
  }
  std::vector<std::string> alts;
  if (!raw.empty()) {
    std::string cls = "[";
    for (const auto& [lo, hi] : raw) {
      append_gbnf_char(cls, lo, true);
      if (hi != lo) {
        cls += '-';
        append_gbnf_char(cls, hi, true);
      }
    }
    alts.push_back(cls + "]");
  }
  const std::pair<char32_t, const char*> escapes[] = {{'"', "\\\""}, {'\\', "\\\\"}, {'\n', "\\n"}, {'\t', "\\t"},
                                                      {'\r', "\\r"}, {'\b', "\\b"}, {'\f', "\\f"}};
  for (const auto& [c, esc] : escapes) {
    const bool in = std::any_of(set.begin(), set.end(), [&](const auto& r) { return r.first <= c && c <= r.second; });
    if (in) alts.push_back(gbnf_literal(esc));
  }
  if (alts.empty()) return "[^\\x00-\\U0010FFFF]";  // nothing: the branch is dropped at compile time
  return group(alts);
}

// A regular expression (the subset JSON schemas use in practice) -> GBNF for the string's
// contents. Anything beyond the subset is refused by name.
class pattern_compiler {
 public:
  pattern_compiler(std::string_view pattern, const std::string& ptr, std::uint32_t max_bound)
      : ptr_(ptr + "/pattern"), max_bound_(max_bound) {
    for (std::size_t i = 0; i < pattern.size();) {
      const char32_t c = next_cp(pattern, i);
      if (c == invalid_cp) {
        fail(malformed("the pattern is not valid UTF-8", ptr_));
        return;
      }
      cps_.push_back(c);
    }
  }

  result<std::string> run(const std::string& any_char) {
    if (err_) return *err_;
    if (!cps_.empty() && cps_[0] == '^') {
      anchored_start_ = true;
      pos_ = 1;
    }
    if (cps_.size() > pos_ && cps_.back() == '$') {
      std::size_t slashes = 0;
      for (std::size_t i = cps_.size() - 1; i-- > pos_ && cps_[i] == '\\';) ++slashes;
      if (slashes % 2 == 0) {
        anchored_end_ = true;
        cps_.pop_back();
      }
    }
    std::string body = alternation(0);
    if (!err_ && pos_ < cps_.size()) fail(malformed("unbalanced ')' in the pattern", ptr_));
    if (err_) return *err_;
    if (!anchored_start_) body = any_char + "* " + body;
    if (!anchored_end_) body += " " + any_char + "*";
    return body;
  }

 private:
  bool eof() const { return pos_ >= cps_.size(); }
  char32_t peek(std::size_t ahead = 0) const { return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead] : 0; }
  void fail(error e) {
    if (!err_) err_ = std::move(e);
  }
  void refuse(std::string_view what) { fail(unsupported("pattern " + std::string(what), ptr_)); }

  std::string alternation(std::size_t depth) {
    std::vector<std::string> alts{sequence(depth)};
    while (!err_ && peek() == '|' && !eof()) {
      ++pos_;
      alts.push_back(sequence(depth));
    }
    if (depth == 0 && alts.size() > 1 && (anchored_start_ || anchored_end_)) {
      refuse("with '^' or '$' on a top-level alternation (write ^(a|b)$)");
    }
    return group(alts);
  }

  std::string sequence(std::size_t depth) {
    std::vector<std::string> items;
    while (!err_ && !eof() && peek() != '|' && peek() != ')') {
      std::string item = atom(depth);
      if (err_) break;
      item = quantified(item);
      items.push_back(std::move(item));
    }
    if (items.empty()) return "\"\"";
    return join(items, " ");
  }

  // {m}, {m,}, {m,n} at pos_: true with the bounds and pos_ past it; false (pos_ unchanged) if the
  // brace is not a quantifier (then it is a literal '{', as in JavaScript).
  bool braces(std::uint32_t& lo, std::optional<std::uint32_t>& hi) {
    std::size_t p = pos_ + 1;
    auto number = [&](std::uint64_t& v) {
      const std::size_t start = p;
      v = 0;
      while (p < cps_.size() && cps_[p] >= '0' && cps_[p] <= '9' && v <= 1000000) v = v * 10 + (cps_[p++] - '0');
      return p > start;
    };
    std::uint64_t a = 0, b = 0;
    if (!number(a)) return false;
    bool has_b = false, comma = false;
    if (p < cps_.size() && cps_[p] == ',') {
      comma = true;
      ++p;
      has_b = number(b);
    }
    if (p >= cps_.size() || cps_[p] != '}') return false;
    pos_ = p + 1;
    if (a > max_bound_ || (has_b && b > max_bound_)) {
      refuse("repetition bound above " + std::to_string(max_bound_));
      return true;
    }
    if (has_b && b < a) {
      fail(malformed("pattern repetition {m,n} with n < m", ptr_));
      return true;
    }
    lo = static_cast<std::uint32_t>(a);
    hi = comma ? (has_b ? std::optional<std::uint32_t>(static_cast<std::uint32_t>(b)) : std::nullopt)
               : std::optional<std::uint32_t>(lo);
    return true;
  }

  // "{m}", "{m,}", "{m,n}" (built with push_back and append: GCC 12 warns, falsely, with
  // -Wrestrict on assigning string literals here).
  static std::string bounds_text(std::uint32_t lo, const std::optional<std::uint32_t>& hi) {
    std::string out(1, '{');
    out.append(std::to_string(lo));
    if (!hi || *hi != lo) out.push_back(',');
    if (hi && *hi != lo) out.append(std::to_string(*hi));
    out.push_back('}');
    return out;
  }

  std::string quantified(std::string item) {
    std::string q;
    const char32_t c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      q.push_back(static_cast<char>(c));
    } else if (c == '{') {
      std::uint32_t lo = 0;
      std::optional<std::uint32_t> hi;
      if (!braces(lo, hi)) return item;
      if (err_) return {};
      q = bounds_text(lo, hi);
    } else {
      return item;
    }
    if (peek() == '?') ++pos_;  // lazy: matches the same strings
    if (peek() == '+') refuse("possessive quantifier");
    if (peek() == '*' || peek() == '+' || peek() == '?') fail(malformed("pattern quantifier with nothing to repeat", ptr_));
    return "( " + item + " )" + q;
  }

  std::string atom(std::size_t depth) {
    const char32_t c = cps_[pos_++];
    switch (c) {
      case '(': return paren(depth);
      case '[': return json_chars(char_set());
      case '.': return json_chars(char_class({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, true).ranges());
      case '\\': return escape();
      case '^': refuse("'^' anywhere but at the start"); return {};
      case '$': refuse("'$' anywhere but at the end"); return {};
      case '*': case '+': case '?': fail(malformed("pattern quantifier with nothing to repeat", ptr_)); return {};
      case '{': {
        --pos_;
        std::uint32_t lo = 0;
        std::optional<std::uint32_t> hi;
        if (braces(lo, hi)) {
          fail(malformed("pattern quantifier with nothing to repeat", ptr_));
          return {};
        }
        ++pos_;
        return json_chars({{c, c}});
      }
      default: return json_chars({{c, c}});
    }
  }

  std::string paren(std::size_t depth) {
    if (depth + 1 > 32) {
      refuse("groups nested deeper than 32");
      return {};
    }
    if (peek() == '?') {
      if (peek(1) == ':') {
        pos_ += 2;
      } else if (peek(1) == '=' || peek(1) == '!') {
        refuse("lookahead");
        return {};
      } else if (peek(1) == '<' && (peek(2) == '=' || peek(2) == '!')) {
        refuse("lookbehind");
        return {};
      } else if (peek(1) == '<' || (peek(1) == 'P' && peek(2) == '<')) {
        while (!eof() && peek() != '>') ++pos_;  // a named group: the name does not change the language
        ++pos_;
      } else {
        refuse("group syntax '(?" + std::string(1, static_cast<char>(peek(1))) + "' (inline flags?)");
        return {};
      }
    }
    std::string inner = alternation(depth + 1);
    if (err_) return {};
    if (peek() != ')' || eof()) {
      fail(malformed("missing ')' in the pattern", ptr_));
      return {};
    }
    ++pos_;
    return "( " + inner + " )";
  }

  // \d \w \s and their complements; nullopt for other escapes.
  static std::optional<std::vector<std::pair<char32_t, char32_t>>> class_escape(char32_t e) {
    using ranges = std::vector<std::pair<char32_t, char32_t>>;
    const ranges digit{{'0', '9'}}, word{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}},
        space{{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x2028, 0x2029}, {0xFEFF, 0xFEFF}};
    switch (e) {
      case 'd': return digit;
      case 'w': return word;
      case 's': return space;
      case 'D': return char_class(digit, true).ranges();
      case 'W': return char_class(word, true).ranges();
      case 'S': return char_class(space, true).ranges();
      default: return std::nullopt;
    }
  }

  // The character an escape stands for, or invalid_cp (after refusing) for the unsupported ones.
  char32_t escaped_char(bool in_class) {
    if (eof()) {
      fail(malformed("pattern ends with '\\'", ptr_));
      return invalid_cp;
    }
    const char32_t e = cps_[pos_++];
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'f': return '\f';
      case 'v': return '\v';
      case '0': return 0;
      case 'b':
        if (in_class) return '\b';
        refuse("word boundary '\\b'");
        return invalid_cp;
      case 'B': refuse("word boundary '\\B'"); return invalid_cp;
      case 'p': case 'P': refuse("Unicode property escape '\\p'"); return invalid_cp;
      case 'k': refuse("backreference '\\k'"); return invalid_cp;
      case 'x': case 'u': {
        const int digits = e == 'x' ? 2 : 4;
        char32_t v = 0;
        for (int i = 0; i < digits; ++i) {
          const char32_t h = peek();
          const int d = h >= '0' && h <= '9' ? static_cast<int>(h - '0')
                        : h >= 'a' && h <= 'f' ? static_cast<int>(h - 'a' + 10)
                        : h >= 'A' && h <= 'F' ? static_cast<int>(h - 'A' + 10) : -1;
          if (d < 0 || eof()) {
            fail(malformed("bad hex escape in the pattern", ptr_));
            return invalid_cp;
          }
          v = v * 16 + static_cast<char32_t>(d);
          ++pos_;
        }
        return v;
      }
      default: break;
    }
    if (e >= '1' && e <= '9') {
      refuse("backreference");
      return invalid_cp;
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
      refuse(std::string("escape '\\") + static_cast<char>(e) + "'");
      return invalid_cp;
    }
    return e;  // an escaped punctuation character stands for itself
  }

  std::string escape() {
    if (!eof()) {
      if (auto set = class_escape(peek())) {
        ++pos_;
        return json_chars(*set);
      }
    }
    const char32_t c = escaped_char(false);
    if (c == invalid_cp) return {};
    return json_chars({{c, c}});
  }

  std::vector<std::pair<char32_t, char32_t>> char_set() {
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<std::pair<char32_t, char32_t>> ranges;
    bool first = true;
    while (!err_) {
      if (eof()) {
        fail(malformed("missing ']' in the pattern", ptr_));
        return {};
      }
      if (peek() == ']' && !first) break;
      if (peek() == ']' && first) break;  // [] matches nothing, [^] anything (JavaScript)
      first = false;
      char32_t lo = cps_[pos_++];
      if (lo == '\\') {
        if (auto set = class_escape(peek())) {
          ++pos_;
          ranges.insert(ranges.end(), set->begin(), set->end());
          continue;
        }
        lo = escaped_char(true);
        if (lo == invalid_cp) return {};
      }
      char32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < cps_.size()) {
        ++pos_;
        hi = cps_[pos_++];
        if (hi == '\\') {
          if (class_escape(peek())) {
            refuse("class range ending in a class escape");
            return {};
          }
          hi = escaped_char(true);
          if (hi == invalid_cp) return {};
        }
        if (hi < lo) {
          fail(malformed("pattern class range out of order", ptr_));
          return {};
        }
      }
      ranges.emplace_back(lo, hi);
    }
    ++pos_;
    return char_class(std::move(ranges), negated).ranges();
  }

  std::vector<char32_t> cps_;
  std::size_t pos_ = 0;
  std::string ptr_;
  std::uint32_t max_bound_;
  bool anchored_start_ = false, anchored_end_ = false;
  std::optional<error> err_;
};

}  // namespace

result<std::string> pattern_body(std::string_view pattern, const std::string& ptr, std::uint32_t max_bound,
                                 const std::string& any_char) {
  pattern_compiler pc(pattern, ptr, max_bound);
  return pc.run(any_char);
}

}  // namespace spite::grammar::detail
