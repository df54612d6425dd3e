// A context-free grammar in GBNF, the notation llama.cpp's users write grammars in, compiled into
// the flat form the matcher walks. Grammars come from requests, so everything is bounded (input
// size, rules, symbols after expanding repetitions, nesting) and every problem is an error with
// its line and column, never a crash.
//
//   auto g = grammar::parse(R"(root ::= "yes" | "no")");   // result<std::shared_ptr<const grammar>>
//
// Syntax: rules `name ::= alternatives`, one per line (a rule continues on the next line after
// `::=`, after `|` and inside parentheses); alternatives separated by `|`; a sequence of
// "literals" (escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH), [classes] and [^negated] (the same
// escapes plus \] \[ \- \^), `.` (any character), rule names and (groups), each optionally
// followed by * + ? {m} {m,} {m,n}. `#` starts a comment.
//
// Compiled form: every alternative is a run of symbols in one array, ended by an `end` symbol; a
// rule is the list of the positions its alternatives start at. Repetitions and groups become
// helper rules, right-recursive so that the matcher's stacks do not grow with repetition counts.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spite/core/result.hpp"

namespace spite::grammar {

struct limits {
  std::size_t max_input_bytes = std::size_t{1} << 20;  // GBNF text
  std::size_t max_rules = 100000;                      // counting the helper rules repetitions create
  std::size_t max_symbols = std::size_t{1} << 21;      // after expanding repetitions
  std::size_t max_nesting = 64;                        // parentheses inside parentheses
  std::uint32_t max_repeat = 10000;                    // the bounds of {m,n}
};

// A set of Unicode code points, as sorted, disjoint, inclusive ranges.
class char_class {
 public:
  char_class() = default;
  // Normalizes: sorts and merges the ranges, complements them when `negated`.
  char_class(std::vector<std::pair<char32_t, char32_t>> ranges, bool negated);

  bool contains(char32_t c) const noexcept {
    if (c < 128) return ((ascii_[c >> 6] >> (c & 63)) & 1) != 0;
    return contains_slow(c);
  }
  // Whether some code point in [lo, hi] belongs to the set (a UTF-8 character not complete yet).
  bool intersects(char32_t lo, char32_t hi) const noexcept;
  bool empty() const noexcept { return ranges_.empty(); }
  const std::vector<std::pair<char32_t, char32_t>>& ranges() const noexcept { return ranges_; }
  bool operator==(const char_class& o) const noexcept { return ranges_ == o.ranges_; }

 private:
  bool contains_slow(char32_t c) const noexcept;
  std::vector<std::pair<char32_t, char32_t>> ranges_;
  std::array<std::uint64_t, 2> ascii_{};  // the ASCII part as a bitmap: most text is ASCII
};

struct symbol {
  enum class kind : std::uint8_t { end, rule, chars };
  kind type = kind::end;
  std::uint32_t index = 0;  // rule id (rule) or char class id (chars)
};

class grammar {
 public:
  // Parses and compiles. Errors (errc::invalid_argument) read "gbnf 3:14: <problem>" and cover
  // syntax, undefined and duplicate rules, left recursion (which a top-down matcher cannot run),
  // a root that can never finish, and every limit.
  static result<std::shared_ptr<const grammar>> parse(std::string_view text, std::string_view root = "root",
                                                      const limits& lim = {});

  std::uint32_t root() const noexcept { return root_; }
  std::size_t rule_count() const noexcept { return rule_names_.size(); }
  const std::string& rule_name(std::uint32_t rule) const { return rule_names_.at(rule); }
  // Where the alternatives of `rule` start in symbols(); a rule has at least one.
  std::span<const std::uint32_t> alternatives(std::uint32_t rule) const {
    return {alt_starts_.data() + rule_alts_[rule], alt_starts_.data() + rule_alts_[rule + 1]};
  }
  std::span<const symbol> symbols() const noexcept { return symbols_; }
  const char_class& chars(std::uint32_t id) const { return classes_[id]; }
  std::size_t class_count() const noexcept { return classes_.size(); }

  // The compiled grammar written back as GBNF (helper rules included), for logs and debugging.
  std::string to_string() const;

 private:
  friend class compiler;
  std::vector<std::string> rule_names_;
  std::vector<std::uint32_t> rule_alts_;   // rule r owns alt_starts_[rule_alts_[r] .. rule_alts_[r+1])
  std::vector<std::uint32_t> alt_starts_;  // positions in symbols_
  std::vector<symbol> symbols_;
  std::vector<char_class> classes_;
  std::uint32_t root_ = 0;
};

// Whether the whole of `text` (UTF-8) is a sentence of the grammar.
bool matches(const std::shared_ptr<const grammar>& g, std::string_view text);

}  // namespace spite::grammar
