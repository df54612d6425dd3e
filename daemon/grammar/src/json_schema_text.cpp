// The text half of the JSON-schema compiler: fixed rules for JSON's primitives, strings (length,
// formats, patterns), numbers with bounds, and keys that avoid a set of names.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "escape.hpp"
#include "json_schema_internal.hpp"
#include "utf8.hpp"

namespace spite::grammar::detail {

namespace {

// JSON's primitives. Whitespace is bounded (one blank, or a newline and an indentation of at
// most 20) so that a small model cannot stall in it; numbers have at most 16 digits before and
// after the point and a two-digit exponent, so they parse as doubles without overflow; \u
// escapes exclude surrogates, which strict parsers refuse alone.
const std::map<std::string, std::pair<std::string, std::vector<std::string>>, std::less<>>& primitives() {
  static const std::map<std::string, std::pair<std::string, std::vector<std::string>>, std::less<>> table = {
      {"ws", {R"(([ \t] | "\n" [ \t]{0,20})?)", {}}},
      {"value", {"object | array | string | number | boolean | null", {"object", "array", "string", "number", "boolean", "null"}}},
      {"object", {R"("{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* ws )? "}")", {"ws", "string", "value"}}},
      {"array", {R"("[" ws ( value ( ws "," ws value )* ws )? "]")", {"ws", "value"}}},
      {"string", {R"("\"" char* "\"")", {"char"}}},
      {"char", {R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" hex4 ))", {"hex4"}}},
      {"hex4", {"[0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}", {}}},
      {"number", {R"("-"? int-part ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?)", {"int-part"}}},
      {"int-part", {R"("0" | [1-9] [0-9]{0,15})", {}}},
      {"integer", {R"("-"? int-part)", {"int-part"}}},
      {"boolean", {R"("true" | "false")", {}}},
      {"null", {R"("null")", {}}},
  };
  return table;
}

constexpr std::uint64_t max_magnitude = 9999999999999999ULL;  // 16 digits

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

std::string group(const std::vector<std::string>& alts) {
  if (alts.empty()) return "\"\"";
  if (alts.size() == 1) return alts[0];
  return "( " + join(alts, " | ") + " )";
}

const std::string quote = R"("\"")";

// ---- integer ranges as digit patterns

// Equal-length decimal strings a <= b: the strings between them, digit by digit.
std::string digits_between(const std::string& a, const std::string& b) {
  const std::size_t n = a.size();
  if (n == 0) return "";
  if (a == b) return gbnf_literal(a);
  const std::string ra = a.substr(1), rb = b.substr(1);
  if (a[0] == b[0]) return gbnf_literal(a.substr(0, 1)) + " " + digits_between(ra, rb);
  const bool low_full = ra.find_first_not_of('0') == std::string::npos;
  const bool high_full = rb.find_first_not_of('9') == std::string::npos;
  const std::string tail = n > 1 ? " [0-9]{" + std::to_string(n - 1) + "}" : "";
  std::vector<std::string> alts;
  if (!low_full) alts.push_back(gbnf_literal(a.substr(0, 1)) + " " + group({digits_between(ra, std::string(n - 1, '9'))}));
  const char first = low_full ? a[0] : static_cast<char>(a[0] + 1);
  const char last = high_full ? b[0] : static_cast<char>(b[0] - 1);
  if (first <= last) alts.push_back(std::string("[") + first + "-" + last + "]" + tail);
  if (!high_full) alts.push_back(gbnf_literal(b.substr(0, 1)) + " " + group({digits_between(std::string(n - 1, '0'), rb)}));
  return group(alts);
}

std::uint64_t pow10(std::size_t d) {
  std::uint64_t v = 1;
  while (d-- > 0) v *= 10;
  return v;
}

// Decimal numbers without leading zeros in [lo, hi].
std::string uint_range(std::uint64_t lo, std::uint64_t hi) {
  std::vector<std::string> alts;
  const std::size_t dlo = std::to_string(lo).size(), dhi = std::to_string(hi).size();
  for (std::size_t d = dlo; d <= dhi; ++d) {
    const std::uint64_t a = std::max(lo, d == 1 ? 0 : pow10(d - 1));
    const std::uint64_t b = std::min(hi, pow10(d) - 1);
    alts.push_back(digits_between(std::to_string(a), std::to_string(b)));
  }
  return group(alts);
}

// Decimal numbers >= lo, up to 16 digits.
std::string uint_at_least(std::uint64_t lo) {
  const std::size_t d = std::to_string(lo).size();
  std::vector<std::string> alts{uint_range(lo, pow10(d) - 1)};
  if (d < 16) alts.push_back("[1-9] [0-9]{" + std::to_string(d) + ",15}");
  return group(alts);
}

// A bound as an integer, or nullopt when absent; errors for non-numbers.
result<std::optional<double>> number_keyword(const json& s, const char* key, const std::string& ptr) {
  const auto it = s.find(key);
  if (it == s.end()) return std::optional<double>{};
  if (!it->is_number()) return malformed(std::string("'") + key + "' must be a number", ptr);
  return std::optional<double>{it->get<double>()};
}

struct int_bounds {
  std::optional<std::int64_t> lo, hi;
};

// minimum / maximum / exclusive* (numbers, or draft-4 booleans) as inclusive integer bounds.
result<int_bounds> integer_bounds(const json& s, const std::string& ptr) {
  auto mn = number_keyword(s, "minimum", ptr);
  if (!mn) return std::move(mn).err();
  auto mx = number_keyword(s, "maximum", ptr);
  if (!mx) return std::move(mx).err();
  std::optional<double> lo = *mn, hi = *mx, xlo, xhi;
  // Draft 4 spells exclusive bounds as flags on minimum / maximum; later drafts as numbers.
  auto exclusive = [&](const char* key, std::optional<double>& bound, std::optional<double>& out) -> result<void> {
    const auto it = s.find(key);
    if (it == s.end()) return ok();
    if (it->is_number()) {
      out = it->get<double>();
      return ok();
    }
    if (!it->is_boolean()) return malformed(std::string("'") + key + "' must be a number", ptr);
    if (!it->get<bool>()) return ok();
    if (!bound) return malformed(std::string("'") + key + "' is true without its bound", ptr);
    out = bound;
    bound.reset();
    return ok();
  };
  SPITE_TRY(exclusive("exclusiveMinimum", lo, xlo));
  SPITE_TRY(exclusive("exclusiveMaximum", hi, xhi));
  const double limit = static_cast<double>(max_magnitude);
  int_bounds b;
  auto raise = [&](double v) {
    if (!b.lo || v > static_cast<double>(*b.lo)) b.lo = static_cast<std::int64_t>(v);
  };
  auto lower = [&](double v) {
    if (!b.hi || v < static_cast<double>(*b.hi)) b.hi = static_cast<std::int64_t>(v);
  };
  auto clamp = [&](double v) { return std::clamp(v, -limit - 1, limit + 1); };
  if (lo) raise(std::ceil(clamp(*lo)));
  if (xlo) raise(std::floor(clamp(*xlo)) + 1);
  if (hi) lower(std::floor(clamp(*hi)));
  if (xhi) lower(std::ceil(clamp(*xhi)) - 1);
  const auto lim = static_cast<std::int64_t>(max_magnitude);
  if (b.lo && *b.lo > lim) return unsupported("minimum beyond 16 digits", ptr);
  if (b.hi && *b.hi < -lim) return unsupported("maximum beyond 16 digits", ptr);
  if (b.lo && *b.lo < -lim) b.lo.reset();  // every integer the grammar writes satisfies it
  if (b.hi && *b.hi > lim) b.hi.reset();
  if (b.lo && b.hi && *b.lo > *b.hi) return malformed("no integer lies between minimum and maximum", ptr);
  return b;
}

// ---- patterns

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

  std::string quantified(std::string item) {
    std::string q;
    const char32_t c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      q = std::string(1, static_cast<char>(c));
    } else if (c == '{') {
      std::uint32_t lo = 0;
      std::optional<std::uint32_t> hi;
      if (!braces(lo, hi)) return item;
      if (err_) return {};
      q = "{" + std::to_string(lo) + (hi ? (*hi == lo ? "" : "," + std::to_string(*hi)) : ",") + "}";
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

result<std::optional<std::uint32_t>> count_keyword(const json& s, const char* key, const std::string& ptr,
                                                   std::uint32_t max_bound) {
  const auto it = s.find(key);
  if (it == s.end()) return std::optional<std::uint32_t>{};
  const bool integral = it->is_number_unsigned() || (it->is_number_integer() && it->get<std::int64_t>() >= 0) ||
                        (it->is_number_float() && it->get<double>() >= 0 && std::floor(it->get<double>()) == it->get<double>());
  if (!integral) return malformed(std::string("'") + key + "' must be a non-negative integer", ptr);
  const double v = it->get<double>();
  if (v > max_bound) return unsupported(std::string(key) + " above " + std::to_string(max_bound), ptr);
  return std::optional<std::uint32_t>{static_cast<std::uint32_t>(v)};
}

}  // namespace

// ---- rule_set

error unsupported(std::string_view feature, const std::string& ptr) {
  return make_error(errc::unsupported, "unsupported JSON-schema feature '" + std::string(feature) + "' at " + (ptr.empty() ? "/" : ptr));
}

error malformed(std::string_view what, const std::string& ptr) {
  return make_error(errc::invalid_argument, "invalid JSON schema at " + (ptr.empty() ? "/" : ptr) + ": " + std::string(what));
}

std::string pointer_segment(std::string_view key) {
  std::string out = "/";
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

rule_set::rule_set() {
  names_.insert("root");
  for (const auto& [name, _] : primitives()) names_.insert(name);
}

std::string rule_set::reserve(std::string_view hint) {
  std::string base;
  for (const char c : hint) {
    const char l = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    const bool keep = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9');
    if (keep) {
      base += l;
    } else if (!base.empty() && base.back() != '-') {
      base += '-';
    }
    if (base.size() >= 40) break;
  }
  while (!base.empty() && base.back() == '-') base.pop_back();
  if (base.empty()) base = "r";
  std::string name = base;
  for (int i = 2; names_.contains(name); ++i) name = base + "-" + std::to_string(i);
  names_.insert(name);
  return name;
}

void rule_set::define(const std::string& name, std::string body) { rules_.emplace_back(name, std::move(body)); }

std::string rule_set::add(std::string_view hint, std::string body) {
  if (const auto it = by_body_.find(body); it != by_body_.end()) return it->second;
  const std::string name = reserve(hint);
  by_body_.emplace(body, name);
  define(name, std::move(body));
  return name;
}

std::string rule_set::prim(std::string_view name) {
  const auto& table = primitives();
  const auto it = table.find(name);
  const std::string key(name);
  if (!prims_.insert(key).second) return key;
  for (const auto& dep : it->second.second) prim(dep);
  define(key, it->second.first);
  return key;
}

std::string rule_set::text(const std::string& root_body) const {
  std::string out = "root ::= " + root_body + "\n";
  for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
  return out;
}

// ---- values

std::string json_literal(const json& value) {
  return gbnf_literal(value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
}

result<std::string> string_rule(rule_set& rules, const json& s, const std::string& ptr, std::string_view hint,
                                const schema_options& options) {
  const bool has_pattern = s.contains("pattern"), has_format = s.contains("format");
  auto min = count_keyword(s, "minLength", ptr, options.max_bound);
  if (!min) return std::move(min).err();
  auto max = count_keyword(s, "maxLength", ptr, options.max_bound);
  if (!max) return std::move(max).err();
  const bool has_length = min->has_value() || max->has_value();
  if (has_format) {
    if (!s["format"].is_string()) return malformed("'format' must be a string", ptr);
    if (has_pattern || has_length) return unsupported("format with pattern, minLength or maxLength", ptr);
    const std::string f = s["format"].get<std::string>();
    const std::string date = R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))";
    const std::string time =
        R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))";
    std::string body;
    if (f == "date") {
      body = date;
    } else if (f == "time") {
      body = time;
    } else if (f == "date-time") {
      body = date + " \"T\" " + time;
    } else if (f == "uuid") {
      body = R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})";
    } else {
      return unsupported("format '" + f + "'", ptr);
    }
    return rules.add(f + "-string", quote + " " + rules.add(f, body) + " " + quote);
  }
  if (has_pattern) {
    if (!s["pattern"].is_string()) return malformed("'pattern' must be a string", ptr);
    if (has_length) return unsupported("pattern with minLength or maxLength", ptr);
    pattern_compiler pc(s["pattern"].get_ref<const std::string&>(), ptr, options.max_bound);
    auto body = pc.run(rules.prim("char"));
    if (!body) return std::move(body).err();
    return rules.add(std::string(hint) + "-string", quote + " " + *body + " " + quote);
  }
  if (!has_length) return rules.prim("string");
  const std::uint32_t lo = min->value_or(0);
  if (max->has_value() && **max < lo) return malformed("minLength is above maxLength", ptr);
  const std::string rep = "{" + std::to_string(lo) + "," + (max->has_value() ? std::to_string(**max) : "") + "}";
  return rules.add(std::string(hint) + "-string", quote + " " + rules.prim("char") + rep + " " + quote);
}

result<std::string> integer_rule(rule_set& rules, const json& s, const std::string& ptr, std::string_view hint) {
  auto bounds = integer_bounds(s, ptr);
  if (!bounds) return std::move(bounds).err();
  auto [lo, hi] = *bounds;
  if (const auto f = s.find("format"); f != s.end()) {
    if (*f == "int32") {
      lo = std::max<std::int64_t>(lo.value_or(INT32_MIN), INT32_MIN);
      hi = std::min<std::int64_t>(hi.value_or(INT32_MAX), INT32_MAX);
      if (*lo > *hi) return malformed("no int32 lies between minimum and maximum", ptr);
    } else if (*f != "int64") {  // int64: every integer of at most 16 digits fits
      return unsupported("format '" + f->dump() + "' on integers", ptr);
    }
  }
  if (!lo && !hi) return rules.prim("integer");
  std::vector<std::string> alts;
  if (!hi || *hi >= 0) {
    const auto from = static_cast<std::uint64_t>(std::max<std::int64_t>(lo.value_or(0), 0));
    alts.push_back(hi ? uint_range(from, static_cast<std::uint64_t>(*hi)) : uint_at_least(from));
  }
  if (!lo || *lo < 0) {
    const auto from = static_cast<std::uint64_t>(hi && *hi < 0 ? -*hi : 1);
    alts.push_back("\"-\" " + group({lo ? uint_range(from, static_cast<std::uint64_t>(-*lo)) : uint_at_least(from)}));
  }
  return rules.add(std::string(hint) + "-int", group(alts));
}

result<std::string> number_rule(rule_set& rules, const json& s, const std::string& ptr, std::string_view hint) {
  for (const char* key : {"exclusiveMinimum", "exclusiveMaximum"}) {
    if (s.contains(key)) return unsupported(std::string(key) + " on numbers", ptr);
  }
  auto mn = number_keyword(s, "minimum", ptr);
  if (!mn) return std::move(mn).err();
  auto mx = number_keyword(s, "maximum", ptr);
  if (!mx) return std::move(mx).err();
  if (const auto f = s.find("format"); f != s.end() && *f != "double" && *f != "float") {
    return unsupported("format '" + f->dump() + "' on numbers", ptr);
  }
  if (!*mn && !*mx) return rules.prim("number");
  // Integer bounds only: a bound then splits the integer part exactly, the fraction being free
  // below the bound and zero at it. No exponent, which would move the point.
  const double limit = static_cast<double>(max_magnitude);
  for (const auto& v : {*mn, *mx}) {
    if (v && (std::floor(*v) != *v || std::fabs(*v) > limit)) return unsupported("non-integer minimum or maximum on numbers", ptr);
  }
  // Absent bounds as sentinels (plain integers keep GCC's maybe-uninitialized analysis quiet).
  constexpr std::uint64_t unbounded = UINT64_MAX;
  const bool has_lo = mn->has_value(), has_hi = mx->has_value();
  const auto lo = has_lo ? static_cast<std::int64_t>(**mn) : std::int64_t{0};
  const auto hi = has_hi ? static_cast<std::int64_t>(**mx) : std::int64_t{0};
  if (has_lo && has_hi && lo > hi) return malformed("minimum is above maximum", ptr);
  const std::string frac = R"(( "." [0-9]{1,16} )?)", zero = R"(( "." "0"{1,16} )?)";
  // Magnitudes m with from <= m <= to.
  auto magnitudes = [&](std::uint64_t from, std::uint64_t to) {
    if (to == unbounded) return uint_at_least(from) + " " + frac;
    std::vector<std::string> alts;
    if (to > from) alts.push_back(uint_range(from, to - 1) + " " + frac);
    alts.push_back(gbnf_literal(std::to_string(to)) + " " + zero);
    return group(alts);
  };
  std::vector<std::string> alts;
  if (!has_hi || hi >= 0) {
    const auto from = static_cast<std::uint64_t>(has_lo && lo > 0 ? lo : 0);
    alts.push_back(magnitudes(from, has_hi ? static_cast<std::uint64_t>(hi) : unbounded));
  }
  if (!has_lo || lo < 0) {
    const auto from = static_cast<std::uint64_t>(has_hi && hi < 0 ? -hi : 0);
    alts.push_back("\"-\" " + group({magnitudes(from, has_lo ? static_cast<std::uint64_t>(-lo) : unbounded)}));
  }
  return rules.add(std::string(hint) + "-number", group(alts));
}

std::string key_excluding(rule_set& rules, const std::vector<std::string>& keys) {
  const std::string keychar = R"([^"\\\x00-\x1F])";
  // A trie of the excluded keys; each node's rule continues a key that matches so far.
  struct node {
    std::map<char32_t, std::unique_ptr<node>> children;
    bool terminal = false;
  };
  node root;
  for (const auto& k : keys) {
    node* n = &root;
    bool writable = true;
    std::vector<char32_t> cps;
    for (std::size_t i = 0; i < k.size();) {
      const char32_t c = next_cp(k, i);
      if (c == invalid_cp || c < 0x20 || c == '"' || c == '\\') writable = false;
      cps.push_back(c);
    }
    if (!writable) continue;  // such a key cannot be spelled without escapes anyway
    for (const char32_t c : cps) {
      auto& child = n->children[c];
      if (!child) child = std::make_unique<node>();
      n = child.get();
    }
    n->terminal = true;
  }
  auto build = [&](auto&& self, const node& n) -> std::string {
    std::vector<std::string> alts;
    if (!n.terminal) alts.push_back(quote);
    std::string others = R"([^"\\\x00-\x1F)";
    for (const auto& [c, child] : n.children) {
      std::string lit;
      append_gbnf_char(lit, c, false);
      alts.push_back("\"" + lit + "\" " + self(self, *child));
      append_gbnf_char(others, c, true);
    }
    alts.push_back(others + "] " + keychar + "* " + quote);
    return rules.add("key", join(alts, " | "));
  };
  return rules.add("key", quote + " " + build(build, root));
}

}  // namespace spite::grammar::detail
