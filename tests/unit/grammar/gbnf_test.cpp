// GBNF parsing (errors with line:column, limits) and the matcher (whole strings, prefixes,
// partial UTF-8, ambiguity bounds).
#include <catch2/catch.hpp>
#include <chrono>
#include <random>
#include <string>

#include "spite/grammar/grammar.hpp"
#include "spite/grammar/matcher.hpp"

using namespace spite::grammar;

namespace {

std::shared_ptr<const grammar> compile(const std::string& text) {
  auto g = grammar::parse(text);
  INFO(text);
  if (!g) FAIL(g.err().message);
  return *g;
}

std::string parse_error(const std::string& text, const limits& lim = {}) {
  auto g = grammar::parse(text, "root", lim);
  INFO(text);
  REQUIRE_FALSE(g.ok());
  return g.err().message;
}

const char* const arithmetic = R"g(
# integer arithmetic with precedence
root   ::= expr
expr   ::= term (ws [-+] ws term)*
term   ::= factor (ws [*/] ws factor)*
factor ::= number | "(" ws expr ws ")" | "-" factor
number ::= [0-9]+
ws     ::= " "?
)g";

const char* const json_gbnf = R"g(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::=
  "{" ws (
            string ws ":" ws value ws
    ("," ws string ws ":" ws value ws)*
  )? "}"
array  ::=
  "[" ws (
            value ws
    ("," ws value ws)*
  )? "]"
string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
  )* "\""
number ::= "-"? ([0-9] | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
ws ::= [ \t\n]{0,8}
)g";

}  // namespace

TEST_CASE("gbnf errors carry line and column", "[grammar][gbnf]") {
  CHECK(parse_error("root ::= \"abc") == "gbnf 1:10: unterminated string literal");
  CHECK(parse_error("root ::= [a-z") == "gbnf 1:10: unterminated character class");
  CHECK(parse_error("root ::= foo\n") == "gbnf 1:10: undefined rule 'foo'");
  CHECK(parse_error("root ::= \"a\"\nroot ::= \"b\"") == "gbnf 2:1: rule 'root' is defined twice (first at 1:1)");
  CHECK(parse_error("root := \"a\"") == "gbnf 1:6: expected '::=' after the rule name 'root'");
  CHECK(parse_error("root ::= \"a\" )") == "gbnf 1:14: unexpected ')'");
  CHECK(parse_error("root ::= (\"a\"") == "gbnf 1:14: missing ')' for the '(' at 1:10");
  CHECK(parse_error("root ::= *") == "gbnf 1:10: '*' has nothing to repeat");
  CHECK(parse_error("root ::= \"a\"{3,1}") == "gbnf 1:13: repetition bounds {3,1}: max below min");
  CHECK(parse_error("root ::= \"\\q\"") == "gbnf 1:11: unknown escape '\\q'");
  CHECK(parse_error("root ::= [z-a]") == "gbnf 1:11: character range out of order");
  CHECK(parse_error("root ::= []") == "gbnf 1:10: empty character class");
  CHECK(parse_error("  # only a comment\n") == "gbnf 1:1: the grammar has no rules");
  CHECK(parse_error("other ::= \"x\"") == "gbnf: no rule named 'root'");
  // Columns count characters, not bytes.
  CHECK(parse_error("root ::= \"é\" | *") == "gbnf 1:16: '*' has nothing to repeat");
}

TEST_CASE("gbnf refuses left recursion and roots that cannot finish", "[grammar][gbnf]") {
  CHECK(parse_error("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]") ==
        "gbnf 2:1: left recursion: expr -> expr (a rule may not start with itself; use repetition instead)");
  // Indirect, through a rule that can be empty.
  const auto indirect = parse_error("root ::= a\na ::= b c \"x\" | \"y\"\nb ::= \"\" | \"z\"\nc ::= a \"w\"");
  CHECK(indirect.find("left recursion: a -> c -> a") != std::string::npos);
  CHECK(parse_error("root ::= \"a\" root") ==
        "gbnf 1:1: rule 'root' can never finish (every alternative needs itself or an empty set of characters)");
}

TEST_CASE("gbnf limits bound what a request can make the parser build", "[grammar][gbnf]") {
  limits small;
  small.max_input_bytes = 16;
  CHECK(parse_error("root ::= \"aaaaaaaaaaaaaaaaa\"", small).find("more than the limit of 16") != std::string::npos);
  CHECK(parse_error("root ::= \"a\"{0,20000}").find("repetition bound above 10000") != std::string::npos);
  std::string many = "root ::=";
  for (int i = 0; i < 11; ++i) many += " \"a\"{0,10000}";
  CHECK(parse_error(many).find("more than 100000 rules") != std::string::npos);
  limits few;
  few.max_symbols = 1000;
  CHECK(parse_error("root ::= \"0123456789\"{200}", few).find("grows beyond 1000 symbols") != std::string::npos);
  std::string deep = "root ::= ";
  for (int i = 0; i < 100; ++i) deep += "(";
  deep += "\"a\"";
  for (int i = 0; i < 100; ++i) deep += ")";
  CHECK(parse_error(deep).find("nested deeper than 64") != std::string::npos);
}

TEST_CASE("gbnf syntax: escapes, classes, repetition bounds, continuation lines", "[grammar][gbnf]") {
  const auto g = compile(R"g(root ::= "a\n\t\x41\u00e9\U0001F600" [^\]\-a-c] . "end"
  | "b"{2} "c"{1,} "d"{0,2} "e"{2,3}   # comment
  | "(" ( "x" | "y" )* ")")g");
  CHECK(matches(g, "a\n\tAé😀zQend"));
  CHECK(matches(g, "a\n\tAé😀-Qend") == false);
  CHECK(matches(g, "a\n\tAé😀]Qend") == false);
  CHECK(matches(g, "a\n\tAé😀d😀end"));
  CHECK(matches(g, "bbcee"));
  CHECK(matches(g, "bbcccddeee"));
  CHECK_FALSE(matches(g, "bcee"));
  CHECK_FALSE(matches(g, "bbee"));
  CHECK_FALSE(matches(g, "bbcdddee"));
  CHECK_FALSE(matches(g, "bbceeee"));
  CHECK(matches(g, "()"));
  CHECK(matches(g, "(xyyx)"));
  CHECK_FALSE(matches(g, "(xz)"));
  // to_string writes a grammar the parser reads back to the same language.
  const auto again = compile(g->to_string());
  CHECK(matches(again, "bbcccddeee"));
  CHECK(matches(again, "a\n\tAé😀d😀end"));
  CHECK_FALSE(matches(again, "bbceeee"));
}

TEST_CASE("matcher: arithmetic", "[grammar][matcher]") {
  const auto g = compile(arithmetic);
  for (const char* ok : {"1", "1+2", "1 + 2 * (3 - -4)", "((7))", "12/4*3", "-(1)"}) {
    INFO(ok);
    CHECK(matches(g, ok));
  }
  for (const char* bad : {"", "1+", "(1", "1 ++ 2", "a", "1  + 2", ")"}) {
    INFO(bad);
    CHECK_FALSE(matches(g, bad));
  }
  matcher m(g);
  CHECK(m.accept("(1 + "));
  CHECK_FALSE(m.can_end());
  CHECK_FALSE(m.allows(")"));
  CHECK(m.allows("2)"));
  CHECK(m.accept("2)"));
  CHECK(m.can_end());
}

TEST_CASE("matcher: JSON", "[grammar][matcher]") {
  const auto g = compile(json_gbnf);
  for (const char* ok : {R"({})", R"({"a": 1})", R"({"a":[1,2.5e-3,{"b":null}],"c":"\u00e9\n"})",
                         "{\n  \"k\": [true, false]\n}", R"({"s":"ü😀"})"}) {
    INFO(ok);
    CHECK(matches(g, ok));
  }
  for (const char* bad : {R"([])", R"({"a"})", R"({"a":01})", R"({"a":"\x"})", R"({"a":1,})", "{\"a\":\"\x01\"}",
                          R"({"a": tru})"}) {
    INFO(bad);
    CHECK_FALSE(matches(g, bad));
  }
}

TEST_CASE("matcher: nested repetition with bounds", "[grammar][matcher]") {
  const auto g = compile(R"(root ::= row{2,3}
row ::= "[" [a-z]{1,3} ("," [a-z]{1,3}){0,2} "]")");
  CHECK(matches(g, "[a][b]"));
  CHECK(matches(g, "[abc,de,f][x][y,zz]"));
  CHECK_FALSE(matches(g, "[a]"));
  CHECK_FALSE(matches(g, "[a][b][c][d]"));
  CHECK_FALSE(matches(g, "[abcd][b]"));
  CHECK_FALSE(matches(g, "[a,b,c,d][b]"));
  CHECK_FALSE(matches(g, "[][b]"));
}

TEST_CASE("matcher: characters split across pieces of text", "[grammar][matcher]") {
  const auto g = compile(R"(root ::= "é" [а-я]+)");
  matcher m(g);
  const std::string text = "éжё";  // "ё" is outside а-я
  CHECK(m.accept(text.substr(0, 1)));      // half of é
  CHECK_FALSE(m.can_end());
  CHECK_FALSE(m.allows("\x41"));           // not a continuation byte
  CHECK(m.accept(text.substr(1, 2)));      // rest of é, first byte of ж
  CHECK(m.accept(text.substr(3, 1)));      // rest of ж
  CHECK(m.can_end());
  CHECK_FALSE(m.allows(text.substr(5)));   // ё
  CHECK(m.allows("\xD0"));                 // could still become а-п
  CHECK_FALSE(m.allows("\xC3"));           // U+00C0..U+00FF: nothing in the class
  CHECK_FALSE(m.allows("\xFF"));           // never UTF-8
  CHECK_FALSE(m.allows("\xED\xA0\x80"));   // a surrogate
}

TEST_CASE("matcher: vocabulary queries agree with one-token checks", "[grammar][matcher]") {
  const auto g = compile(R"(root ::= "{" [a-z]* "}")");
  vocabulary v({"{", "}", "ab", "a}", "{a", "", "x{", "\xC3", "z}", "</s>"}, {9});
  matcher m(g);
  std::vector<std::uint8_t> mask;
  m.allowed_tokens(v, mask);
  CHECK(mask == std::vector<std::uint8_t>{1, 0, 0, 0, 1, 0, 0, 0, 0, 0});
  REQUIRE(m.accept_token(v, 4));
  m.allowed_tokens(v, mask);
  CHECK(mask == std::vector<std::uint8_t>{0, 1, 1, 1, 0, 0, 0, 0, 1, 0});
  for (std::int32_t id = 0; id < 10; ++id) CHECK(m.allows_token(v, id) == (mask[static_cast<std::size_t>(id)] != 0));
  REQUIRE(m.accept_token(v, 3));
  m.allowed_tokens(v, mask);
  CHECK(mask == std::vector<std::uint8_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  CHECK(m.accept_token(v, 9));
  CHECK(m.ended());
  CHECK_FALSE(m.accept_token(v, 0));
}

TEST_CASE("matcher: ambiguity is bounded, in stacks and in time", "[grammar][matcher]") {
  // Every prefix of a's has one parse per number of b's still owed: the stacks grow by one per
  // character until the cap fails the match cleanly.
  const auto owed = compile(R"(root ::= "a" root "b" | "a" root | "")");
  match_limits lim;
  lim.max_stacks = 64;
  matcher m(owed, lim);
  bool refused = false;
  for (int i = 0; i < 200 && !refused; ++i) refused = !m.accept("a");
  CHECK(refused);
  REQUIRE(m.failure().has_value());
  CHECK(m.failure()->message.find("parses alive at once") != std::string::npos);
  CHECK_FALSE(m.accept("b"));

  // Exponentially many ways to split the same text: de-duplication keeps the stacks few.
  const auto split = compile(R"(root ::= ("a" | "aa" | "aaa" | ("a" "a"?)+)*)");
  matcher fast(split);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 2000; ++i) REQUIRE(fast.accept("a"));
  CHECK(fast.can_end());
  CHECK(fast.stack_count() < 32);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("gbnf: random input never crashes the parser or the matcher", "[grammar][gbnf]") {
  // Text built from the grammar's own punctuation, names and escapes: most of it is refused, some
  // parses; whatever parses is then fed random text. Under the sanitizers this is a small fuzzer.
  const std::vector<std::string> pieces = {"root", " ::= ", "a", "b", " | ", "(", ")", "*", "+", "?", "{2}", "{1,3}", "{0,}",
                                           "\"x\"", "\"\\n\"", "[a-c]", "[^b]", ".", "\n", "#c\n", "\\", "\"", "[", "]",
                                           "{", "}", "\xC3\xA9", "\xFF", "a ::= ", "\nb ::= \"y\" a?"};
  std::mt19937 rng(1234);
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = "root ::= ";
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) text += pieces[rng() % pieces.size()];
    auto g = grammar::parse(text);
    if (!g) {
      CHECK(g.err().message.rfind("gbnf", 0) == 0);
      continue;
    }
    ++parsed;
    matcher m(*g);
    std::vector<std::uint8_t> mask;
    vocabulary v({"a", "b", "x", "y", "\n", "\xC3", "\xA9", "ab", "xy"}, {});
    for (int k = 0; k < 20; ++k) {
      m.allowed_tokens(v, mask);
      const auto id = static_cast<std::int32_t>(rng() % 9);
      CHECK(m.allows_token(v, id) == (mask[static_cast<std::size_t>(id)] != 0));
      m.accept_token(v, id);
    }
  }
  CHECK(parsed > 100);
}
