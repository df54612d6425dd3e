// The parser's output before compilation: rules as lists of alternatives, each a list of
// symbols, plus where each rule was defined and first referenced (for error positions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/grammar/grammar.hpp"

namespace spite::grammar::detail {

struct draft_symbol {
  bool is_rule = false;
  std::uint32_t index = 0;  // rule id or class id
};

struct draft_rule {
  std::string name;
  std::vector<std::vector<draft_symbol>> alts;
  bool defined = false;
  bool helper = false;        // made by the parser for a group or a repetition
  std::size_t defined_at = 0;  // byte offset of the definition (user rules)
  std::size_t used_at = 0;     // byte offset of the first reference
};

struct draft {
  std::vector<draft_rule> rules;
  std::vector<char_class> classes;
  std::map<std::vector<std::pair<char32_t, char32_t>>, std::uint32_t> class_ids;  // interning
};

// "3:14": the line and column (in characters) of byte offset `at` of `text`.
std::string line_col(std::string_view text, std::size_t at);
// "gbnf 3:14: what" with the line and column (in characters) of byte offset `at` of `text`.
error error_at(std::string_view text, std::size_t at, const std::string& what);

// Checks (undefined rules, unproductive root, left recursion) and flattens into a grammar.
result<std::shared_ptr<const grammar>> compile(draft&& d, std::string_view text, std::string_view root,
                                               const limits& lim);

}  // namespace spite::grammar::detail
