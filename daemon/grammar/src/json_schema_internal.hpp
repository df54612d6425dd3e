// Shared by the two halves of the JSON-schema compiler: structure (json_schema.cpp: types,
// objects, arrays, combinators, references) and text (json_schema_text.cpp: primitive rules,
// strings, formats, patterns, integer ranges).
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "spite/core/result.hpp"
#include "spite/grammar/json_schema.hpp"

namespace spite::grammar::detail {

using json = nlohmann::ordered_json;

// "unsupported JSON-schema feature 'what' at /ptr" (errc::unsupported).
error unsupported(std::string_view feature, const std::string& ptr);
// "invalid JSON schema at /ptr: what" (errc::invalid_argument).
error malformed(std::string_view what, const std::string& ptr);
// A key as a JSON-pointer segment ('~' -> "~0", '/' -> "~1"), with the leading '/'.
std::string pointer_segment(std::string_view key);

// The rules being written: unique names, identical bodies shared, the fixed primitive rules
// (ws, value, string, ...) added on first use.
class rule_set {
 public:
  rule_set();
  // A fresh name derived from `hint` (property or definition name), for a body given later.
  std::string reserve(std::string_view hint);
  void define(const std::string& name, std::string body);
  // A rule with this body: an existing one with the same body, or a new one named after `hint`.
  std::string add(std::string_view hint, std::string body);
  // One of the fixed rules: ws value object array string char number integer boolean null.
  std::string prim(std::string_view name);
  // The whole grammar, "root ::= <root_body>" first.
  std::string text(const std::string& root_body) const;

 private:
  std::vector<std::pair<std::string, std::string>> rules_;  // name, body, in definition order
  std::unordered_map<std::string, std::string> by_body_;
  std::set<std::string> names_;
  std::set<std::string> prims_;  // primitive rules already written
};

// "a | b" and its parenthesized form ("\"\"" for no alternative, the one for one).
inline std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

inline std::string group(const std::vector<std::string>& alts) {
  if (alts.empty()) return "\"\"";
  if (alts.size() == 1) return alts[0];
  return "( " + join(alts, " | ") + " )";
}

// The GBNF literal of a value's compact JSON text ("\"a\"", "1", "null", "{\"k\":1}").
std::string json_literal(const json& value);

// Rules for the values of one type, `s` being the schema (already known to allow the type).
result<std::string> string_rule(rule_set& rules, const json& s, const std::string& ptr, std::string_view hint,
                                const schema_options& options);
result<std::string> integer_rule(rule_set& rules, const json& s, const std::string& ptr, std::string_view hint);
result<std::string> number_rule(rule_set& rules, const json& s, const std::string& ptr, std::string_view hint);
// The inside of a JSON string matching a regular expression (JSON Schema's unanchored
// semantics; `any_char`: the rule for one string character, for the unanchored ends). Features
// beyond the subset are refused as "pattern <feature>" at ptr + "/pattern".
result<std::string> pattern_body(std::string_view pattern, const std::string& ptr, std::uint32_t max_bound,
                                 const std::string& any_char);
// A JSON string that is none of `keys` (object keys beside the declared ones), without escapes
// so that no escaped spelling of a declared key can slip through.
std::string key_excluding(rule_set& rules, const std::vector<std::string>& keys);

}  // namespace spite::grammar::detail
