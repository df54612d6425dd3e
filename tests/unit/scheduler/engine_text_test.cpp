// The text the engine streams: special tokens (a format's control markers) are left out unless
// the request asks for them, as gpt-oss tool calls do.
#include <catch2/catch.hpp>
#include <future>
#include <string>

#include "loaded_model.hpp"
#include "spite/scheduler/engine.hpp"

using namespace spite;

namespace {

std::string generate_text(scheduler::engine& eng, const tokenizer::tokenizer& tok, bool special_text) {
  auto done = std::make_shared<std::promise<scheduler::generation_result>>();
  scheduler::generation_request r;
  r.prompt = *tok.tokenize("Once upon a time");
  r.n_predict = 3;
  r.special_text = special_text;
  r.sampling.temperature = 0;
  r.sampling.logit_bias = {{tok.vocabulary().special().bos, 100.0f}};  // a control token, not end-of-generation
  r.on_done = [done](const scheduler::generation_result& res) { done->set_value(res); };
  auto fut = done->get_future();
  REQUIRE(eng.submit(std::move(r)).ok());
  REQUIRE(fut.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  const auto res = fut.get();
  REQUIRE(!res.failure);
  CHECK(res.generated == 3);
  return res.text;
}

}  // namespace

TEST_CASE("engine text: special tokens appear only when the request asks for them", "[scheduler]") {
  const test::loaded_model l = test::load_model("models/stories260K.gguf", 128);
  auto eng = scheduler::engine::create(*l.model, l.tok, {.max_concurrent = 1, .n_ctx = 128, .threads = 1});
  REQUIRE(eng.ok());
  const std::string bos(l.tok->vocabulary().text(l.tok->vocabulary().special().bos));
  CHECK(generate_text(**eng, *l.tok, false).empty());
  CHECK(generate_text(**eng, *l.tok, true) == bos + bos + bos);
}
