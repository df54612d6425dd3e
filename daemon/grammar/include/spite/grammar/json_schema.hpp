// JSON schema -> GBNF, for the API's response_format (json_schema, json_object) and tool calls.
//
// Fail closed: a keyword that constrains values and cannot be enforced is refused with
// errc::unsupported, "unsupported JSON-schema feature 'patternProperties' at /properties/x", never
// accepted and ignored. Annotations (title, description, default, examples, ...) are ignored.
//
// What is enforced: type (and arrays of types), nullable, enum, const; objects: properties in
// their declared order, required (optional properties may be left out), additionalProperties
// (false / true / a schema; absent means none when properties are listed, any otherwise);
// arrays: items, prefixItems (and the older items-array with additionalItems), minItems,
// maxItems; strings: minLength, maxLength, pattern (anchored or not; literals, classes, groups,
// alternation, ? * + {m,n}), format date / time / date-time / uuid; integers: minimum, maximum,
// exclusiveMinimum, exclusiveMaximum; numbers: the same bounds when they are integers (no
// exponent then); anyOf, oneOf (as anyOf: exclusivity between overlapping
// branches is not checked), allOf (merged), $ref to #/$defs, #/definitions or any local
// pointer, recursion included.
//
// The grammar generates a subset of what the schema accepts, chosen to keep small models on
// track: at most a little whitespace between tokens, numbers of at most 16 digits, no duplicate
// keys, extra keys without escapes, and property order as declared.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "spite/core/result.hpp"
#include "spite/grammar/grammar.hpp"

namespace spite::grammar {

struct schema_options {
  std::size_t max_depth = 64;          // schemas nested in schemas
  std::size_t max_schema_bytes = std::size_t{1} << 20;  // for the text overload
  std::uint32_t max_bound = 10000;     // largest minItems/maxItems/minLength/maxLength/{m,n} enforced
  std::size_t max_expansions = 20000;  // schemas visited, counting those allOf / anyOf / $ref combine:
                                       // a few lines of allOf over $ref can otherwise double per level
};

// GBNF text with a rule "root" for the values the schema accepts. Property order is kept, hence
// ordered_json; errc::unsupported for features that cannot be enforced, errc::invalid_argument
// for malformed schemas.
result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, const schema_options& options = {});
// The same from schema text (parsed keeping the property order). A distinct name, because a
// std::string would otherwise convert silently to a JSON string value.
result<std::string> json_schema_text_to_gbnf(std::string_view schema_text, const schema_options& options = {});

// GBNF for any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();

// Both, compiled.
result<std::shared_ptr<const grammar>> json_schema_grammar(const nlohmann::ordered_json& schema,
                                                          const schema_options& options = {});
result<std::shared_ptr<const grammar>> json_object_grammar();

}  // namespace spite::grammar
