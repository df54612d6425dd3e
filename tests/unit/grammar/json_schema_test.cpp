// JSON schema -> grammar: for each schema, texts the grammar must accept and texts it must not;
// features that cannot be enforced must be refused with their name and JSON pointer.
#include <catch2/catch.hpp>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "spite/grammar/json_schema.hpp"
#include "spite/grammar/matcher.hpp"

using namespace spite::grammar;

namespace {

std::shared_ptr<const grammar> schema_grammar(const std::string& schema) {
  INFO("schema: " << schema);
  auto text = json_schema_text_to_gbnf(schema);
  if (!text) FAIL(text.err().message);
  INFO("gbnf:\n" << *text);
  auto g = grammar::parse(*text);
  if (!g) FAIL(g.err().message);
  return *g;
}

void check_schema(const std::string& schema, const std::vector<std::string>& good, const std::vector<std::string>& bad) {
  const auto g = schema_grammar(schema);
  INFO("schema: " << schema << "\ngbnf:\n" << *json_schema_text_to_gbnf(schema));
  for (const auto& text : good) {
    INFO("must match: " << text);
    CHECK(matches(g, text));
  }
  for (const auto& text : bad) {
    INFO("must not match: " << text);
    CHECK_FALSE(matches(g, text));
  }
}

std::string refusal(const std::string& schema) {
  auto text = json_schema_text_to_gbnf(schema);
  INFO("schema: " << schema);
  REQUIRE_FALSE(text.ok());
  return text.err().message;
}

}  // namespace

TEST_CASE("schema: primitive types and arrays of types", "[grammar][schema]") {
  check_schema(R"({"type":"string"})", {R"("")", R"("a b")", R"("\u00e9\n\"")", R"("ü")"},
               {R"(a)", R"("\ud800")", "\"\x01\"", R"(1)", R"("\q")"});
  check_schema(R"({"type":"integer"})", {"0", "-12", "1234567890123456"}, {"01", "1.5", "1e3", "12345678901234567", "-"});
  check_schema(R"({"type":"number"})", {"0", "-1.25", "3e10", "2.5E-3"}, {".5", "1.", "NaN", "1e999"});
  check_schema(R"({"type":"boolean"})", {"true", "false"}, {"True", "1"});
  check_schema(R"({"type":"null"})", {"null"}, {"nil", ""});
  check_schema(R"({"type":["integer","null"]})", {"7", "null"}, {"\"7\"", "true"});
  check_schema(R"({"type":"string","nullable":true})", {R"("x")", "null"}, {"1"});
  check_schema(R"({})", {R"({"a":[1,{"b":null}]})", "1", "\"s\"", "[]"}, {"", "{a:1}"});
  check_schema(R"(true)", {"[true]"}, {"tru"});
}

TEST_CASE("schema: objects with required, optional and additional properties", "[grammar][schema]") {
  const std::string person = R"({"type":"object","properties":{
      "name":{"type":"string"}, "age":{"type":"integer"}, "email":{"type":"string"}},
      "required":["name","age"]})";
  check_schema(person,
               {R"({"name":"Ann","age":3})", R"({"name":"Ann","age":3,"email":"a@b"})", "{\n  \"name\": \"Ann\",\n  \"age\": 3\n}",
                R"({ "name" : "A" , "age" : -1 })"},
               {R"({"name":"Ann"})", R"({"age":3,"name":"Ann"})", R"({"name":"Ann","age":"3"})", R"({"name":"Ann","age":3,"x":1})",
                R"({"name":"Ann","age":3,})", R"({"name":"Ann","age":3,"email":"a","email":"b"})",
                "{\"name\":\"Ann\",      \"age\":3}"});
  // All optional: any subset, in declared order, commas right.
  check_schema(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}}})",
               {"{}", R"({"b":2})", R"({"a":1,"c":3})", R"({"a":1,"b":2,"c":3})"},
               {R"({,"b":2})", R"({"b":2,})", R"({"c":3,"a":1})", R"({"a":1 "b":2})"});
  // Extra keys: any key but the declared ones, values per the schema.
  check_schema(R"({"type":"object","properties":{"id":{"type":"integer"}},"additionalProperties":{"type":"string"}})",
               {R"({})", R"({"id":1})", R"({"id":1,"x":"y","ide":"z"})", R"({"i":"z"})"},
               {R"({"id":1,"id":"2"})", R"({"id":1,"x":2})", R"({"x":"y","id":1})", R"({"\u0069d":"2"})"});
  // No properties: any object.
  check_schema(R"({"type":"object"})", {R"({})", R"({"k":[1,2]})"}, {"[]"});
  // Required without a schema for it.
  check_schema(R"({"type":"object","required":["k"],"additionalProperties":false})", {R"({"k":[]})"}, {R"({})"});
  // Keys that need escaping.
  check_schema(R"({"type":"object","properties":{"a\"b/c":{"const":1}},"required":["a\"b/c"]})", {R"({"a\"b/c":1})"},
               {R"({"a\"b/c":2})"});
}

TEST_CASE("schema: arrays (items, prefixItems, minItems, maxItems)", "[grammar][schema]") {
  check_schema(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
               {"[1]", "[1, 2]", "[1,2,3]", "[ 1 ]"}, {"[]", "[1,2,3,4]", "[1,]", "[\"1\"]"});
  check_schema(R"({"type":"array","items":{"type":"boolean"}})", {"[]", "[true,false,true]"}, {"[1]"});
  check_schema(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
               {"[]", R"(["a"])", R"(["a",1])"}, {R"(["a",1,2])", R"([1])"});
  check_schema(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"minItems":2,"items":{"type":"null"}})",
               {R"(["a",1])", R"(["a",1,null,null])"}, {R"(["a"])", R"(["a",1,2])"});
  check_schema(R"({"type":"array","items":[{"type":"integer"}],"additionalItems":false})", {"[]", "[1]"}, {"[1,2]"});
  check_schema(R"({"type":"array","maxItems":0})", {"[]", "[ ]"}, {"[1]"});
}

TEST_CASE("schema: enum, const, anyOf, oneOf, allOf", "[grammar][schema]") {
  check_schema(R"({"enum":["red","green",3,null,{"a":1}]})", {R"("red")", "3", "null", R"({"a":1})"}, {R"("blue")", "4"});
  check_schema(R"({"type":"string","enum":["a","b",1]})", {R"("a")"}, {"1"});
  check_schema(R"({"const":"fixed"})", {R"("fixed")"}, {R"("other")"});
  check_schema(R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})", {"5", R"("ab")"}, {R"("abc")", "true"});
  check_schema(R"({"oneOf":[{"type":"object","properties":{"k":{"const":"a"},"x":{"type":"integer"}},"required":["k","x"]},
                            {"type":"object","properties":{"k":{"const":"b"},"y":{"type":"string"}},"required":["k","y"]}]})",
               {R"({"k":"a","x":1})", R"({"k":"b","y":"s"})"}, {R"({"k":"a","y":"s"})"});
  check_schema(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                            {"properties":{"b":{"type":"string"}},"required":["b"]}]})",
               {R"({"a":1,"b":"x"})"}, {R"({"a":1})", R"({"b":"x"})"});
  // Keywords beside anyOf apply to every branch.
  check_schema(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],
                   "anyOf":[{"properties":{"b":{"type":"integer"}},"required":["b"]},{"properties":{"c":{"type":"integer"}},"required":["c"]}]})",
               {R"({"a":1,"b":2})", R"({"a":1,"c":2})"}, {R"({"a":1})", R"({"b":2})"});
}

TEST_CASE("schema: $ref to $defs and definitions, with recursion", "[grammar][schema]") {
  const std::string tree = R"({"$defs":{"node":{"type":"object","properties":{
      "value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["value"]}},"$ref":"#/$defs/node"})";
  check_schema(tree, {R"({"value":1})", R"({"value":1,"children":[]})", R"({"value":1,"children":[{"value":2,"children":[{"value":3}]}]})"},
               {R"({"value":1,"children":[{}]})", R"({"children":[]})"});
  check_schema(R"({"definitions":{"id":{"type":"string","format":"uuid"}},"type":"object",
                   "properties":{"a":{"$ref":"#/definitions/id"},"b":{"$ref":"#/definitions/id"}},"required":["a"]})",
               {R"({"a":"123e4567-e89b-12d3-a456-426614174000"})"}, {R"({"a":"123e4567"})"});
  // The whole document, recursively.
  check_schema(R"({"type":"array","items":{"anyOf":[{"type":"integer"},{"$ref":"#"}]}})", {"[1,[2,[]],3]"}, {"[[x]]"});
  // $ref with siblings: both apply.
  check_schema(R"({"$defs":{"o":{"type":"object","properties":{"a":{"type":"integer"}}}},"$ref":"#/$defs/o","required":["a"]})",
               {R"({"a":1})"}, {R"({})"});
}

TEST_CASE("schema: strings (lengths, formats, patterns)", "[grammar][schema]") {
  check_schema(R"({"type":"string","minLength":2,"maxLength":3})", {R"("ab")", R"("abc")", R"("\n\u00e9")", R"("éü")"},
               {R"("a")", R"("abcd")"});
  check_schema(R"({"type":"string","format":"date"})", {R"("2024-02-29")"}, {R"("2024-13-01")", R"("24-01-01")"});
  check_schema(R"({"type":"string","format":"date-time"})", {R"("2024-02-29T13:45:00Z")", R"("2024-02-29T13:45:00.123+02:00")"},
               {R"("2024-02-29 13:45:00Z")", R"("2024-02-29T25:00:00Z")"});
  check_schema(R"({"type":"string","format":"time"})", {R"("23:59:59Z")"}, {R"("23:59")"});
  check_schema(R"({"type":"string","pattern":"^[A-Z]{2}-[0-9]{3,4}$"})", {R"("AB-123")", R"("ZZ-0000")"},
               {R"("A-123")", R"("AB-12")", R"("AB-12345")", R"("ab-123")", R"("xAB-123")"});
  check_schema(R"({"type":"string","pattern":"^(cat|dog)s?\\.$"})", {R"("cat.")", R"("dogs.")"}, {R"("cow.")", R"("cats")"});
  check_schema(R"({"type":"string","pattern":"\\d+"})", {R"("12")", R"("ab12cd")"}, {R"("abc")"});
  check_schema(R"({"type":"string","pattern":"^a\"b\\\\c[^x]$"})", {R"("a\"b\\cy")", R"("a\"b\\c\"")"}, {R"("a\"b\\cx")"});
  check_schema(R"({"type":"string","pattern":"^(?:[a-c]|\\.){2,}?$"})", {R"("ab.")"}, {R"("a")"});
}

TEST_CASE("schema: integer and number bounds", "[grammar][schema]") {
  check_schema(R"({"type":"integer","minimum":1,"maximum":12})", {"1", "9", "10", "12"}, {"0", "13", "-1", "01", "100"});
  check_schema(R"({"type":"integer","minimum":-15,"maximum":-3})", {"-15", "-3", "-10"}, {"-2", "-16", "0", "3"});
  check_schema(R"({"type":"integer","minimum":95,"maximum":1234})", {"95", "99", "100", "999", "1000", "1234", "1199"},
               {"94", "1235", "1300", "9999"});
  check_schema(R"({"type":"integer","exclusiveMinimum":0})", {"1", "100000"}, {"0", "-1"});
  check_schema(R"({"type":"integer","maximum":5})", {"5", "0", "-999"}, {"6", "10"});
  check_schema(R"({"type":"integer","minimum":10})", {"10", "99", "12345"}, {"9", "-10"});
  check_schema(R"({"type":"integer","minimum":0,"exclusiveMaximum":true,"maximum":3})", {"0", "2"}, {"3"});
  check_schema(R"({"type":"number","minimum":0,"maximum":1})", {"0", "0.5", "1", "1.0", "0.999"}, {"1.5", "-0.5", "2", "1e-3"});
  check_schema(R"({"type":"number","minimum":-2})", {"-2", "-1.5", "-0.5", "7.25"}, {"-2.5", "-3"});
  check_schema(R"({"type":"number","exclusiveMinimum":0})", {"0.5", "0.01", "3", "12.75"}, {"0", "0.0", "-1", "-0.5", "-0"});
  check_schema(R"({"type":"number","exclusiveMinimum":-1,"exclusiveMaximum":2})", {"-0.5", "0", "1.99", "-0.001"},
               {"-1", "-1.0", "2", "2.0", "2.5", "-1.5"});
  check_schema(R"({"type":"number","maximum":-3,"exclusiveMaximum":true})", {"-3.5", "-4"}, {"-3", "-3.0", "-2.5", "0"});
  check_schema(R"({"type":"number","exclusiveMaximum":0})", {"-0.5", "-3"}, {"0", "-0", "0.5"});
}

TEST_CASE("schema: features that cannot be enforced are refused by name and pointer", "[grammar][schema]") {
  CHECK(refusal(R"({"type":"object","properties":{"x":{"type":"object","patternProperties":{"^a":{}}}}})") ==
        "unsupported JSON-schema feature 'patternProperties' at /properties/x");
  CHECK(refusal(R"({"type":"array","uniqueItems":true})") == "unsupported JSON-schema feature 'uniqueItems' at /");
  CHECK(refusal(R"({"not":{"type":"string"}})") == "unsupported JSON-schema feature 'not' at /");
  CHECK(refusal(R"({"type":"number","multipleOf":2})") == "unsupported JSON-schema feature 'multipleOf' at /");
  CHECK(refusal(R"({"type":"object","properties":{"a/b":{"type":"string","format":"email"}}})") ==
        "unsupported JSON-schema feature 'format 'email'' at /properties/a~1b");
  CHECK(refusal(R"({"type":"string","pattern":"^(?=a)b$"})") ==
        "unsupported JSON-schema feature 'pattern lookahead' at /pattern");
  CHECK(refusal(R"({"items":{"type":"string","pattern":"(a)\\1"}})") ==
        "unsupported JSON-schema feature 'pattern backreference' at /items/pattern");
  CHECK(refusal(R"({"type":"string","pattern":"\\bword"})") ==
        "unsupported JSON-schema feature 'pattern word boundary '\\b'' at /pattern");
  CHECK(refusal(R"({"$ref":"https://example.com/s.json"})").find("$ref to 'https://example.com/s.json'") != std::string::npos);
  CHECK(refusal(R"({"type":"number","exclusiveMinimum":0.5})") ==
        "unsupported JSON-schema feature 'non-integer exclusiveMinimum on numbers' at /");
  CHECK(refusal(R"({"type":"array","maxItems":100000})") == "unsupported JSON-schema feature 'maxItems above 10000' at /");
  CHECK(refusal(R"({"allOf":[{"type":"string","maxLength":3},{"type":"string","maxLength":4}]})") ==
        "unsupported JSON-schema feature 'allOf members that give 'maxLength' different values' at /");
  CHECK(refusal(R"({"type":"object","if":{"required":["a"]},"then":{"required":["b"]}})") ==
        "unsupported JSON-schema feature 'if' at /");
  CHECK(refusal(R"({"type":"object","properties":{"a":{"type":"string","minLength":1,"pattern":"x"}}})") ==
        "unsupported JSON-schema feature 'pattern with minLength or maxLength' at /properties/a");
  // Bounded work: each definition is allOf of the previous one three times, 3^12 schemas inlined.
  std::string tripling = R"({"$defs":{"d0":{"type":"object","properties":{"a":{"type":"integer"}}})";
  for (int i = 1; i <= 12; ++i) {
    const std::string prev = "{\"$ref\":\"#/$defs/d" + std::to_string(i - 1) + "\"}";
    tripling += ",\"d" + std::to_string(i) + "\":{\"allOf\":[" + prev + "," + prev + "," + prev + "]}";
  }
  tripling += R"(},"$ref":"#/$defs/d12"})";
  CHECK(refusal(tripling).find("expands to more than 20000 subschemas") != std::string::npos);
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += R"({"type":"array","items":)";
  deep += "{}";
  for (int i = 0; i < 100; ++i) deep += "}";
  CHECK(refusal(deep).find("schemas nested deeper than 64") != std::string::npos);
  // Malformed schemas are errors too, of another kind.
  auto bad = json_schema_text_to_gbnf(R"({"type":"strin"})");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.err().code == spite::errc::invalid_argument);
  CHECK(bad.err().message == "invalid JSON schema at /: unknown type \"strin\"");
  CHECK(refusal(R"({"$ref":"#/$defs/missing"})") == "invalid JSON schema at /: $ref '#/$defs/missing' points nowhere");
  CHECK(refusal("{not json") == "the JSON schema is not valid JSON");
  // A schema nothing can satisfy fails when compiled, not at generation time.
  auto never = json_schema_grammar(nlohmann::ordered_json::parse(R"({"type":"object","properties":{"a":false},"required":["a"]})"));
  REQUIRE_FALSE(never.ok());
  CHECK(never.err().message.find("can never finish") != std::string::npos);
}

TEST_CASE("schema: json_object mode accepts any object and only objects", "[grammar][schema]") {
  auto g = json_object_grammar();
  REQUIRE(g.ok());
  for (const char* ok : {"{}", R"({"a":1})", "{\n  \"a\": [1, {\"b\": null}]\n}"}) CHECK(matches(*g, ok));
  for (const char* bad : {"[]", "1", "\"{}\"", "{\"a\":1", "{}x", "{        }"}) CHECK_FALSE(matches(*g, bad));
}

TEST_CASE("schema: whitespace between tokens is bounded", "[grammar][schema]") {
  const auto g = schema_grammar(R"({"type":"object","properties":{"a":{"type":"integer"}}})");
  matcher m(g);
  REQUIRE(m.accept("{"));
  int spaces = 0;
  while (spaces < 100 && m.accept(" ")) ++spaces;
  CHECK(spaces == 1);
  matcher nl(g);
  REQUIRE(nl.accept("{\n"));
  int indent = 0;
  while (indent < 100 && nl.accept(" ")) ++indent;
  CHECK(indent == 20);
}

TEST_CASE("schema: random schemas never crash the compiler", "[grammar][schema]") {
  // Schemas assembled at random from the keywords (valid or not); each either compiles to a
  // grammar, or is refused with a message of one of the two kinds.
  std::mt19937 rng(99);
  const std::vector<std::string> types = {"\"object\"", "\"array\"", "\"string\"", "\"integer\"", "\"number\"", "\"boolean\"",
                                          "\"null\"", "[\"string\",\"null\"]", "7"};
  std::function<std::string(int)> make = [&](int depth) -> std::string {
    if (depth > 3) return rng() % 2 ? "true" : R"({"type":"integer"})";
    std::string s = "{";
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n; ++k) {
      if (k > 0) s += ",";
      switch (rng() % 14) {
        case 0: s += "\"type\":" + types[rng() % types.size()]; break;
        case 1: s += "\"properties\":{\"a\":" + make(depth + 1) + ",\"b\":" + make(depth + 1) + "}"; break;
        case 2: s += "\"required\":[\"a\"]"; break;
        case 3: s += "\"items\":" + make(depth + 1); break;
        case 4: s += "\"anyOf\":[" + make(depth + 1) + "," + make(depth + 1) + "]"; break;
        case 5: s += "\"allOf\":[" + make(depth + 1) + "," + make(depth + 1) + "]"; break;
        case 6: s += "\"enum\":[1,\"x\",null]"; break;
        case 7: s += "\"minItems\":" + std::to_string(rng() % 3) + ",\"maxItems\":" + std::to_string(rng() % 4); break;
        case 8: s += "\"pattern\":\"" + std::string(rng() % 2 ? "^[a-z]{1,3}$" : "(a|b\\\\d)+") + "\""; break;
        case 9: s += "\"minimum\":" + std::to_string(static_cast<int>(rng() % 20) - 10); break;
        case 10: s += "\"maximum\":" + std::to_string(static_cast<int>(rng() % 20) - 5); break;
        case 11: s += "\"additionalProperties\":" + make(depth + 1); break;
        case 12: s += "\"$ref\":\"#\""; break;
        default: s += "\"maxLength\":" + std::to_string(rng() % 5); break;
      }
    }
    return s + "}";
  };
  int compiled = 0;
  for (int i = 0; i < 500; ++i) {
    const std::string text = make(0);
    INFO(text);
    const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
    if (schema.is_discarded()) continue;  // duplicate keys are fine for the parser; bad JSON is not ours
    auto g = json_schema_grammar(schema);
    if (!g) {
      const auto& m = g.err().message;
      CHECK((m.rfind("unsupported JSON-schema feature", 0) == 0 || m.rfind("invalid JSON schema", 0) == 0 ||
             m.rfind("the JSON schema cannot be enforced", 0) == 0));
      continue;
    }
    ++compiled;
    matcher m(*g);
    for (const char* probe : {"{\"a\":1}", "[1,2]", "\"abc\"", "3", "null", "{\"a\":{\"b\":[]}}"}) m.allows(probe);
  }
  CHECK(compiled > 50);
}
