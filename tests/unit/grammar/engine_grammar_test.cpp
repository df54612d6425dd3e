// Structured output through the continuous-batching engine with a real model: the prompt does not
// move the grammar, the text streamed is what the grammar allows, and a grammar that fails ends
// its request with an error while the others go on.
#include <catch2/catch.hpp>
#include <future>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loaded_model.hpp"
#include "spite/grammar/json_schema.hpp"
#include "spite/models/model.hpp"
#include "spite/scheduler/engine.hpp"

using namespace spite;

namespace {

struct pending {
  std::promise<scheduler::generation_result> done;
  std::string streamed;
};

}  // namespace

TEST_CASE("engine: JSON-schema requests produce valid JSON beside a failing grammar", "[grammar][engine]") {
  const test::loaded_model l = test::load_model("models/stories260K.gguf");
  auto eng = scheduler::engine::create(*l.model, l.tok, {.max_concurrent = 3, .n_ctx = 512, .threads = 1});
  if (!eng) FAIL(eng.err().message);
  auto g = grammar::json_schema_grammar(nlohmann::ordered_json::parse(R"({"type":"object","properties":{
      "hero":{"type":"string","minLength":1,"maxLength":12},"age":{"type":"integer","minimum":1,"maximum":99},
      "happy":{"type":"boolean"}},"required":["hero","age","happy"]})"));
  REQUIRE(g.ok());
  auto hostile = grammar::grammar::parse(R"(root ::= x*
x ::= ( [a-z ] | [a-z ] [a-z ] | [a-z ] x [a-z ] )+)");
  REQUIRE(hostile.ok());
  const auto prompt = *l.tok->tokenize("Once upon a time, there was a little girl named");

  std::vector<std::unique_ptr<pending>> runs;
  for (int i = 0; i < 4; ++i) {
    auto p = std::make_unique<pending>();
    scheduler::generation_request r;
    r.prompt = prompt;
    r.n_predict = 300;
    r.sampling.seed = static_cast<std::uint64_t>(i);
    r.sampling.temperature = i == 0 ? 0.0f : 0.9f;
    r.sampling.grammar = i == 3 ? *hostile : *g;  // the engine fills in the vocabulary
    pending* raw = p.get();
    r.on_text = [raw](std::string_view t) { raw->streamed += t; };
    r.on_done = [raw](const scheduler::generation_result& res) { raw->done.set_value(res); };
    REQUIRE((*eng)->submit(std::move(r)).ok());
    runs.push_back(std::move(p));
  }
  for (int i = 0; i < 4; ++i) {
    auto fut = runs[static_cast<std::size_t>(i)]->done.get_future();
    REQUIRE(fut.wait_for(std::chrono::seconds(120)) == std::future_status::ready);
    const auto res = fut.get();
    INFO("request " << i << ": " << res.stop_reason << " after " << res.generated << " tokens: " << res.text);
    if (i == 3) {
      CHECK(res.stop_reason == "error");
      REQUIRE(res.failure.has_value());
      CHECK(res.failure->message.rfind("grammar: ", 0) == 0);
      continue;
    }
    REQUIRE(res.stop_reason == "stop");
    CHECK(res.text == runs[static_cast<std::size_t>(i)]->streamed);
    const auto j = nlohmann::json::parse(res.text, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    REQUIRE(j["hero"].is_string());
    CHECK_FALSE(j["hero"].get<std::string>().empty());
    REQUIRE(j["age"].is_number_integer());
    CHECK(j["age"].get<int>() >= 1);
    CHECK(j["age"].get<int>() <= 99);
    CHECK(j["happy"].is_boolean());
  }
}
