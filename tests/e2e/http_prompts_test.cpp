// Completion prompts beyond plain text against a real spited: token-id prompts (one array, an
// array of arrays, with echo) reproduce the golden continuations, and `suffix` frames the prompt
// with the model's fill-in-the-middle tokens exactly as those tokens written out would.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "http_api_support.hpp"
#include "models_daemon.hpp"
#include "spite/gguf/file.hpp"
#include "spite/gguf/writer.hpp"

using namespace std::chrono_literals;
using nlohmann::json;
using namespace spite::test;
using spite::test::api::check_golden;

namespace {

json error_of(const http_response& r) { return r.json().at("error"); }

}  // namespace

TEST_CASE("completions: token-id prompts give the golden continuations, echo shows their text") {
  const json golden = load_json(shared_path("golden/logits/stories260K.gguf.json"));
  const json& runs = golden.at("runs");
  models_daemon d({"stories=" + api::model_path("models/stories260K.gguf")});
  http_client c(d.port, "127.0.0.1", 120s);

  const json one = post_ok(c, "/v1/completions", {{"model", "stories"}, {"prompt", runs[1].at("tokens")},
                                                  {"max_tokens", 16}, {"temperature", 0}});
  check_golden(one["choices"][0].at("text").get<std::string>(), runs[1]);
  CHECK(one.at("usage").at("prompt_tokens") == runs[1].at("tokens").size());

  json arrays = json::array();
  for (const auto& r : runs) arrays.push_back(r.at("tokens"));
  const json many = post_ok(c, "/v1/completions", {{"model", "stories"}, {"prompt", arrays}, {"max_tokens", 16},
                                                   {"temperature", 0}});
  REQUIRE(many.at("choices").size() == runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) check_golden(many["choices"][i].at("text").get<std::string>(), runs[i]);

  // echo: the ids' text, and with logprobs each prompt token's (from the golden logits).
  const json echo = post_ok(c, "/v1/completions", {{"model", "stories"}, {"prompt", runs[0].at("tokens")}, {"max_tokens", 1},
                                                   {"temperature", 0}, {"echo", true}, {"logprobs", 0}});
  const std::string text = echo["choices"][0].at("text").get<std::string>();
  CHECK_THAT(text, Catch::StartsWith(runs[0].at("prompt").get<std::string>()));
  const json& lp = echo["choices"][0].at("logprobs");
  REQUIRE(lp.at("token_logprobs").size() == runs[0].at("tokens").size() + 1);
  const auto& positions = runs[0].at("positions");
  for (std::size_t i = 1; i < runs[0].at("tokens").size(); ++i) {
    const int id = runs[0]["tokens"][i].get<int>();
    for (const auto& [top_id, logit] : positions[i - 1].at("top").get<std::vector<std::pair<int, double>>>()) {
      if (top_id == id) CHECK(lp["token_logprobs"][i].get<double>() == Approx(logit - positions[i - 1].at("lse").get<double>()).margin(1e-4));
    }
  }

  SECTION("bad token prompts get 400 naming prompt") {
    for (const json& bad : {json::array({1, -5}), json::array({1, 1e9}), json::array({json::array({1, 2}), "x"}),
                            json::array({json::array()}), json::array({1.5}), json::array({1, 99999})}) {
      INFO(bad.dump());
      const auto r = c.post("/v1/completions", {{"model", "stories"}, {"prompt", bad}, {"max_tokens", 2}});
      CHECK(r.status == 400);
      CHECK(error_of(r).at("type") == "invalid_request_error");
    }
  }
}

TEST_CASE("completions: suffix frames the prompt with the model's fill-in-the-middle tokens") {
  temp_dir dir;
  const std::string coder = (dir / "coder.gguf").string();
  const auto made = run_process({SPITECTL_PATH, "mkmodel", "--shape", "stories15m", "--type", "Q8_0", "--vocab",
                                 api::model_path("models/vocab/ggml-vocab-deepseek-coder.gguf"), "--out", coder});
  REQUIRE(made.exit_code == 0);
  models_daemon d({"coder=" + coder, "stories=" + api::model_path("models/stories260K.gguf")});
  http_client c(d.port, "127.0.0.1", 120s);

  const std::string prefix = "def add(a, b):\n    return ", suffix = "\n\nprint(add(1, 2))\n";
  const json fim = post_ok(c, "/v1/completions", {{"model", "coder"}, {"prompt", prefix}, {"suffix", suffix},
                                                  {"max_tokens", 12}, {"temperature", 0}, {"logit_bias", {{"32014", -100}}}});
  // The same frame written out with the model's special tokens (prefix, suffix, middle).
  const auto ids = run_process({SPITECTL_PATH, "tokenize", "--model", coder, "--special", "--json", "--text",
                                "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>" + prefix + "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>" +
                                    suffix + "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>"});
  REQUIRE(ids.exit_code == 0);
  const json tokens = json::parse(ids.out).at("tokens");
  const json framed = post_ok(c, "/v1/completions", {{"model", "coder"}, {"prompt", tokens}, {"max_tokens", 12},
                                                     {"temperature", 0}, {"logit_bias", {{"32014", -100}}}});
  CHECK(fim.at("usage").at("prompt_tokens") == tokens.size());
  CHECK(fim["choices"][0].at("text") == framed["choices"][0].at("text"));
  CHECK(fim["choices"][0].at("text").get<std::string>().size() > 0);

  const auto no_fim = c.post("/v1/completions", {{"model", "stories"}, {"prompt", "Once"}, {"suffix", "end"}, {"max_tokens", 2}});
  CHECK(no_fim.status == 400);
  CHECK_THAT(error_of(no_fim).at("message").get<std::string>(), Catch::Contains("fill-in-the-middle"));
  const auto with_echo = c.post("/v1/completions", {{"model", "coder"}, {"prompt", "x"}, {"suffix", "y"}, {"echo", true}});
  CHECK(with_echo.status == 400);
  CHECK(error_of(with_echo).at("param") == "echo");
  const auto not_text = c.post("/v1/completions", {{"model", "coder"}, {"prompt", "x"}, {"suffix", 3}});
  CHECK(not_text.status == 400);
  CHECK(error_of(not_text).at("param") == "suffix");
}

namespace {

// A copy of `source` whose chat template is a harmony one (gpt-oss's channel format).
void copy_with_harmony_template(const std::string& source, const std::string& target) {
  auto f = spite::gguf::file::open(source);
  REQUIRE(f.ok());
  spite::gguf::writer w;
  for (const auto& e : f->meta().entries()) w.set(std::string(e.key), e.val);
  w.set("tokenizer.chat_template",
        spite::gguf::value::string(std::string("{# harmony: <|channel|> ... <|call|> #}{% for m in messages %}<|start|>{{ m.role }}"
                                       "<|message|>{{ m.content }}<|end|>{% endfor %}{% if add_generation_prompt %}"
                                       "<|start|>assistant{% endif %}")));
  for (const auto& t : f->tensors()) {
    REQUIRE(w.add_tensor(std::string(t.name), t.type, std::span(t.ne.data(), static_cast<std::size_t>(t.n_dims)), t.bytes()).ok());
  }
  REQUIRE(w.write_file(target).ok());
}

}  // namespace

TEST_CASE("chat with a harmony (gpt-oss) template: final channel as content, analysis as reasoning_content") {
  temp_dir dir;
  const std::string model = (dir / "harmony.gguf").string();
  copy_with_harmony_template(api::model_path("models/stories260K.gguf"), model);
  models_daemon d({"harmony=" + model});
  http_client c(d.port, "127.0.0.1", 120s);
  // The grammar makes even this tiny model answer in channels.
  const std::string answer = "<|channel|>analysis<|message|>A greeting.<|end|><|start|>assistant<|channel|>final<|message|>Hi there";
  std::string gbnf = "root ::= \"";
  for (char ch : answer) gbnf += ch == '"' || ch == '\\' ? std::string("\\") + ch : std::string(1, ch);
  gbnf += "\"";
  const json body = {{"model", "harmony"}, {"messages", {{{"role", "user"}, {"content", "Hello"}}}}, {"max_tokens", 200},
                     {"temperature", 0}, {"grammar", gbnf}};
  const json plain = post_ok(c, "/v1/chat/completions", body);
  const json& message = plain["choices"][0].at("message");
  CHECK(message.at("content") == "Hi there");
  CHECK(message.at("reasoning_content") == "A greeting.");

  json sbody = body;
  sbody["stream"] = true;
  const auto s = api::stream_post(c, "/v1/chat/completions", sbody);
  REQUIRE(s.status == 200);
  CHECK(s.done);
  std::string content, reasoning;
  for (const json& ch : s.chunks) {
    for (const auto& choice : ch.at("choices")) {
      const json& delta = choice.at("delta");
      if (delta.contains("content") && delta["content"].is_string()) content += delta["content"].get<std::string>();
      if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    }
  }
  CHECK(content == "Hi there");
  CHECK(reasoning == "A greeting.");
}
