// The engine's prompt cache: a request whose prompt begins with what a free sequence already
// holds evaluates only the rest, reports the reused tokens, and still produces the reference
// engine's greedy continuation. A recurrent-state model reuses its state only when the new
// prompt extends the whole cached sequence, and starts over otherwise.
#include <catch2/catch.hpp>
#include <future>
#include <string>
#include <vector>

#include "loaded_model.hpp"
#include "spite/scheduler/engine.hpp"

using namespace spite;

namespace {

struct loaded {
  test::loaded_model m;
  nlohmann::json golden;
};

loaded load(const std::string& model_rel, const std::string& golden_name) {
  return {test::load_model(model_rel), test::load_json(test::shared_path("golden/logits/" + golden_name))};
}

struct outcome {
  scheduler::generation_result result;
  std::vector<std::int32_t> ids;
};

outcome generate(scheduler::engine& eng, std::vector<std::int32_t> prompt, std::int32_t n_predict) {
  auto done = std::make_shared<std::promise<scheduler::generation_result>>();
  auto ids = std::make_shared<std::vector<std::int32_t>>();
  scheduler::generation_request r;
  r.prompt = std::move(prompt);
  r.n_predict = n_predict;
  r.sampling.temperature = 0;
  r.top_logprobs = 0;
  r.on_token = [ids](const scheduler::token_info& t) { ids->push_back(t.id); };
  r.on_done = [done](const scheduler::generation_result& res) { done->set_value(res); };
  auto fut = done->get_future();
  REQUIRE(eng.submit(std::move(r)).ok());
  REQUIRE(fut.wait_for(std::chrono::seconds(120)) == std::future_status::ready);
  outcome o{fut.get(), *ids};
  INFO(o.result.stop_reason);
  REQUIRE(!o.result.failure);
  return o;
}

// The golden greedy tokens, compared while the reference's top-1 margin is clear (end-of-generation
// tokens end our run early; the reference goes on).
void check_greedy(const nlohmann::json& run, const std::vector<std::int32_t>& ours) {
  const auto greedy = run.at("greedy").get<std::vector<std::int32_t>>();
  std::size_t compared = 0;
  for (std::size_t step = 0; step < ours.size() && step < greedy.size(); ++step) {
    const auto& ref = step == 0 ? run.at("positions").back() : run.at("greedy_steps")[step - 1];
    if (ref.at("top")[0][1].get<double>() - ref.at("top")[1][1].get<double>() <= 1e-3) break;
    INFO("greedy step " << step);
    REQUIRE(ours[step] == greedy[step]);
    ++compared;
  }
  CHECK(compared >= 4);
}

void check_prompt_cache(const loaded& l, bool recurrent) {
  const auto& runs = l.golden.at("runs");
  const auto long_prompt = runs[2].at("tokens").get<std::vector<std::int32_t>>();
  const auto other_prompt = runs[1].at("tokens").get<std::vector<std::int32_t>>();
  REQUIRE(long_prompt.size() > 100);
  auto eng = scheduler::engine::create(*l.m.model, l.m.tok, {.max_concurrent = 1, .n_ctx = 512, .threads = 2});
  if (!eng) FAIL(eng.err().message);

  // One predicted token is sampled and never evaluated: the sequence holds exactly the prompt.
  const std::vector<std::int32_t> head(long_prompt.begin(), long_prompt.begin() + 100);
  const outcome first = generate(**eng, head, 1);
  CHECK(first.result.cached_tokens == 0);

  const outcome extended = generate(**eng, long_prompt, 16);
  CHECK(extended.result.cached_tokens == 100);
  CHECK(extended.result.prompt_tokens == static_cast<std::int32_t>(long_prompt.size()));
  check_greedy(runs[2], extended.ids);

  if (!recurrent) {
    // The same prompt again: all but its last token come from the cache.
    const outcome again = generate(**eng, long_prompt, 16);
    CHECK(again.result.cached_tokens == static_cast<std::int32_t>(long_prompt.size()) - 1);
    check_greedy(runs[2], again.ids);
  }

  // A prompt that diverges early: a KV cache keeps the common prefix, a recurrent state starts over.
  std::size_t common = 0;
  while (common < other_prompt.size() && other_prompt[common] == long_prompt[common]) ++common;
  const outcome other = generate(**eng, other_prompt, 16);
  CHECK(other.result.cached_tokens == (recurrent ? 0 : static_cast<std::int32_t>(common)));
  check_greedy(runs[1], other.ids);
}

}  // namespace

TEST_CASE("prompt cache: a KV-cache model reuses the longest common prefix and keeps the golden output",
          "[scheduler][prompt_cache]") {
  check_prompt_cache(load("models/stories260K.gguf", "stories260K.gguf.json"), false);
}

TEST_CASE("prompt cache: a hybrid recurrent model reuses its state only to extend it", "[scheduler][prompt_cache]") {
  check_prompt_cache(load("models/tiny/tiny-qwen35.f32.gguf", "tiny-qwen35.f32.gguf.json"), true);
}

TEST_CASE("prompt cache: turned off, every prompt is evaluated in full", "[scheduler][prompt_cache]") {
  const loaded l = load("models/stories260K.gguf", "stories260K.gguf.json");
  const auto prompt = l.golden.at("runs")[2].at("tokens").get<std::vector<std::int32_t>>();
  auto eng = scheduler::engine::create(*l.m.model, l.m.tok, {.max_concurrent = 1, .n_ctx = 512, .threads = 2, .prompt_cache = false});
  if (!eng) FAIL(eng.err().message);
  generate(**eng, prompt, 2);
  const outcome again = generate(**eng, prompt, 16);
  CHECK(again.result.cached_tokens == 0);
  check_greedy(l.golden.at("runs")[2], again.ids);
}

TEST_CASE("prompt cache: with several free sequences the one holding the longest prefix is chosen",
          "[scheduler][prompt_cache]") {
  const loaded l = load("models/stories260K.gguf", "stories260K.gguf.json");
  const auto& runs = l.golden.at("runs");
  const auto a = runs[2].at("tokens").get<std::vector<std::int32_t>>();
  const auto b = runs[1].at("tokens").get<std::vector<std::int32_t>>();
  auto eng = scheduler::engine::create(*l.m.model, l.m.tok, {.max_concurrent = 3, .n_ctx = 512, .threads = 2});
  if (!eng) FAIL(eng.err().message);
  generate(**eng, a, 1);
  generate(**eng, b, 1);  // goes to a least recently used sequence, the one holding `a` stays
  const outcome again_a = generate(**eng, a, 16);
  CHECK(again_a.result.cached_tokens == static_cast<std::int32_t>(a.size()) - 1);
  check_greedy(runs[2], again_a.ids);
  const outcome again_b = generate(**eng, b, 16);
  CHECK(again_b.result.cached_tokens == static_cast<std::int32_t>(b.size()) - 1);
  check_greedy(runs[1], again_b.ids);
}
