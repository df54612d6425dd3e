// GBNF text -> draft rules. A hand-written recursive-descent parser: one function per construct,
// the first error wins and carries its line and column.
#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>

#include "draft.hpp"
#include "utf8.hpp"

namespace spite::grammar {

namespace {

using detail::draft;
using detail::draft_rule;
using detail::draft_symbol;

constexpr std::uint32_t unbounded = 0xFFFFFFFF;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class parser {
 public:
  parser(std::string_view text, const limits& lim, draft& d) : src_(text), lim_(lim), d_(d) {}

  bool run() {
    skip_space(true);
    while (!failed() && !eof()) {
      if (!parse_rule()) return false;
      skip_space(true);
    }
    if (!failed() && d_.rules.empty()) return fail(0, "the grammar has no rules");
    return !failed();
  }

  std::optional<error>& err() { return err_; }

 private:
  bool eof() const { return pos_ >= src_.size(); }
  char peek(std::size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }
  bool failed() const { return err_.has_value(); }

  bool fail(std::size_t at, const std::string& what) {
    if (!err_) err_ = detail::error_at(src_, at, what);
    return false;
  }

  // Spaces, tabs, carriage returns and comments; newlines too where a rule may continue.
  void skip_space(bool newlines) {
    while (!eof()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (c == '\n' && newlines) {
        ++pos_;
      } else if (c == '#') {
        while (!eof() && peek() != '\n') ++pos_;
      } else {
        return;
      }
    }
  }

  // After a sequence ended at a newline: a continuation line that starts with '|' goes on with
  // the same rule (a rule can never start with '|', so this is unambiguous).
  bool continues_with_bar() {
    const std::size_t save = pos_;
    skip_space(true);
    if (peek() == '|') return true;
    pos_ = save;
    return false;
  }

  std::string parse_name() {
    const std::size_t start = pos_;
    while (!eof() && is_name_char(peek())) ++pos_;
    return std::string(src_.substr(start, pos_ - start));
  }

  std::optional<std::uint32_t> new_rule(std::string name, bool helper, std::size_t at) {
    if (d_.rules.size() >= lim_.max_rules) {
      fail(at, "more than " + std::to_string(lim_.max_rules) + " rules (repetitions and groups count too)");
      return std::nullopt;
    }
    draft_rule r;
    r.name = std::move(name);
    r.helper = helper;
    r.used_at = at;
    d_.rules.push_back(std::move(r));
    return static_cast<std::uint32_t>(d_.rules.size() - 1);
  }

  std::optional<std::uint32_t> rule_id(const std::string& name, std::size_t at) {
    if (const auto it = ids_.find(name); it != ids_.end()) return it->second;
    auto id = new_rule(name, false, at);
    if (id) ids_.emplace(name, *id);
    return id;
  }

  std::optional<std::uint32_t> helper_rule(std::uint32_t parent, std::size_t at) {
    const std::string name = d_.rules[parent].name + "_" + std::to_string(++helpers_[parent]);
    return new_rule(name, true, at);
  }

  bool count_symbols(std::size_t n, std::size_t at) {
    symbols_ += n;
    if (symbols_ > lim_.max_symbols) {
      return fail(at, "the grammar grows beyond " + std::to_string(lim_.max_symbols) + " symbols (repetition bounds too large?)");
    }
    return true;
  }

  bool add_alt(std::uint32_t rule, std::vector<draft_symbol> seq, std::size_t at) {
    if (!count_symbols(seq.size() + 1, at)) return false;
    d_.rules[rule].alts.push_back(std::move(seq));
    return true;
  }

  draft_symbol class_symbol(std::vector<std::pair<char32_t, char32_t>> ranges, bool negated) {
    char_class cc(std::move(ranges), negated);
    auto [it, fresh] = d_.class_ids.emplace(cc.ranges(), static_cast<std::uint32_t>(d_.classes.size()));
    if (fresh) d_.classes.push_back(std::move(cc));
    return {false, it->second};
  }

  bool parse_rule() {
    const std::size_t start = pos_;
    const std::string name = parse_name();
    if (name.empty()) return fail(start, "expected a rule name, found '" + std::string(1, peek()) + "'");
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") return fail(pos_, "expected '::=' after the rule name '" + name + "'");
    pos_ += 3;
    skip_space(true);
    const auto id = rule_id(name, start);
    if (!id) return false;
    draft_rule& r = d_.rules[*id];
    if (r.defined) {
      return fail(start, "rule '" + name + "' is defined twice (first at " + detail::line_col(src_, r.defined_at) + ")");
    }
    r.defined = true;
    r.defined_at = start;
    if (!parse_alternatives(*id, 0)) return false;
    skip_space(false);
    if (!eof() && peek() != '\n') return fail(pos_, "unexpected '" + std::string(1, peek()) + "'");
    return true;
  }

  bool parse_alternatives(std::uint32_t rule, std::size_t depth) {
    for (;;) {
      const std::size_t at = pos_;
      std::vector<draft_symbol> seq;
      if (!parse_sequence(rule, depth, seq)) return false;
      if (!add_alt(rule, std::move(seq), at)) return false;
      if (depth == 0 && peek() == '\n' && !continues_with_bar()) return true;
      if (peek() != '|') return true;
      ++pos_;
      skip_space(true);
    }
  }

  bool parse_sequence(std::uint32_t rule, std::size_t depth, std::vector<draft_symbol>& seq) {
    std::size_t last = std::string::npos;  // where the last element (what a postfix repeats) starts
    for (;;) {
      const std::size_t at = pos_;
      const char c = peek();
      if (c == '"') {
        last = seq.size();
        if (!parse_literal(seq)) return false;
      } else if (c == '[') {
        last = seq.size();
        if (!parse_class(seq)) return false;
      } else if (c == '.') {
        ++pos_;
        last = seq.size();
        seq.push_back(class_symbol({}, true));
      } else if (is_name_char(c)) {
        last = seq.size();
        const std::string name = parse_name();
        const auto id = rule_id(name, at);
        if (!id) return false;
        seq.push_back({true, *id});
      } else if (c == '(') {
        if (depth + 1 > lim_.max_nesting) {
          return fail(at, "parentheses nested deeper than " + std::to_string(lim_.max_nesting));
        }
        ++pos_;
        skip_space(true);
        const auto group = helper_rule(rule, at);
        if (!group || !parse_alternatives(*group, depth + 1)) return false;
        if (peek() != ')') return fail(pos_, eof() ? "missing ')' for the '(' at " + where(at) : "expected ')'");
        ++pos_;
        last = seq.size();
        seq.push_back({true, *group});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last == std::string::npos || last == seq.size()) {
          return fail(at, std::string("'") + c + "' has nothing to repeat");
        }
        std::uint32_t lo = 0, hi = unbounded;
        if (c == '*') {
          ++pos_;
        } else if (c == '+') {
          ++pos_;
          lo = 1;
        } else if (c == '?') {
          ++pos_;
          hi = 1;
        } else if (!parse_bounds(lo, hi)) {
          return false;
        }
        if (!repeat(rule, seq, last, lo, hi, at)) return false;
      } else {
        return true;
      }
      skip_space(depth > 0);
    }
  }

  std::string where(std::size_t at) const { return detail::line_col(src_, at); }

  bool parse_bounds(std::uint32_t& lo, std::uint32_t& hi) {
    const std::size_t at = pos_;
    ++pos_;  // '{'
    auto number = [&](std::uint32_t& out) {
      skip_space(false);
      const std::size_t start = pos_;
      std::uint64_t v = 0;
      while (!eof() && peek() >= '0' && peek() <= '9') {
        v = v * 10 + static_cast<std::uint64_t>(peek() - '0');
        if (v > lim_.max_repeat) return fail(start, "repetition bound above " + std::to_string(lim_.max_repeat));
        ++pos_;
      }
      if (pos_ == start) return fail(start, "expected a number in the repetition bounds");
      out = static_cast<std::uint32_t>(v);
      skip_space(false);
      return true;
    };
    if (!number(lo)) return false;
    if (peek() == '}') {
      hi = lo;
    } else if (peek() == ',') {
      ++pos_;
      skip_space(false);
      if (peek() != '}' && !number(hi)) return false;
    } else {
      return fail(pos_, "expected ',' or '}' in the repetition bounds");
    }
    if (peek() != '}') return fail(pos_, "expected '}' to close the repetition bounds");
    ++pos_;
    if (hi < lo) return fail(at, "repetition bounds {" + std::to_string(lo) + "," + std::to_string(hi) + "}: max below min");
    return true;
  }

  // Rewrites seq[last..] as the repetition {lo, hi}: lo copies, then right-recursive helper
  // rules (x* -> R ::= x R | ""; at most k more -> R_k ::= x R_{k-1} | ""), so the matcher pops
  // each helper before entering the next and its stacks stay flat.
  bool repeat(std::uint32_t rule, std::vector<draft_symbol>& seq, std::size_t last, std::uint32_t lo,
              std::uint32_t hi, std::size_t at) {
    const std::vector<draft_symbol> item(seq.begin() + static_cast<std::ptrdiff_t>(last), seq.end());
    seq.resize(last);
    if (!count_symbols(item.size() * lo, at)) return false;
    for (std::uint32_t i = 0; i < lo; ++i) seq.insert(seq.end(), item.begin(), item.end());
    if (hi == unbounded) {
      const auto star = helper_rule(rule, at);
      if (!star) return false;
      std::vector<draft_symbol> more = item;
      more.push_back({true, *star});
      if (!add_alt(*star, std::move(more), at) || !add_alt(*star, {}, at)) return false;
      seq.push_back({true, *star});
      return true;
    }
    std::optional<std::uint32_t> next;
    for (std::uint32_t k = lo; k < hi; ++k) {
      const auto opt = helper_rule(rule, at);
      if (!opt) return false;
      std::vector<draft_symbol> more = item;
      if (next) more.push_back({true, *next});
      if (!add_alt(*opt, std::move(more), at) || !add_alt(*opt, {}, at)) return false;
      next = opt;
    }
    if (next) seq.push_back({true, *next});
    return true;
  }

  // One character of a literal or class, escapes decoded; invalid_cp after an error.
  char32_t parse_char(bool in_class) {
    const std::size_t at = pos_;
    if (src_[pos_] != '\\') {
      const char32_t cp = detail::next_cp(src_, pos_);
      if (cp == detail::invalid_cp) fail(at, "invalid UTF-8");
      return cp;
    }
    ++pos_;
    if (eof()) {
      fail(at, "'\\' at the end of the input");
      return detail::invalid_cp;
    }
    const char e = src_[pos_++];
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/': return static_cast<char32_t>(e);
      case 'x': case 'u': case 'U': {
        const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        char32_t v = 0;
        for (int i = 0; i < digits; ++i) {
          const int h = hex_value(peek());
          if (h < 0) {
            fail(at, std::string("'\\") + e + "' needs " + std::to_string(digits) + " hex digits");
            return detail::invalid_cp;
          }
          v = v * 16 + static_cast<char32_t>(h);
          ++pos_;
        }
        if (v > 0x10FFFF) {
          fail(at, "code point above U+10FFFF");
          return detail::invalid_cp;
        }
        return v;
      }
      default:
        fail(at, std::string("unknown escape '\\") + e + "'" + (in_class ? " in a character class" : ""));
        return detail::invalid_cp;
    }
  }

  bool parse_literal(std::vector<draft_symbol>& seq) {
    const std::size_t start = pos_++;
    std::vector<draft_symbol> chars;
    while (peek() != '"') {
      if (eof() || peek() == '\n') return fail(start, "unterminated string literal");
      const char32_t cp = parse_char(false);
      if (cp == detail::invalid_cp) return false;
      chars.push_back(class_symbol({{cp, cp}}, false));
    }
    ++pos_;
    seq.insert(seq.end(), chars.begin(), chars.end());
    return true;
  }

  bool parse_class(std::vector<draft_symbol>& seq) {
    const std::size_t start = pos_++;
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<std::pair<char32_t, char32_t>> ranges;
    while (peek() != ']') {
      if (eof() || peek() == '\n') return fail(start, "unterminated character class");
      const std::size_t at = pos_;
      const char32_t lo = parse_char(true);
      if (lo == detail::invalid_cp) return false;
      char32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
        ++pos_;
        if (peek() == '\n') return fail(start, "unterminated character class");
        hi = parse_char(true);
        if (hi == detail::invalid_cp) return false;
        if (hi < lo) return fail(at, "character range out of order");
      }
      ranges.emplace_back(lo, hi);
    }
    ++pos_;
    if (ranges.empty()) return fail(start, "empty character class");
    seq.push_back(class_symbol(std::move(ranges), negated));
    return true;
  }

  std::string_view src_;
  const limits& lim_;
  draft& d_;
  std::size_t pos_ = 0;
  std::size_t symbols_ = 0;
  std::optional<error> err_;
  std::unordered_map<std::string, std::uint32_t> ids_;
  std::unordered_map<std::uint32_t, std::uint32_t> helpers_;  // helper rules made per rule, for names
};

}  // namespace

namespace detail {

std::string line_col(std::string_view text, std::size_t at) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++column;  // count characters, not UTF-8 continuation bytes
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

error error_at(std::string_view text, std::size_t at, const std::string& what) {
  return make_error(errc::invalid_argument, "gbnf " + line_col(text, at) + ": " + what);
}

}  // namespace detail

result<std::shared_ptr<const grammar>> grammar::parse(std::string_view text, std::string_view root, const limits& lim) {
  if (text.size() > lim.max_input_bytes) {
    return make_error(errc::invalid_argument, "gbnf: the grammar is " + std::to_string(text.size()) +
                                                  " bytes, more than the limit of " + std::to_string(lim.max_input_bytes));
  }
  draft d;
  parser p(text, lim, d);
  if (!p.run()) return std::move(*p.err());
  return detail::compile(std::move(d), text, root, lim);
}

}  // namespace spite::grammar
