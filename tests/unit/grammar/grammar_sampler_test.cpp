// The grammar sampler: in a chain with a toy vocabulary, then end to end with real vocabularies:
// random logits, a JSON schema, and the detokenized output must parse and satisfy the schema.
#include <catch2/catch.hpp>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shared_data.hpp"
#include "spite/gguf/file.hpp"
#include "spite/grammar/json_schema.hpp"
#include "spite/grammar/matcher.hpp"
#include "spite/scheduler/sampler.hpp"
#include "spite/scheduler/sampler_registry.hpp"
#include "spite/tokenizer/tokenizer.hpp"

using namespace spite;
using scheduler::sampling_params;

namespace {

std::shared_ptr<const grammar::grammar> gbnf(const std::string& text) {
  auto g = grammar::grammar::parse(text);
  if (!g) FAIL(g.err().message);
  return *g;
}

std::shared_ptr<const grammar::grammar> schema(const std::string& text) {
  auto g = grammar::json_schema_grammar(nlohmann::ordered_json::parse(text));
  if (!g) FAIL(g.err().message);
  return *g;
}

std::shared_ptr<const tokenizer::tokenizer> load_tokenizer(const std::string& rel) {
  auto f = gguf::file::open(test::shared_path(rel).string());
  REQUIRE(f.ok());
  auto t = tokenizer::tokenizer::from_metadata(f->meta());
  if (!t) FAIL(t.err().message);
  return *t;
}

std::unique_ptr<scheduler::sampler_chain> chain_for(const sampling_params& p) {
  auto c = scheduler::make_chain(p);
  if (!c) FAIL(c.err().message);
  return std::move(c).value();
}

std::vector<float> random_logits(std::mt19937& rng, std::size_t n) {
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> out(n);
  for (auto& l : out) l = d(rng);
  return out;
}

// Samples until an end token (or `cap` tokens); the text is what the engine would stream.
struct generation {
  std::string text;
  int tokens = 0;
  bool ended = false;
  std::optional<error> failure;
};

generation generate(const tokenizer::tokenizer& tok, scheduler::sampler_chain& chain, std::uint32_t seed, int cap) {
  std::mt19937 rng(seed);
  generation g;
  const std::size_t n_vocab = tok.vocabulary().size();
  for (; g.tokens < cap; ++g.tokens) {
    const std::int32_t t = chain.sample(random_logits(rng, n_vocab));
    if ((g.failure = chain.failure())) return g;
    if (tok.vocabulary().is_eog(t)) {
      g.ended = true;
      return g;
    }
    g.text += tok.piece(t, false);
  }
  return g;
}

const char* const person_schema = R"({"type":"object","properties":{
    "name":{"type":"string","minLength":1,"maxLength":8},
    "age":{"type":"integer","minimum":0,"maximum":120},
    "kind":{"enum":["cat","dog"]},
    "tags":{"type":"array","items":{"type":"string","maxLength":3},"maxItems":3},
    "ok":{"type":"boolean"}},
  "required":["name","age","kind"],"additionalProperties":false})";

void check_person(const std::string& text) {
  INFO("output: " << text);
  const auto j = nlohmann::json::parse(text, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  REQUIRE(j.is_object());
  REQUIRE(j.contains("name"));
  REQUIRE(j["name"].is_string());
  CHECK(!j["name"].get<std::string>().empty());
  REQUIRE(j["age"].is_number_integer());
  CHECK(j["age"].get<int>() >= 0);
  CHECK(j["age"].get<int>() <= 120);
  REQUIRE(j["kind"].is_string());
  CHECK((j["kind"] == "cat" || j["kind"] == "dog"));
  if (j.contains("tags")) {
    REQUIRE(j["tags"].is_array());
    CHECK(j["tags"].size() <= 3);
    for (const auto& t : j["tags"]) CHECK(t.is_string());
  }
  if (j.contains("ok")) CHECK(j["ok"].is_boolean());
  for (const auto& [k, _] : j.items()) CHECK((k == "name" || k == "age" || k == "kind" || k == "tags" || k == "ok"));
}

}  // namespace

TEST_CASE("grammar sampler: only allowed tokens, end only where the grammar ends", "[grammar][sampler]") {
  // ids:                          0    1    2     3     4    5    6
  auto vocab = std::make_shared<const grammar::vocabulary>(std::vector<std::string>{"a", "b", "ab", "ba", "", "c", "</s>"},
                                                           std::vector<std::int32_t>{6});
  sampling_params p;
  p.temperature = 0.0f;
  p.grammar = gbnf(R"(root ::= "ab" "c"?)");
  p.grammar_vocab = vocab;
  auto chain = chain_for(p);
  CHECK(chain->describe() == "grammar -> greedy");
  // Prompt tokens do not move the grammar.
  chain->accept_prompt(1);
  chain->accept_prompt(1);
  // "b" is best but not allowed; "a" and "ab" are.
  CHECK(chain->sample(std::vector<float>{1, 5, 2, 4, 9, 0, 8}) == 2);
  auto copy = chain->clone_chain();
  // After "ab": "c" or the end; the empty token never.
  CHECK(chain->sample(std::vector<float>{9, 9, 9, 9, 10, 1, 0}) == 5);
  CHECK(chain->sample(std::vector<float>{9, 9, 9, 9, 10, 1, 0}) == 6);
  // The clone kept the state from before "c".
  CHECK(copy->sample(std::vector<float>{0, 0, 0, 0, 0, 1, 2}) == 6);
  CHECK_FALSE(chain->failure());
  // Going on after the end fails the request instead of inventing text.
  chain->sample(std::vector<float>{1, 1, 1, 1, 1, 1, 1});
  REQUIRE(chain->failure());
  CHECK(chain->failure()->message.find("after the end of the grammar") != std::string::npos);
}

TEST_CASE("grammar sampler: a dead end fails the request cleanly", "[grammar][sampler]") {
  auto vocab = std::make_shared<const grammar::vocabulary>(std::vector<std::string>{"a", "b", "</s>"}, std::vector<std::int32_t>{2});
  sampling_params p;
  p.top_k = 0;
  p.grammar = gbnf(R"(root ::= "a" "x")");
  p.grammar_vocab = vocab;
  auto chain = chain_for(p);
  CHECK(chain->sample(std::vector<float>{0, 0, 0}) == 0);
  CHECK_FALSE(chain->failure());
  chain->sample(std::vector<float>{0, 0, 0});
  REQUIRE(chain->failure());
  CHECK(chain->failure()->message == "grammar: no token of the vocabulary can continue the text here");
  // The registry knows it too; without a grammar it changes nothing.
  const std::vector<std::string_view> names{"grammar", "greedy"};
  sampling_params none;
  auto plain = scheduler::make_chain(none, names);
  REQUIRE(plain.ok());
  CHECK((*plain)->sample(std::vector<float>{0, 3, 1}) == 1);
  // A grammar without a vocabulary is a bad request, not a crash.
  sampling_params half;
  half.grammar = p.grammar;
  CHECK_FALSE(scheduler::validate(half).ok());
}

TEST_CASE("grammar sampler: JSON schema end to end, stories260K vocabulary, several seeds", "[grammar][sampler]") {
  const auto tok = load_tokenizer("models/stories260K.gguf");
  const auto vocab = scheduler::make_grammar_vocabulary(*tok);
  const auto g = schema(person_schema);
  for (const float temperature : {0.0f, 0.8f, 1.5f}) {
    for (std::uint32_t seed = 1; seed <= 6; ++seed) {
      sampling_params p;
      p.temperature = temperature;
      p.top_k = seed % 2 == 0 ? 0 : 40;  // both the best-first and the whole-vocabulary paths
      p.seed = seed;
      p.repeat_penalty = 1.1f;
      p.grammar = g;
      p.grammar_vocab = vocab;
      auto chain = chain_for(p);
      const auto out = generate(*tok, *chain, seed, 1000);
      INFO("temperature " << temperature << " seed " << seed << " tokens " << out.tokens << " text " << out.text);
      REQUIRE_FALSE(out.failure);
      REQUIRE(out.ended);
      check_person(out.text);
    }
  }
}

TEST_CASE("grammar sampler: checking the best candidates first changes no choice", "[grammar][sampler]") {
  const auto tok = load_tokenizer("models/stories260K.gguf");
  const auto vocab = scheduler::make_grammar_vocabulary(*tok);
  const auto g = schema(person_schema);
  for (std::uint32_t seed = 11; seed <= 14; ++seed) {
    sampling_params p;
    p.top_k = 8;
    p.seed = seed;
    p.grammar = g;
    p.grammar_vocab = vocab;
    auto standard = chain_for(p);  // grammar told that top_k keeps 8
    const std::vector<std::string_view> names{"grammar", "top_k", "top_p", "min_p", "temperature", "dist"};
    auto full = scheduler::make_chain(p, names);  // the registry's grammar checks every token
    REQUIRE(full.ok());
    const auto a = generate(*tok, *standard, seed, 1000);
    const auto b = generate(*tok, **full, seed, 1000);
    CHECK(a.text == b.text);
    CHECK(a.ended == b.ended);
  }
}

TEST_CASE("matcher: a whole-vocabulary query agrees with one check per token", "[grammar][sampler]") {
  const auto tok = load_tokenizer("models/vocab/ggml-vocab-llama-bpe.gguf");
  const auto vocab = scheduler::make_grammar_vocabulary(*tok);
  const auto g = schema(person_schema);
  for (const std::string prefix : {"", "{\"name\":\"", "{\"name\":\"a\xC3", "{\"name\":\"ab\\", "{ \"name\":\"x\",\n",
                                   "{\"name\":\"x\",\"age\":1", "{\"name\":\"x\",\"age\":1,\"kind\":\"cat\"}"}) {
    INFO("prefix: " << prefix);
    grammar::matcher m(g);
    REQUIRE(m.accept(prefix));
    std::vector<std::uint8_t> mask;
    m.allowed_tokens(*vocab, mask);
    std::size_t disagree = 0, allowed = 0;
    for (std::int32_t id = 0; id < static_cast<std::int32_t>(vocab->size()); ++id) {
      allowed += mask[static_cast<std::size_t>(id)];
      disagree += (mask[static_cast<std::size_t>(id)] != 0) != m.allows_token(*vocab, id) ? 1 : 0;
    }
    CHECK(disagree == 0);
    CHECK(allowed > 0);
  }
}

TEST_CASE("grammar sampler: recursive schema with a 128k byte-level BPE vocabulary", "[grammar][sampler]") {
  const auto tok = load_tokenizer("models/vocab/ggml-vocab-llama-bpe.gguf");
  const auto vocab = scheduler::make_grammar_vocabulary(*tok);
  const auto g = schema(R"({"$defs":{"node":{"type":"object","properties":{
      "v":{"type":"integer","minimum":-5,"maximum":5},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},
    "$ref":"#/$defs/node"})");
  for (std::uint32_t seed = 1; seed <= 3; ++seed) {
    sampling_params p;
    p.temperature = 1.0f;
    p.top_k = seed == 1 ? 0 : 40;
    p.seed = seed;
    p.grammar = g;
    p.grammar_vocab = vocab;
    auto chain = chain_for(p);
    const auto start = std::chrono::steady_clock::now();
    const auto out = generate(*tok, *chain, seed, 400);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    INFO("seed " << seed << " tokens " << out.tokens << " (" << ms / std::max(out.tokens, 1) << " ms/token) text " << out.text);
    REQUIRE_FALSE(out.failure);
    // A recursive schema need not finish in 400 random tokens; whatever came out must be a
    // prefix the grammar still accepts, and a finished one must parse.
    grammar::matcher m(g);
    CHECK(m.accept(out.text));
    if (out.ended) {
      const auto j = nlohmann::json::parse(out.text, nullptr, false);
      REQUIRE_FALSE(j.is_discarded());
      CHECK(j["v"].is_number_integer());
    }
    CHECK(ms / std::max(out.tokens, 1) < 250.0);
  }
}

TEST_CASE("grammar sampler: a hostile grammar is refused or bounded in time", "[grammar][sampler]") {
  const auto tok = load_tokenizer("models/stories260K.gguf");
  const auto vocab = scheduler::make_grammar_vocabulary(*tok);
  // Exponentially many parses of every prefix, and the number of distinct stacks growing with
  // each character: the matcher must fail the request, quickly, instead of hanging.
  sampling_params p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.grammar = gbnf(R"(root ::= x*
x ::= ( [a-z ] | [a-z ] [a-z ] | [a-z ] x [a-z ] )+)");
  p.grammar_vocab = vocab;
  auto chain = chain_for(p);
  const auto start = std::chrono::steady_clock::now();
  const auto out = generate(*tok, *chain, 7, 300);
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("tokens " << out.tokens << " in " << seconds << " s, text " << out.text);
  CHECK(seconds < 20.0);
  CHECK((out.failure.has_value() || out.tokens == 300));
  if (out.failure) CHECK(out.failure->message.rfind("grammar: ", 0) == 0);
}
